"""The chat-level PEG builder (`common_chat_peg_builder`): the chat tags (chat/tags.py), the pieces the chat
formats share and llama.cpp's tool-call helpers (JSON, XML-like and python-style calls).

Node creation order follows the C++ builder call by call, since GBNF rule names embed node ids. Where a
model's output may go beyond what its template writes, a format asks the builder for the piece through a
hook (`call_opener`, `content_until_calls`, `tagged_call_choice`, ...): this builder makes llama.cpp's piece,
node for node, and the recovery's relaxed builder (recovery/relax.py) overrides the hooks to read more. A
format's build function never asks which builder it runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.analysis.model import CallForm, StringValues
from autoparser.chat.tags import VALUE_KEY, VALUE_STRING, VALUE_TOKEN, ChatTags
from autoparser.chat.tools import Function, Parameter, functions, parameters
from autoparser.peg import Arena, P
from autoparser.peg.nodes import C_SPACE
from autoparser.types import ToolDef, tools_to_openai

__all__ = ["COMMON_CHAT_MAX_PERMUTE", "ChatBuilder", "DerivedReasoning", "TaggedMarkers", "build_chat_peg_parser",
           "python_value_ends"]

# Beyond this many parsers a permutation would need 2^n rules; fall back to the given order.
COMMON_CHAT_MAX_PERMUTE = 6


Tools = Sequence[ToolDef | Mapping[str, Any]] | None


def _split_key(key: str) -> tuple[str, str]:
    """`"function.name"` -> ("function", "name"); a key without a dot is top level: ("", key)."""
    prefix, dot, field = key.partition(".")
    return (prefix, field) if dot else ("", key)


def _properties(params: Any) -> Mapping[str, Any]:
    props = params.get("properties") if isinstance(params, Mapping) else None
    return props if isinstance(props, Mapping) else {}


def _lead(s: str) -> str:
    return s[:len(s) - len(s.lstrip(C_SPACE))]


def _trail(s: str) -> str:
    return s[len(s.rstrip(C_SPACE)):]


@dataclass(frozen=True)
class TaggedMarkers:
    """The markers of one tagged call as the template writes them, whitespace included:
    `NAME_PREFIX name NAME_SUFFIX (ARG_PREFIX key ARG_SUFFIX value VALUE_SUFFIX)* CALL_CLOSE AFTER_CALL`, e.g.
    `<function=` `>\n` `<parameter=` `>\n` `\n</parameter>\n` `</function>\n` `</tool_call>`."""

    name_prefix: str
    name_suffix: str
    arg_prefix: str
    arg_suffix: str
    value_suffix: str
    call_close: str
    after_call: str = ""
    call_open: str = ""
    """The marker each call opens with where the template writes one per call (`<tool_call>`): the next
    call's, where a call's closers are left out."""
    typed_arg_suffix: str = ""
    """What the template writes after an argument's key before a value that is no string, where that differs from
    `arg_suffix` and the value closes alike (`TypedArgument.opener`: DSML's `" string="false">`)."""

    @property
    def readable(self) -> bool:
        """Whether a loose reading can tell the parts apart: an argument opener, a value closer, a call end."""
        return all(s.strip(C_SPACE) for s in (self.arg_prefix, self.value_suffix)) \
            and bool((self.call_close or self.after_call).strip(C_SPACE))

    @property
    def names_marked(self) -> bool:
        """Whether a marker says where a name begins, so that a call to an undeclared tool can be told apart."""
        return bool(self.name_prefix.strip(C_SPACE))


@dataclass(frozen=True)
class DerivedReasoning:
    """The reasoning block of a derived format (chat/generic.py), as data for `ChatBuilder.derived_reasoning`."""

    start: str
    end: str
    shown: bool
    """The template shows reasoning (its analysis found a block)."""
    read: bool
    """llama.cpp reads it: the request extracts reasoning and the block has a start or an end marker."""
    extracted: bool
    """The request extracts reasoning (`reasoning_format` is not none)."""
    call_markers: tuple[str, ...] = ()
    """Where calls begin (the section's or the first call's opener), when the request may call tools."""
    prompt_opened: bool = False
    """The prompt leaves this block open where llama.cpp reads none (chat/generic.py `_relaxed_build`)."""
    open_before_prompt: bool = False
    """The prompt opens it before the generation prompt begins: the output starts inside it."""
    typed: bool = False
    """The template writes this block only from typed content blocks, where llama.cpp reads none
    (`TemplateAnalysis.typed_reasoning`)."""


class ChatBuilder(ChatTags):
    """The chat tags, plus the pieces the formats share and the tool-call helpers of llama.cpp's
    `common_chat_peg_builder`, and the hooks where the relaxed builder reads more (see the module docstring)."""

    # --- small helpers -------------------------------------------------------------------------------------

    def tag_with_safe_content(self, tag_name: str, marker: str, p: P | str) -> P:
        """`(p | content-chunk)*`, where a content chunk never starts with `marker` (one char if no marker)."""
        if not marker:
            return self.zero_or_more(self.choice([p, self.rule(tag_name, self.content(self.any()))]))
        chunk = self.rule(tag_name, self.content(self.negate(self.literal(marker)) + self.any() + self.until(marker)))
        return self.zero_or_more(self.choice([p, chunk]))

    def permute(self, rule_prefix: str, parsers: Sequence[P]) -> P:
        """Every parser exactly once, in any order: one rule per set of parsers still to match (bit mask)."""
        if not parsers:
            return self.eps()
        if len(parsers) == 1 or len(parsers) > COMMON_CHAT_MAX_PERMUTE:
            return self.sequence(parsers)
        rules: dict[int, P] = {}

        def remaining_of(remaining: int) -> P:
            if remaining == 0:
                return self.eps()
            cached = rules.get(remaining)
            if cached is not None:
                return cached
            alternatives = self.choice()
            for i, parser in enumerate(parsers):
                bit = 1 << i
                if remaining & bit:
                    alternatives |= parser + remaining_of(remaining & ~bit)
            ref = self.rule(f"{rule_prefix}-{remaining}", alternatives)
            rules[remaining] = ref
            return ref

        return remaining_of((1 << len(parsers)) - 1)

    def prefix(self, s: str, delimiter: str = "") -> P:
        """`s` up to (not including) the first `delimiter` (all of it if absent or no delimiter given)."""
        if not s:
            return self.eps()
        if not delimiter:
            return self.literal(s)
        cut = s.find(delimiter)
        return self.literal(s if cut < 0 else s[:cut])

    def optspace(self, tag: str) -> P:
        """`tag` with each of its leading and trailing whitespace characters made optional."""
        parser = self.eps()
        n = len(tag)
        end_of_prefix = next((i for i, ch in enumerate(tag) if ch not in C_SPACE), n)
        start_of_suffix = next((i + 1 for i in range(n - 1, -1, -1) if tag[i] not in C_SPACE), n)
        for ch in tag[:end_of_prefix]:
            parser += self.optional(self.literal(ch))
        parser += self.literal(tag[end_of_prefix:start_of_suffix])
        for ch in tag[start_of_suffix:]:
            parser += self.optional(self.literal(ch))
        return parser

    def cpp_sum(self, *operands: Callable[[], P]) -> P:
        """`a + b + c ...` with its operands created right to left, as the compiled C++ evaluates such a chain.

        GBNF automaton rules (`until-<id>`, `ac-<id>`) are named after node ids, so for the grammar text to equal
        the C++'s, nodes must be created in the C++ order: the operands last to first, then the sequences left to
        right.
        """
        made = [make() for make in reversed(operands)]
        made.reverse()
        result = made[0]
        for part in made[1:]:
            result = result + part
        return result

    # --- hooks: llama.cpp's piece here, more in the relaxed builder (recovery/relax.py) --------------------

    def also_spelled(self, marker: str, spelling: str) -> None:
        """The model may write `marker` as `spelling` too (the template's tool instructions spell it so:
        `TemplateAnalysis.instructed_opener`). llama.cpp reads the spelling the calls render only: nothing to do
        here. Relaxed: every opener read as `marker` reads `spelling` too, as `repair:call_opener_spelling`."""

    def call_opener(self, opener: str, *, spaced: bool = False) -> P:
        """A call's (or a call section's) opener. Relaxed: also left out, or written without the whitespace
        the template puts around it; with `spaced`, whitespace may follow it where the template writes none."""
        return self.literal(opener)

    def opened(self, opener: str, then: P) -> P:
        """`opener then`, the opener a `call_opener`. (`then` is made first, by the caller, and the opener's
        literal after it, as the C++ evaluates `opener + then`.)"""
        return self.call_opener(opener) + then

    def undeclared_call(self, call: Callable[[P], P], escaped_until: str = "") -> list[P]:
        """Calls to a tool the request does not declare: none (a format reads the names it is given). Relaxed:
        `call(name)`, `name` reading any name (`repair:unknown_tool`). Only formats where a marker bounds the name
        ask (in GLM's `<tool_call>NAME<arg_key>` a word after a left-out opener would become a call). Where the
        template writes the name in an attribute it escapes (`tool="a&amp;b"`), `escaped_until` is the quote that
        ends it: the name is any text up to it, unescaped as `escaped_name` reads a declared one."""
        return []

    def block_closer(self, closer: str, opener: str) -> P:
        """The end marker (`closer`) of the block the template writes around calls, which `opener` begins
        (`<tool_call>` ... `</tool_call>`). Relaxed: also left out where the next block opens, as
        `repair:missing_call_closer` (models that write a block per call drop the closer between them)."""
        return self.literal(closer)

    def calls_opened(self, opener: str, call: P, min_calls: int, max_calls: int) -> P:
        """`(opener call){min,max}`. Relaxed: the first call's opener may be left out (a format whose every call
        has its own opener: the model drops the first one most)."""
        return self.repeat(opener + call, min_calls, max_calls)

    def calls_with_first_opener(self, strict: Callable[[], P], opener: str, call: Callable[[], P],
                                min_calls: int, max_calls: int) -> P:
        """Calls each behind `opener`, as the format reads them (`strict()`: where the C++ writes the opener
        and the call's own head as one literal). Relaxed: `calls_opened(opener, call(), ...)`."""
        return strict()

    def content_until_calls(self, markers: Sequence[str], bare: Sequence[str], call: Callable[[], P]) -> P:
        """Content up to the first of `markers`. Relaxed: also up to a `bare` text (how a call written without
        its opener begins) where `call()` follows."""
        return self.content(self.until_one_of(list(markers)))

    def content_until_call_list(self, markers: Sequence[str], bare: Sequence[str], call: Callable[[], P]) -> P:
        """Content up to a bare list of calls (`markers`: where a readable one begins, `[name(`). Relaxed: also
        up to a `[` a list of calls follows that it cannot read (the list is then the recovery's, not content)."""
        return self.content(self.until_one_of(list(markers)))

    def bare_call_starts(self, texts: Sequence[str]) -> list[str]:
        """Where a scan a call ends (reasoning, content) also stops: how a call written without its opener
        begins (`texts`), in the relaxed parser; llama.cpp reads no such call."""
        return []

    def dropped_reasoning(self, strict: Callable[[], P], start: str, end: str) -> P:
        """A reasoning block llama.cpp's parser reads and drops (`strict()`: MiniMax M3's `<mm:think>...</mm:think>`
        where the request turned thinking off). Relaxed: its text is reasoning, as a
        `repair:unrequested_reasoning`, and the strict reading of an output that writes one does not stand."""
        return strict()

    def reasoning_ended_by_call(self, close: P, openers: Sequence[str], draft_until: str = "") -> P:
        """How reasoning ends (`close`). Relaxed: also where a call begins (`openers`) that llama.cpp's reasoning
        runs over: one written without its opener, or a section a format's reasoning scan does not stop at; but
        where the reasoning's end marker (`draft_until`, where llama.cpp's reasoning runs to it over the calls)
        follows, the call is a draft and stays in the reasoning, as llama.cpp reads it (held back from a stream
        until the marker comes)."""
        return close

    def derived_reasoning(self, strict: Callable[[], P], block: DerivedReasoning) -> P:
        """A derived format's reasoning (chat/generic.py): llama.cpp's (`strict()`). Relaxed: a block the
        template does not show, a stray end marker, a call that ends the reasoning, a block the prompt left
        open."""
        return strict()

    def arguments_value(self) -> P:
        """A JSON call's arguments: any JSON value, as llama.cpp reads them (it maps anything but an object to
        `{}`). Relaxed: an object, so that arguments written as a string are a repair of their own."""
        return self.json()

    def loose_json_calls(self, calls: P, name_key: str, args_key: str, names: Sequence[str]) -> P:
        """The choice of JSON calls (flat keys) as the template writes them. Relaxed: also as models write
        them beyond it (members in any order, other argument keys, a wrapper object, an undeclared tool)."""
        return calls

    def call_separator(self, between: P) -> P:
        """What separates two calls (`between`, made by the caller). Relaxed: also nothing but whitespace, or `;`
        or `,` with whitespace around, as models write it."""
        return between

    def written_separator(self, separator: str) -> P:
        """What a template writes between two calls (`TemplateAnalysis.call_separator`, beyond the C++) as the
        `between` of `call_separator`: its marks with any whitespace around them, or any whitespace where that is
        all it writes."""
        mark = separator.strip(C_SPACE)
        return self.space() + self.literal(mark) + self.space() if mark else self.space()

    def member_separator(self, separator: str) -> P:
        """The `separator` between two members of an object in a format's own value syntax (`,` in Gemma 4's
        `{a:1,b:2}`). Relaxed: also left out where the next member's key follows (`a:<|"|>x<|"|>b:2`)."""
        return self.literal(separator)

    def arguments_marker(self, marker: str) -> P:
        """The marker between a call's name (or id) and its JSON arguments (`[ARGS]`, `<｜tool▁sep｜>`, a code
        fence's opening). Relaxed: with whitespace as `call_part_marker` reads it, or left out where the arguments
        follow at once (`[TOOL_CALLS]get_weather{...}`, a Mistral dialect; DeepSeek V3's fenced arguments written
        bare, as its V3.1 sibling writes them)."""
        return self.literal(marker)

    def fenced_arguments(self, args: P) -> P:
        """A call's JSON arguments (`args`), where the template writes no code fence around them. Relaxed: also in
        a ```` ```json ```` fence, as models write JSON they were not asked to fence."""
        return args

    def call_id_text(self, suffix: str) -> P:
        """A call id's text, up to the marker the template writes after it. Relaxed: also up to the JSON arguments,
        where that marker is left out (`arguments_marker`)."""
        return self.until(suffix)

    def call_array(self, calls: P) -> P:
        """`calls` in the JSON array the template writes them in. Relaxed: also without the brackets (a lone call
        object, or objects one after the other, where the template writes a list), as a `repair:call_array`."""
        return self.literal("[") + self.space() + calls + self.space() + self.literal("]")

    def extra_calls(self, calls: P, call: P) -> P:
        """`calls`, where the request allows one `call`. Relaxed: further calls after it, each reported."""
        return calls

    def value_choice(self, values: Sequence[P], rules: str, quote: str) -> P:
        """A value of a format's own value syntax, one of `values`, its strings between two `quote`s. Relaxed:
        also, where the syntax quotes strings otherwise, a JSON string (`"a \\"b\\""`, the rule `{rules}-json-string`:
        its text is the JSON) or a Python one in single quotes (`'a'`, `{rules}-python-string`); and a string
        without its opening `quote` (`weather in Tokyo<|"|>`, `{rules}-unopened-string`)."""
        return self.choice(list(values))

    def message_after_calls(self, calls: P, message: Callable[[], P]) -> P:
        """`calls`, which end the model's turn. Relaxed: a further `message()` after them (the answer written
        before the tools ran), as a `repair:message_after_calls` node."""
        return calls

    def written_otherwise(self, strict: Callable[[], P], other: Callable[[], P], marks: str, kind: str) -> P:
        """A piece as the template writes it (`strict()`), which a model may write otherwise (`other()`: the piece
        with a part left out, or in a sibling spelling of the family's; it holds `marks`, if any). Relaxed:
        either, the other one a `repair:<kind>` node, and `marks` markup where llama.cpp reads it as text (so
        that a strict reading holding it does not stand)."""
        return strict()

    def labelled_marker(self, token: str, label: str, follows: Callable[[], P] | None = None) -> P:
        """A marker made of a special `token` and a plain-text `label` after it (`<|channel>thought`). Relaxed:
        also the token alone, where a model leaves the label out (with `follows`, only where `follows()` reads
        what comes next: a token the output's end cuts off before that opens nothing, and stays text)."""
        return self.literal(token + label)

    def header_marker(self, text: str, then: str = "") -> P:
        """A marker of a message header as the template writes it: a recipient after the role (` to=self<|message|>`,
        its space the one a tokenizer puts in the ` to` token), a channel (`<|channel|>final<|message|>`); `then`
        the header's marker after it, read next. Relaxed: with any whitespace, or none, before it and between its
        markers, as models write it (formatting: not reported); a header the output's end cuts off opens no
        message (its text is content)."""
        return self.literal(text)

    def empty_markers(self, token: str, label: str) -> P:
        """Openers `token` without their `label`, which a model repeats before the labelled one and which say
        nothing. Relaxed: only those another `token` follows (the token alone may open the labelled block)."""
        return self.zero_or_more(self.literal(token) + self.negate(self.literal(label)))

    def grouped_calls(self, call: P) -> P:
        """One `call` inside the wrapper the template writes around each call. Relaxed: several, where the model
        puts all its calls in one wrapper."""
        return call

    def more_calls_before(self, call: Callable[[], P], *closer: Callable[[], P]) -> tuple[Callable[[], P], ...]:
        """The operands (for `cpp_sum`) of the end of a block that the template writes around each call, where the
        block's opener is part of the call's opener and its end part of the call's closer (Muse Glimmer's
        `<atem:function_calls>`). Relaxed: further calls (`call()`, the block's inner call alone) before that end,
        where the model puts several calls in one block, as `repair:calls_grouped`."""
        return closer

    def opener_again(self, opener: P, marker: str, follows: Callable[[], P] | None = None) -> P:
        """`opener` (a section's opener the generation prompt may write: Kimi K3's `<|open|>response<|sep|>`).
        Relaxed: the marker written once more right after it, as models repeat the opener their prompt ends
        with: markup (`repair:repeated_opener`; with `follows`, only where `follows()` reads what comes next)."""
        return opener

    def call_sections(self, first: P, again: Callable[[], P], markers: Sequence[str]) -> P:
        """The calls' section (`first`). Relaxed: further sections after it (`again()`: a section that holds at
        least one call, beginning with one of `markers`), where the model opens a section for each call although
        the template writes one for all."""
        return first

    def python_string_body(self, quote: str, form: CallForm | None) -> P:
        """A quoted Python string value's body: JSON escapes only (llama.cpp's grammar), or the escapes Python
        allows for a call form a template's analysis derived. Relaxed: Python's."""
        return self.python_escaped_body(quote) if form is not None else self.string_content(quote)

    def python_string_value(self, value: P, form: CallForm | None, keys: list[str], key: str) -> P:
        """A Python string value. Relaxed: also one holding a quote it does not escape."""
        return value

    def python_call_list(self, call: P, between: P) -> P:
        """Python calls one after the other. Relaxed: a call it cannot read among them is content."""
        return call + self.zero_or_more(between + call)

    def tagged_call_choice(self, strict: Callable[[], P], markers: TaggedMarkers | None,
                           tools: Sequence[Function], json_first: Callable[[Parameter], bool]) -> P:
        """The choice of tagged calls (`strict()`: as the format reads them). Relaxed, where `markers` can be
        read loosely: one loose reading of every call (recovery/relax.py `loose_tagged_call`)."""
        return strict()

    def typed_value_unquoted(self, arg: P, f: Function, param: Parameter, name_prefix: str, name_suffix: str,
                             quote: str) -> P:
        """A tagged argument whose value is not a string (`arg`), where the template quotes values between
        `quote` markers, the opening one ending `name_suffix` (`key:<escape>v<escape>`). Relaxed: also the value
        as its JSON text without the quotes, as such templates print a number or a boolean (`count:3`)."""
        return arg

    def string_marked_value(self, typed: P, as_string: Callable[[], P]) -> P:
        """A tagged argument that is no string, as the template writes such a value (`typed`: `max_results:3` where
        strings are `query:<escape>...<escape>`, `string="false">3` where they are `string="true">...`). Relaxed:
        also with the markers the template writes around a string (`as_string()`), as a template that marks every
        value alike writes it."""
        return typed

    def syntax_value(self, quote: str) -> P:
        """A value in the format's own syntax, as templates that quote only strings print an object or a list
        argument (`TypedArgument.quote`): strings between `quote` markers, keys bare, numbers and
        literals as in JSON (`{name:<escape>x<escape>,n:[1,2]}`); read piece by piece into the JSON it stands for
        (mapper: VALUE_TOKEN, VALUE_STRING, VALUE_KEY)."""
        def token(p: P | str) -> P:
            return self.tag(VALUE_TOKEN, p)

        def body() -> P:
            value = self.ref("syntax-value")
            string = self.literal(quote) + self.tag(VALUE_STRING, self.until(quote)) + self.literal(quote)
            # (a bare key is known whole at its colon: a stream cut inside it sends none of it yet)
            key = self.tag(VALUE_KEY, self.chars(r"[^:,{}\[\] \t\r\n]", 1, -1)
                           + self.peek(self.space() + self.literal(":"))) | string
            member = key + self.space() + token(":") + self.space() + value
            ws = self.space()
            obj = token("{") + ws + self.optional(member + self.zero_or_more(ws + token(",") + ws + member)) + ws \
                + token("}")
            arr = token("[") + ws + self.optional(value + self.zero_or_more(ws + token(",") + ws + value)) + ws \
                + token("]")
            return self.choice([string, obj, arr, token(self.json_number() | self.json_bool() | self.json_null())])

        return self.rule("syntax-value", body)

    def call_part_marker(self, text: str) -> P:
        """A marker the template writes around a call's parts, whitespace included (`\n```json\n` after a
        name). Relaxed: with any whitespace, or none, where the template writes some (`LooseCalls.call_part_marker`)."""
        return self.literal(text)

    def joined_markers(self, text: str) -> P:
        """Markers the template writes together, as one text (`<|message|><atem:function_calls>`). Relaxed: with
        whitespace between them, as models write them."""
        return self.literal(text)

    def name_attribute(self, opener: str, name: Callable[[], P]) -> tuple[Callable[[], P], ...]:
        """The operands (for `cpp_sum`, which keeps the C++'s order) of an element that names a tool or an argument
        in its one attribute, as the template writes it: `opener` (`<param name="`), `name()`, `">`. Relaxed: one
        operand, also reading the name in single quotes, and other attributes before or after it (`<param
        type="text" name='city'>`), as a `repair:attribute_spelling`."""
        return lambda: self.literal(opener), name, lambda: self.literal('">')

    def escaped_name(self, name: str, spelled: str) -> P:
        """A call's name in an attribute the template escapes (`spelled`: `echo&amp;log` for `echo&log`), as
        llama.cpp's parser reads it: the name as declared. Relaxed: the spelling the template writes too, the name
        it unescapes to (not a repair: the template writes it so)."""
        return self.tool_name(self.literal(name))

    def spaced_marker(self, text: str) -> P:
        """A marker the template writes right after what precedes it, where alone llama.cpp reads it (a value
        that begins with whitespace and then the marker is text to it). Relaxed: whitespace before it, the
        marker tagged as markup (a strict message whose text holds it is read again: `RecoveryPlan.triggers`)."""
        return self.literal(text)

    def space_then(self, piece: P) -> P:
        """`piece`, where the template writes no whitespace before it (between two markers, a marker and a
        call's id or arguments). Relaxed: whitespace before it, as models write it."""
        return piece

    def optionally_closed_call(self, head: P, closer: str) -> P:
        """A call whose closer may be left out. Relaxed: the call is whole at its head's end, the closer read
        after it (a stream that shows a call once whole must not wait for a closer that may never come)."""
        return self.tool(head + self.tool_close(self.optional(self.literal(closer))))

    def calls_begin_at(self, texts: Sequence[str]) -> None:
        """Where calls begin besides the format's trigger words (a bare JSON call's `{"name"`, a call's own
        element inside a section). Relaxed: recorded in the parser, where the recovery resumes reading after
        text it cannot read."""

    # --- pieces the chat formats share ----------------------------------------------------------------------

    def think(self, start: str, end: str, calls: Sequence[str] = ()) -> P:
        """`(start reasoning(until end) end)?`: an optional reasoning block between two markers (`calls`: see
        `reasoning_between`)."""
        return self.optional(self.reasoning_between(lambda: start + self.reasoning(self.until(end)) + end, start, end,
                                                  calls))

    def reasoning_between(self, strict: Callable[[], P], start: str, end: str, calls: Sequence[str], *,
                          spaced: bool = False, opener: Callable[[], P] | None = None) -> P:
        """A reasoning block from `start` to `end` as llama.cpp reads it (`strict()`; `spaced`: whitespace after
        the start is skipped; `opener()`: how the start is read, where not as its literal text). Relaxed: where
        a call begins inside it (one of `calls`, the texts calls begin with) and no end marker follows, the
        reasoning ends at the call (`reasoning_ended_by_call`); a call the end marker follows is reasoning."""
        return strict()

    def args_by_requirement(self, f: Function, arg: Callable[[Function, Parameter], P], *,
                            by_name: bool = False) -> tuple[list[P], list[P]]:
        """Each parameter's argument parser (`arg(f, param)`, made in the schema's order, as the C++ loops over
        the properties, or `by_name` as jinja's `dictsort` orders them), split into the required ones and the
        optional ones."""
        required: list[P] = []
        optional: list[P] = []
        params = parameters(f)
        for param in sorted(params, key=lambda q: q.name.lower()) if by_name else params:
            (required if param.required else optional).append(arg(f, param))
        return required, optional

    def args_in_order(self, required: Sequence[P], optional: Sequence[P], separator: str = "") -> P:
        """`r1 space r2 ... (space (o1 | o2 | ...))*`: required arguments in their order, then optional ones in
        any order and number; with a `separator`, it stands between two arguments (`r1 space "," space r2`)."""
        def between() -> P:
            return self.space() + separator + self.space() if separator else self.space()

        seq = self.eps()
        for i, arg in enumerate(required):
            if i > 0:
                seq = seq + between()
            seq = seq + arg
        if optional:
            any_optional = self.choice()
            for arg in optional:
                any_optional |= arg
            if required or not separator:
                seq = seq + self.repeat(between() + any_optional, 0, -1)
            else:  # the first optional argument has no separator before it
                seq = seq + self.optional(any_optional + self.repeat(between() + any_optional, 0, -1))
        return seq

    def python_spelled(self, param: Parameter) -> P | None:
        """A typed value as Python prints it, where JSON is the template's (`True`, `None`, `{'k': 'v'}`: a
        template printing a value with `{{ v }}`, or a model writing after Python-style calls). None: llama.cpp
        reads JSON only. Relaxed: the Python literals the parameter's schema allows, read as the JSON they stand
        for."""
        return None

    def value_or_text(self, value: P, text: Callable[[], P], checked: Callable[[], P] | None = None) -> P:
        """A value of its schema's type, then its closer (`value`). Relaxed: also, where the text there is no such
        value, that text as a string and its closer (`text()`), as the loose tagged readings keep it (the
        recovery's checks report a top-level one: `argument_type`); `checked()`, where llama.cpp takes `value`'s
        text as JSON unchecked (its mapper writes it into the arguments as it is), is the value read as JSON."""
        return value

    def nested_elements(self, strict: Callable[[], P], elements: Callable[[], P]) -> P:
        """An argument value llama.cpp reads only as JSON (`strict()`: an object the schema gives no properties)
        where the template writes every mapping as nested elements. Relaxed: also as those (`elements()`), as
        the template writes them (no repair)."""
        return strict()

    def tagged_arguments(self, args: P, json_open: str = "", json_close: str = "") -> P:
        """A tagged call's arguments as the template writes them, an element each (`args`). Relaxed: also one
        JSON object, as the same family's JSON dialect writes a call's arguments (between `json_open` and
        `json_close`, where the template wraps arguments it is given as a JSON string so)."""
        return args

    def args_any_order(self, args: Sequence[P]) -> P:
        """`((a1 | a2 | ...) space)*`: arguments in any order and number."""
        out = self.eps()  # default-initialised in the C++ (it takes an id)
        if args:
            space = self.space()
            out = self.zero_or_more(self.choice(args) + space)
        return out

    def args_permuted(self, rule_prefix: str, required: Sequence[P], optional: Sequence[P]) -> P:
        """Every required argument once, in any order (`permute`), then optional ones in any order and number."""
        args = self.permute(rule_prefix, required)
        if optional:
            args = args + self.zero_or_more(self.choice(optional))
        return args

    def typed_value(self, param: Parameter, schema_rule: str, schema: Any, close: P, raw: P,
                    mixed: Callable[[], P]) -> P:
        """A tagged argument's value by the types its schema admits: JSON, then `close`, when no string fits; the
        raw-text parser `raw` when only strings do; `mixed()` (JSON tried first, raw text otherwise) for the rest."""
        self.eps()  # default-initialised in the C++ before it is chosen (it takes an id, as rule names embed ids)
        if "string" not in param.types:
            return self.value_or_text(self.tool_arg_json_value(self.schema(self.json(), schema_rule, schema,
                                                                           pointer=param.pointer)) + close,
                                      lambda: raw)
        if param.types == {"string"}:
            return raw
        return mixed()

    def call_block(self, start: str, call: P, end: str, *, parallel: bool, required: bool) -> P:
        """`start call (space call)* end` as the `tool-call` trigger rule (one call unless parallel); optional
        unless a call is required; `start` is a `call_opener`."""
        # Nodes in the order GCC builds the C++ expression (operands right to left: rule names embed node ids),
        # after the `tool_calls = p.eps()` its users default-initialise.
        self.eps()
        close = self.literal(end)
        space = self.space()
        more = self.zero_or_more(self.space() + call) if parallel else None
        lead = self.space()
        body = self.call_opener(start) + lead + call
        body = body + more + space + close if more is not None else body + space + close
        # (relaxed: a section for each call, where the template writes one for all)
        calls = self.call_sections(self.trigger_rule("tool-call", body), lambda: body, [start])
        return calls if required else self.optional(calls)

    def value_closer(self, close: str) -> P:
        """The closer of a tagged value in a hand-written format (`</｜DSML｜parameter>`). Relaxed: also written
        twice, the second markup (`repair:stray_closer`, as the derived tagged calls read it: `loose_tagged_call`),
        as Qwen 3.6 outputs write `</parameter>` twice (ggml-org/llama.cpp#24807, mostlygeek/llama-swap#856)."""
        return self.literal(close)

    def quoted_name_arg(self, opener: str, param: Parameter, string_value: P, close: str, schema_rule: str,
                        schema: Any) -> P:
        """`OPENER + NAME + '">' + value` (`name_attribute`): `string_value` (which closes itself) where the
        parameter admits a string, else its JSON value and `close` (operands in the C++ evaluation order)."""
        value = self.eps()  # default-initialised in the C++ (it takes an id)
        if param.may_be_string:
            value = string_value
        else:
            value = self.cpp_sum(lambda: self.tool_arg_json_value(self.schema(self.json(), schema_rule, schema,
                                                                              pointer=param.pointer)),
                                 lambda: self.tool_arg_close(self.value_closer(close)))
            python = self.python_spelled(param)
            if python is not None:
                value = value | python + self.tool_arg_close(self.value_closer(close))
        opener_parser = self.tool_arg_open(self.cpp_sum(
            *self.name_attribute(opener, lambda: self.tool_arg_name(self.literal(param.name)))))
        return self.tool_arg(opener_parser + value)

    def fenced_json(self, schema: Any) -> P:
        """The `response-format` rule: content matching `schema` inside a ```json fence."""
        return self.rule("response-format", self.literal("```json") + self.space()
                         + self.content(self.schema(self.json(), "response-format-schema", schema)) + self.space()
                         + self.literal("```"))

    def _args_schema(self, name: str, params: Any) -> P:
        return self.tool_args(self.schema(self.arguments_value(), f"tool-{name}-schema", params))

    def _gen_id_value(self) -> P:
        """A generated call id: a quoted string or a bare number (`"tool_call_id": 0`)."""
        return self.choice([self.literal('"') + self.tool_id(self.string_content('"')) + self.literal('"'),
                            self.tool_id(self.json_number())])

    # --- JSON tool calls -------------------------------------------------------------------------------------

    def standard_json_tools(self, section_start: str, section_end: str, tools: Tools, parallel_tool_calls: bool,
                            force_tool_calls: bool, name_key: str = "", args_key: str = "",
                            array_wrapped: bool = False, function_is_key: bool = False, call_id_key: str = "",
                            gen_call_id_key: str = "", parameters_order: Sequence[str] = (),
                            accept_openai_wrapper: bool = False, separator: str | None = None,
                            constant_members: Sequence[tuple[str, str]] = ()) -> P:
        """Tool calls written as JSON objects inside `section_start ... section_end`.

        Three layouts: the function name as the key (`{"fn": {...}}`), nested keys in dot notation
        (`function.name` / `function.arguments`), or flat keys whose order follows `parameters_order`.
        The section opener is a `call_opener`; calls with a name key go through `loose_json_calls`, and more than one
        through `call_separator` / `extra_calls`: `,` between two calls, or the `separator` the template writes
        there (beyond the C++: `TemplateAnalysis.call_separator`), whitespace around it. A nested call object
        may hold `constant_members` before its nested member (beyond the C++: `NestedCall.constants`, the
        `"type": "function"` of OpenAI's call object), each as written or left out.
        """
        tools_json = tools_to_openai(tools)
        if not tools_json:
            return self.eps()
        eff_name_key = name_key or "name"
        eff_args_key = args_key or "arguments"

        # The C++ initialises its result with eps() before dispatching; created here too so that node ids match.
        self.eps()
        if function_is_key:
            choices = self._json_tools_function_is_key(tools_json, args_key, eff_args_key, call_id_key,
                                                       gen_call_id_key)
        elif _split_key(eff_name_key)[0] or _split_key(eff_args_key)[0]:
            choices = self._json_tools_nested_keys(tools_json, eff_name_key, eff_args_key, call_id_key,
                                                   gen_call_id_key, constant_members)
        else:
            choices = self._json_tools_flat_keys(tools_json, eff_name_key, eff_args_key, call_id_key,
                                                 gen_call_id_key, parameters_order, accept_openai_wrapper)

        if not function_is_key:  # (nested keys: the loose reading takes the nested member as a call's wrapper)
            choices = self.loose_json_calls(choices, _split_key(eff_name_key)[1], _split_key(eff_args_key)[1],
                                            [f.name for f in functions(tools_json, typed=False)])
        calls = choices
        if parallel_tool_calls:
            between = self.call_separator(self.written_separator("," if separator is None else separator))
            calls = calls + self.zero_or_more(between + choices)
        elif not array_wrapped:
            calls = self.extra_calls(calls, choices)
        if array_wrapped:
            calls = self.call_array(calls)
        section = self.trigger_rule("tool-call", self.call_opener(section_start) + self.space() + calls
                                    + self.space() + self.block_closer(section_end, section_start))
        return section if force_tool_calls else self.optional(section)

    def _json_tools_function_is_key(self, tools: Any, args_key: str, eff_args_key: str, call_id_key: str,
                                    gen_call_id_key: str) -> P:
        choices = self.choice()
        for f in functions(tools, typed=False):
            name, params = f.name, f.schema
            fields: list[P] = []
            if call_id_key:
                id_parser = self.atomic(self.literal(f'"{call_id_key}"') + self.space() + self.literal(":")
                                        + self.space() + self.literal('"') + self.tool_id(self.string_content('"'))
                                        + self.literal('"'))
                fields.append(self.optional(id_parser + self.space()
                                            + self.optional(self.literal(",") + self.space())))
            if gen_call_id_key:
                gen_id_parser = self.atomic(self.literal(f'"{gen_call_id_key}"') + self.space() + self.literal(":")
                                            + self.space() + self._gen_id_value())
                fields.append(self.optional(gen_id_parser + self.space()
                                            + self.optional(self.literal(",") + self.space())))
            self.eps()  # the C++ default-initialises args_parser (ids follow it)
            if not args_key:
                args_parser = self._args_schema(name, params)
            else:
                args_parser = (self.literal(f'"{eff_args_key}"') + self.space() + self.literal(":") + self.space()
                               + self._args_schema(name, params))
            fields.append(args_parser)

            self.eps()  # likewise for inner_object
            if not args_key and len(fields) == 1:
                inner = fields[0]
            else:
                inner = self.literal("{") + self.space()
                for i, field_parser in enumerate(fields):
                    inner = inner + field_parser
                    if i < len(fields) - 1:
                        inner = inner + self.space()
                inner = inner + self.space() + self.literal("}")

            tool_parser = self.tool(self.tool_open(self.literal("{")) + self.space() + self.literal('"')
                                    + self.tool_name(self.literal(name)) + self.literal('"') + self.space()
                                    + self.literal(":") + self.space() + inner + self.space()
                                    + self.tool_close(self.literal("}")))
            choices |= self.rule(f"tool-{name}", tool_parser)
        return choices

    def _json_tools_nested_keys(self, tools: Any, eff_name_key: str, eff_args_key: str, call_id_key: str,
                                gen_call_id_key: str, constant_members: Sequence[tuple[str, str]] = ()) -> P:
        choices = self.choice()
        name_prefix, name_field = _split_key(eff_name_key)
        args_prefix, args_field = _split_key(eff_args_key)
        nested_prefix = name_prefix or args_prefix
        nested_name_field = name_field if name_prefix else eff_name_key
        nested_args_field = args_field if args_prefix else eff_args_key

        for f in functions(tools, typed=False):
            name, params = f.name, f.schema
            nested_name = (self.literal(f'"{nested_name_field}"') + self.space() + self.literal(":") + self.space()
                           + self.atomic(self.literal('"') + self.tool_name(self.literal(name)) + self.literal('"')))
            nested_args = (self.literal(f'"{nested_args_field}"') + self.space() + self.literal(":") + self.space()
                           + self._args_schema(name, params))
            nested_object = (self.literal("{") + self.space() + nested_name + self.space() + self.literal(",")
                             + self.space() + nested_args + self.space() + self.literal("}"))

            body = self.tool_open(self.literal("{")) + self.space()
            if call_id_key and not _split_key(call_id_key)[0]:
                id_parser = self.atomic(self.literal(f'"{call_id_key}"') + self.space() + self.literal(":")
                                        + self.space() + self.literal('"') + self.tool_id(self.string_content('"'))
                                        + self.literal('"'))
                body = body + self.optional(id_parser + self.space() + self.literal(",") + self.space())
            if gen_call_id_key and not _split_key(gen_call_id_key)[0]:
                gen_id_parser = self.atomic(self.literal(f'"{gen_call_id_key}"') + self.space() + self.literal(":")
                                            + self.space() + self._gen_id_value())
                body = body + self.optional(gen_id_parser + self.space() + self.literal(",") + self.space())
            for key, value in constant_members:
                body = body + self.optional(self.literal(f'"{key}"') + self.space() + self.literal(":") + self.space()
                                            + self.literal(value) + self.space() + self.literal(",") + self.space())

            nested_field = (self.literal(f'"{nested_prefix}"') + self.space() + self.literal(":") + self.space()
                            + nested_object)
            body = body + nested_field + self.space() + self.tool_close(self.literal("}"))
            choices |= self.rule(f"tool-{name}", self.tool(body))
        return choices

    def _json_tools_flat_keys(self, tools: Any, eff_name_key: str, eff_args_key: str, call_id_key: str,
                              gen_call_id_key: str, parameters_order: Sequence[str],
                              accept_openai_wrapper: bool) -> P:
        choices = self.choice()
        name_key_parser = self.literal(f'"{eff_name_key}"')
        args_key_parser = self.literal(f'"{eff_args_key}"')
        order = list(parameters_order)

        def rank(key: str) -> int:
            return order.index(key) if key in order else len(order)

        for f in functions(tools, typed=False):
            name, params = f.name, f.schema
            name_field = (name_key_parser + self.space() + self.literal(":") + self.space()
                          + self.atomic(self.literal('"') + self.tool_name(self.literal(name)) + self.literal('"')))
            args_field = (args_key_parser + self.space() + self.literal(":") + self.space()
                          + self._args_schema(name, params))

            id_parser = self.eps()
            if call_id_key:
                id_parser = self.atomic(self.literal(f'"{call_id_key}"') + self.space() + self.literal(":")
                                        + self.space() + self._gen_id_value())
            gen_id_parser = self.eps()
            if gen_call_id_key:
                gen_id_parser = self.atomic(self.literal(f'"{gen_call_id_key}"') + self.space() + self.literal(":")
                                            + self.space() + self._gen_id_value())

            pairs: list[tuple[P, str]] = [(name_field, eff_name_key), (args_field, eff_args_key)]
            if call_id_key:
                pairs.append((self.optional(id_parser), call_id_key))
            if gen_call_id_key:
                pairs.append((self.optional(gen_id_parser), gen_call_id_key))
            # sorted() is stable, which the field order relies on when keys are missing from parameters_order
            pairs = sorted(pairs, key=lambda pair: rank(pair[1]))

            type_field = self.eps()
            if accept_openai_wrapper:
                type_field = self.optional(self.literal('"type"') + self.space() + self.literal(":") + self.space()
                                           + self.literal('"function"') + self.space() + self.literal(",")
                                           + self.space())
            body = self.tool_open(self.literal("{")) + self.space() + type_field
            for i, (field_parser, _key) in enumerate(pairs):
                body = body + field_parser
                if i < len(pairs) - 1:
                    body = body + self.space() + self.literal(",") + self.space()
            body = body + self.space() + self.tool_close(self.literal("}"))
            choices |= self.rule(f"tool-{name}", self.tool(body))
        return choices

    # --- tagged (XML-like) tool calls ---------------------------------------------------------------------

    def standard_constructed_tools(self, markers: Mapping[str, str], tools: Tools, parallel_tool_calls: bool,
                                   force_tool_calls: bool) -> P:
        """`<tool_call><function=NAME><param=ARG>value</param>...</function></tool_call>` with marker overrides."""
        tools_json = tools_to_openai(tools)
        if not tools_json:
            return self.eps()

        def marker(key: str, default: str) -> str:
            return markers.get(key, default)

        section_start = marker("tool_call_start_marker", "<tool_call>")
        section_end = marker("tool_call_end_marker", "</tool_call>")
        func_opener = marker("function_opener", "<function=")
        func_name_suffix = marker("function_name_suffix", ">")
        func_closer = marker("function_closer", "</function>")
        param_key_prefix = marker("parameter_key_prefix", "<param=")
        param_key_suffix = marker("parameter_key_suffix", ">")
        param_closer = marker("parameter_closer", "</param>")

        def arg(prop_name: str, _schema: Any, _props: Mapping[str, Any]) -> P:
            arg_name = self.choice([self.literal(prop_name), self.literal(f'"{prop_name}"'),
                                    self.literal(f"'{prop_name}'")])
            return self.tool_arg(self.tool_arg_open(self.literal(param_key_prefix))
                                 + self.tool_arg_name(arg_name) + self.literal(param_key_suffix)
                                 + self.tool_arg_value(self.until(param_closer))
                                 + self.tool_arg_close(self.literal(param_closer)))

        def call(name: str, args: P) -> P:
            return self.tool(self.tool_open(self.literal(func_opener) + self.tool_name(self.literal(name))
                                            + self.literal(func_name_suffix))
                             + self.space() + self.tool_args(args) + self.space()
                             + self.tool_close(self.literal(func_closer)))

        choices = self._keyword_calls(tools_json, arg, lambda args, _params: self.zero_or_more(args + self.space()),
                                      call)

        if parallel_tool_calls:
            section = self.trigger_rule("tool-call", self.literal(section_start) + self.space()
                                        + self.one_or_more(choices + self.space()) + self.literal(section_end))
        else:
            section = self.trigger_rule("tool-call", self.literal(section_start) + self.space() + choices
                                        + self.space() + self.literal(section_end))
        return section if force_tool_calls else self.optional(section)

    # --- python-style tool calls (LFM2) -------------------------------------------------------------------

    def python_or_json_value(self) -> P:
        """A python value whose leaves also accept JSON `true`/`false`/`null`."""

        def body() -> P:
            ws = self.space()
            value = self.python_or_json_value()
            member = self.sequence([self.python_string(), ws, self.literal(":"), ws, value])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, self.literal(","), ws, member]))])
            dict_ = self.rule("python-or-json-dict", lambda: self.sequence([
                self.literal("{"), ws,
                self.choice([self.literal("}"), self.sequence([members, ws, self.literal("}")])]), ws]))
            elements = self.sequence([value, self.zero_or_more(self.sequence([self.literal(","), ws, value]))])
            array = self.rule("python-or-json-array", lambda: self.sequence([
                self.literal("["), ws,
                self.choice([self.literal("]"), self.sequence([elements, ws, self.literal("]")])]), ws]))
            return self.choice([dict_, array, self.python_string(), self.python_number(), self.python_bool(),
                                self.python_null(), self.json_bool(), self.json_null()])

        return self.rule("python-or-json-value", body)

    def python_style_tool_calls(self, tools: Tools, parallel_tool_calls: bool, allow_json_literals: bool,
                                form: CallForm | None = None) -> P:
        """`[name(arg="value", n=1), ...]`: each tool's arguments as python keyword arguments (llama.cpp's, for
        LFM2). With the `form` a template's analysis derived (analysis/forms.py): the calls in a list or one
        after the other as the template writes them, string values with either quote escaped as Python allows
        (llama.cpp's take JSON escapes only), and no argument at all where none is required."""
        tools_json = tools_to_openai(tools)
        if not tools_json:
            return self.eps()

        def arg(prop_name: str, prop_def: Any, props: Mapping[str, Any]) -> P:
            is_string = isinstance(prop_def, Mapping) and prop_def.get("type") == "string"
            arg_name = self.literal(prop_name)
            self.eps()  # the C++ default-initialises the value parser (ids follow it)
            quoted = [self.literal(q) + self.python_string_body(q, form) + self.literal(q) for q in "\"'"]
            string_value = self.tool_arg_value(self.choice(quoted))
            if form is not None and form.strings is not StringValues.LITERAL:
                string_value = self._printed_string(form, string_value, list(props), prop_name)
            else:
                string_value = self.python_string_value(string_value, form, list(props), prop_name)
            if is_string:
                value = string_value
            else:
                value = self.tool_arg_value(self.python_or_json_value() if allow_json_literals
                                            else self.python_value())
                if form is not None and form.quoted_values:  # (`days="3"`: the value inside the quotes)
                    q = form.quote
                    value = self.literal(q) + value + self.literal(q) | value
            return self.tool_arg(self.tool_arg_open(self.tool_arg_name(arg_name) + self.literal("="))
                                 + value + self.tool_arg_close(self.eps()))

        def args_of(arg_choice: P, params: Any) -> P:
            args = arg_choice + self.zero_or_more("," + self.space() + arg_choice)
            required = params.get("required") if isinstance(params, Mapping) else None
            return self.optional(args) if form is not None and not required else args

        def call(name: str, args: P) -> P:
            return self.tool(self.tool_open(self.tool_name(self.literal(name)) + self.literal("("))
                             + self.space() + self.tool_args(args) + self.space()
                             + self.tool_close(self.literal(")")))

        choices = self._keyword_calls(tools_json, arg, args_of, call)

        if form is not None:
            separator = form.separator.strip(C_SPACE) if not form.list_wrapped else ","
            between = self.space() + separator + self.space() if separator else self.space()
            calls = choices
            if parallel_tool_calls:
                calls = self.python_call_list(choices, between)
            if not form.list_wrapped:
                return calls
            return "[" + self.space() + calls + self.space() + "]"
        if parallel_tool_calls:
            return ("[" + self.space() + choices + self.zero_or_more("," + self.space() + choices) + self.space()
                    + "]")
        return "[" + self.space() + choices + self.space() + "]"

    def _keyword_calls(self, tools: Any, arg: Callable[[str, Any, Mapping[str, Any]], P],
                       args_of: Callable[[P, Any], P], call: Callable[[str, P], P]) -> P:
        """The choice of the tools' calls, each the rule `tool-NAME` over its arguments, each argument one of
        the schema's properties (`arg(name, schema, properties)`, in the schema's order), the choice of them
        made the call's arguments by `args_of` (ε without properties), as llama.cpp's XML and Python helpers
        build them, node for node."""
        choices = self.choice()
        for f in functions(tools, typed=False):
            args = self.eps()
            props = _properties(f.schema)
            undeclared = self.undeclared_keyword(f.schema)
            if props:
                arg_choice = self.choice()
                for prop_name, prop_def in props.items():
                    arg_choice |= arg(prop_name, prop_def, props)
                args = args_of(arg_choice if undeclared is None else arg_choice | undeclared, f.schema)
            elif undeclared is not None:
                args = self.optional(args_of(undeclared, f.schema))
            choices |= self.rule(f"tool-{f.name}", call(f.name, args))
        return choices

    def undeclared_attribute_arg(self, opener: str, string_value: P, schema: Any) -> list[P]:
        """An argument the tool's schema does not declare, in a format that names arguments in an attribute
        (`opener` + NAME + `">`, its value `string_value`, which closes itself), as a list of at most one
        parser: none, not read (llama.cpp reads the declared ones only). Relaxed: any name, its value text, where
        the schema allows properties it does not list."""
        return []

    def undeclared_arg(self, arg: Callable[[], P], schema: Any) -> list[P]:
        """An argument the tool's schema does not list, `arg()` in the format's own form (its key read by any
        name), as a list of at most one parser: none (llama.cpp reads the declared ones only). Relaxed: that
        argument, where the schema allows properties it does not list (`repair:undeclared_argument`)."""
        return []

    def undeclared_keyword(self, schema: Any) -> P | None:
        """A Python call's keyword argument the tool's schema does not declare. None: not read (llama.cpp reads
        the declared ones only). Relaxed: any keyword, its value a Python or JSON literal, where the schema allows
        properties it does not list."""
        return None

    def _printed_string(self, form: CallForm, literal: P, keys: list[str], key: str) -> P:
        """A string value the template prints as it is (`CallForm.strings`): it ends where the next argument
        (`, KEY=`) or the call's end (`)` and what the template writes after a call) begins; between quotes
        (UNESCAPED), at a quote followed by one of those. A value in the other quote, or one the model quoted
        though the template does not (BARE), is read as a Python literal (first where it is unquoted)."""
        ends = python_value_ends(form, keys, key)
        if form.strings is StringValues.BARE:
            return literal | self.tool_arg_string_value(self.until_one_of(ends))
        return self.quoted_as_is(form.quote, ends) | literal

    def quoted_as_is(self, quote: str, ends: list[str]) -> P:
        """`quote`, a string value as it is up to a `quote` one of `ends` follows, `quote`."""
        return self.literal(quote) + self.tool_arg_string_value(self.until_one_of([quote + e for e in ends])) \
            + self.literal(quote)

    def python_escaped_body(self, quote: str) -> P:
        """The body of a Python string up to its closing `quote`: any character but the quote and the backslash,
        or an escape JSON can also express, or the other quote escaped (`'It\\'s'`, `"say \\"hi\\""`)."""
        name = "python-dq-body" if quote == '"' else "python-sq-body"
        return self.rule(name, lambda: self.zero_or_more(self.choice([
            self.chars(f"[^{quote}\\\\]"), self.literal("\\") + self.chars("[\"'\\\\/bfnrtu]", 1, 1)])))


def python_value_ends(form: CallForm | None, keys: list[str], key: str) -> list[str]:
    """Where a value printed as it is ends: at `, KEY=` of another argument, or at the call's `)` followed by
    what the template writes after a call (`, ` or a newline before the next one, `]`, the section's end);
    without a form, as llama.cpp's list writes calls (`[a(...), b(...)]`)."""
    ends = [sep + k + "=" for k in keys if k != key for sep in (",", ", ")]
    if form is None:
        return [*ends, "),", ")]"]
    after_call = [form.separator.strip(C_SPACE) or form.separator, form.section_end.strip(C_SPACE)]
    if form.list_wrapped:
        after_call.append("]")
    return ends + ([")" + a for a in dict.fromkeys(after_call) if a] or [")"])


def build_chat_peg_parser(fn: Callable[[ChatBuilder], P | str]) -> Arena:
    """New chat builder, root = fn(builder), build."""
    b = ChatBuilder()
    root = fn(b)
    return b.build(root)
