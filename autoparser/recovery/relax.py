"""The relaxed builder: a format's build function, run on it, makes the relaxed parser, which reads what models
write beyond their template.

`ChatBuilder` (chat/builder.py) makes llama.cpp's pieces through a few hooks; `RelaxedBuilder` overrides each
hook to read more, every reading beyond the template a `repair:<kind>` node that the default parse reports as
a diagnostic (recovery/checks.py says each in words). The relaxed parser parses only: it never becomes a
grammar, so its nodes need not follow the C++'s order. What the recovery needs to know besides the parser
(the texts it reads as markup where llama.cpp reads text, where calls begin) is in the parser too, as tags
the recovery plan reads back (recovery/plan.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autoparser.analysis.model import CallForm
from autoparser.analysis.reasoning import REASONING_SPELLINGS
from autoparser.chat.builder import DerivedReasoning, TaggedMarkers, python_value_ends
from autoparser.chat.tags import TOOL_NAME_ESCAPED
from autoparser.chat.tools import Function, Parameter, branches
from autoparser.peg import P
from autoparser.peg.builder import Operand, rule_name
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.loose import FENCE, NAME_CHARS, LooseCalls, marker_pieces
from autoparser.recovery.plan import CALL_START, DROPPED_BLOCK, END_SPACE, HEADER, SPACED_MARKUP, TYPED_BLOCK

__all__ = ["RelaxedBuilder"]


def _closed(schema: Any) -> bool:
    """Whether a tool's parameters schema forbids arguments it does not list (`additionalProperties: false`)."""
    return isinstance(schema, Mapping) and schema.get("additionalProperties") is False


# A marker's last token: a special token (`<|tool_call_argument_begin|>`, `<｜tool▁sep｜>`, `<tool_sep>`) or a
# bracketed one (`[ARGS]`).
_LAST_TOKEN = re.compile(r"(?:<[^<>]+>|\[[A-Z_]+\])\Z")
# Where a JSON token of a bare call start ends, whitespace may follow (`[`, `{`): `[{"name"` is `[`, `{`, `"name"`.
_JSON_TOKEN_END = re.compile(r"(?<=^[\[{])|(?<=^[\[{][\[{])")


class RelaxedBuilder(LooseCalls):
    """The builder of a format's relaxed parser: `ChatBuilder`'s hooks, reading more (see each hook there)."""

    def __init__(self) -> None:
        super().__init__()
        self._rule_owners: dict[str, str] = {}  # sanitised rule name -> the name that registered it
        self._spellings: dict[str, str] = {}  # a marker (trimmed) -> how the template's instructions spell it

    def also_spelled(self, marker: str, spelling: str) -> None:
        self._spellings[marker.strip(C_SPACE)] = spelling.strip(C_SPACE)
        self.calls_begin_at([spelling.strip(C_SPACE)])  # (a call begins there too: reading may resume at it)

    def spelling_of(self, marker: str) -> str:
        return self._spellings.get(marker, "")

    def rule(self, name: str, p: Operand | Callable[[], P], trigger: bool = False) -> P:
        """A rule, kept apart from any other rule whose name sanitises alike. (llama.cpp names a rule after a
        tool with its `_` made `-`: two tools whose names differ only there, `get-weather` and `get_weather`,
        share one rule, the later tool's replaces the earlier's, and the earlier tool's calls are not read,
        a bug the strict parser keeps as the C++ has it. The relaxed parser never becomes a grammar.)"""
        owners = self._rule_owners
        clean = rule_name(name)
        if owners.setdefault(clean, name) != name:
            k = 2
            while owners.setdefault(rule_name(f"{name}-{k}"), name) != name:
                k += 1
            name = f"{name}-{k}"
        return super().rule(name, p, trigger)

    def end(self) -> P:
        """The end of the output, whitespace before it allowed: a model may end its turn with a newline where the
        template writes none, and whitespace at the end of an output is formatting, not a repair."""
        return self.tag(END_SPACE, self.space()) + super().end()

    def opener_or_missing(self, opener: str) -> P:
        """`opener | repair:call_opener_spelling:(trimmed) | repair:missing_call_opener:(ε)`: a call opener the
        model may write without the whitespace the template puts around it (`<tool_call>{`), or leave out."""
        trimmed = opener.strip(C_SPACE)
        # (tags the template writes together may come with whitespace between them: `marker_spaced`)
        if not trimmed or trimmed == opener:
            return self.choice([self.marker_spaced(opener), self.repair("missing_call_opener", self.eps())])
        return self.choice([self.marker_spaced(opener), self.repair("call_opener_spelling", self.marker_spaced(trimmed)),
                            self.repair("missing_call_opener", self.eps())])

    # --- openers and the content before calls -------------------------------------------------------------

    def call_opener(self, opener: str, *, spaced: bool = False) -> P:
        if not opener.strip(C_SPACE):
            return self.literal(opener)
        return self.opener_or_missing(opener) + self.space() if spaced else self.opener_or_missing(opener)

    def opened(self, opener: str, then: P) -> P:
        self.calls_begin_at([opener.strip(C_SPACE)])  # (a call begins at its opener: reading may resume there)
        return super().opened(opener, then)

    def undeclared_call(self, call: Callable[[P], P], escaped_until: str = "") -> list[P]:
        if escaped_until:
            name = self.atomic(self.tag(TOOL_NAME_ESCAPED, self.chars(f"[^{escaped_until}<>\n]", 1, 128)))
        else:
            name = self.tool_name(self.chars(NAME_CHARS, 1, 64))
        return [call(self.repair("unknown_tool", name))]

    def block_closer(self, closer: str, opener: str) -> P:
        after = opener.strip(C_SPACE)
        if not closer.strip(C_SPACE) or not after:
            return super().block_closer(closer, opener)
        return self.choice([super().block_closer(closer, opener),
                            self.repair("missing_call_closer", self.peek(self.literal(after)))])

    def calls_opened(self, opener: str, call: P, min_calls: int, max_calls: int) -> P:
        if not opener.strip(C_SPACE):
            return super().calls_opened(opener, call, min_calls, max_calls)
        # (whitespace before each opener, where models write calls on lines of their own)
        first = self.space_then(self.opened(opener, call))
        if max_calls != 1:
            first = first + self.repeat(self.space_then(self.marker_spaced(opener) + call), 0,
                                        -1 if max_calls < 0 else max_calls - 1)
        return first if min_calls > 0 else self.optional(first)

    def calls_with_first_opener(self, strict: Callable[[], P], opener: str, call: Callable[[], P],
                                min_calls: int, max_calls: int) -> P:
        return self.calls_opened(opener, call(), min_calls, max_calls)

    def content_until_calls(self, markers: Sequence[str], bare: Sequence[str], call: Callable[[], P]) -> P:
        """Content up to the first marker, or up to the first of the `bare` texts where `call()` follows (a call
        written without its opener; JSON's whitespace allowed between the tokens of a JSON one, `[\n  {"name"`, as
        models pretty-print calls); at a bare text no call follows, the content goes on past it. A marker of tags
        the template writes together ends it with whitespace between them too (`<|action_start|> <|plugin|>`), as
        the opener reads it (`opener_or_missing`)."""
        # (a marker's surrounding whitespace may be left out: the opener reads it so, see opener_or_missing)
        stops = list(dict.fromkeys(m.strip(C_SPACE) or m for m in markers))
        joined = [m for m in stops if len(marker_pieces(m)) > 1]
        if not bare and not joined:
            return super().content_until_calls(markers, bare, call)
        pieces = [[t for t in _JSON_TOKEN_END.split(text) if t] for text in bare]
        heads = [p[0] for p in pieces]  # (where the scan stops: a bare text, or its first JSON token)
        joined_heads = [marker_pieces(m)[0] for m in joined]
        delimiters = list(dict.fromkeys([*stops, *heads, *joined_heads]))
        guards: list[P] = []
        # (the content ends at a head the calls follow, and at a marker that begins with a head, `[TOOL_CALLS]` and
        # `[`; a marker that is a bare text too ends it only where the calls follow)
        guarded = [m for m in stops if m not in heads and any(m.startswith(h) for h in heads)]
        if guarded:
            guards.append(self.negate(self.choice([self.literal(m) for m in guarded])))
        if joined:
            guards.append(self.negate(self.choice([self.marker_spaced(m) for m in joined])))
        if bare:
            starts = self.choice([self.markup(p) if len(p) == 1 else self.spaced_markup(p) for p in pieces])
            guards.append(self.negate(self.peek(starts) + call()))
        more = self.sequence([*guards, self.content(self.choice([self.literal(h) for h in dict.fromkeys(
            [*heads, *joined_heads])]) + self.until_one_of(delimiters))])
        return self.content(self.until_one_of(delimiters)) + self.zero_or_more(more)

    def spaced_markup(self, pieces: Sequence[str]) -> P:
        """`pieces` in order, whitespace or none between them, read as markup where llama.cpp's parser reads text
        (tagged, so that the recovery plan finds them: `RecoveryPlan.triggered_within`)."""
        return self.tag(SPACED_MARKUP, self.space_between(pieces))

    def content_until_call_list(self, markers: Sequence[str], bare: Sequence[str], call: Callable[[], P]) -> P:
        # A bare list may begin with a call it cannot read: content also stops at a `[` the calls follow (and
        # always at a readable call's `[name(`, so a list that fails is the recovery's, not content).
        calls = call()
        at_list = self.negate(self.choice([self.literal(m) for m in bare])) + self.peek(self.markup(["["])) \
            + self.negate(calls)
        return self.content(self.until("[")) + self.zero_or_more(at_list + self.content(self.literal("[")
                                                                                       + self.until("[")))

    def bare_call_starts(self, texts: Sequence[str]) -> list[str]:
        return list(texts)

    def calls_begin_at(self, texts: Sequence[str]) -> None:
        # (a node no parser refers to: data for the recovery plan, which resumes reading at these texts)
        texts = [t for t in texts if t]
        if texts:
            self.tag(CALL_START, self.choice([self.literal(t) for t in texts]))

    # --- reasoning ------------------------------------------------------------------------------------------

    def reasoning_ended_by_call(self, close: P, openers: Sequence[str], draft_until: str = "") -> P:
        if not openers:
            return close
        # (before `close`, which may match nothing: an optional end marker; the openers are markup where the
        # strict parser reads reasoning, triggers of the recovery plan)
        ended = self.repair("reasoning_ended_by_call", self.peek(self.markup(openers))) | close
        return (self._draft_call(openers, draft_until, self.literal(draft_until)) | ended) if draft_until else ended

    def reasoning_between(self, strict: Callable[[], P], start: str, end: str, calls: Sequence[str], *,
                          spaced: bool = False, opener: Callable[[], P] | None = None) -> P:
        if not calls:
            return strict()
        # (where it does not read so, as llama.cpp reads it: a block it reads without its start, or to the end)
        return self.choice([(opener() if opener else self.literal(start)) + (self.space() if spaced else self.eps())
                            + self._reasoning_body(end, calls), strict()])

    def dropped_reasoning(self, strict: Callable[[], P], start: str, end: str) -> P:
        # (a node no parser refers to: data for the recovery plan, `RecoveryPlan.drops_text`)
        self.tag(DROPPED_BLOCK, self.literal(start) + self.literal(end))
        return self.repair("unrequested_reasoning", self.literal(start)) + self.space() \
            + self.reasoning(self.until(end)) + self.literal(end)

    def derived_reasoning(self, strict: Callable[[], P], block: DerivedReasoning) -> P:
        if not block.shown and block.extracted:
            return self._undeclared_reasoning(block.call_markers)
        if not block.read:
            return strict()
        body = self._reasoning_body(block.end, block.call_markers)
        if block.prompt_opened:  # (a reading llama.cpp does not make: said by a diagnostic)
            # the model may write the opener the prompt left open (reasoning text otherwise)
            again = self.optional(self.space() + self.repair("repeated_reasoning_start",
                                                             self.literal(block.start.strip(C_SPACE))))
            body = self.repair("prompt_reasoning", self.eps()) + again + body
        if block.open_before_prompt:
            return self.optional(body)
        if block.start:  # or an end marker with no reasoning open
            opener = self.optspace(block.start)
            if block.typed:  # (a block llama.cpp does not read: said by a diagnostic)
                self.tag(TYPED_BLOCK, self.literal(block.start) + self.literal(block.end))
                opener = self.space() + self.repair("typed_reasoning", self.literal(block.start.strip(C_SPACE)))
            return self.optional(self.choice([opener + body, self._stray_end(block.end)]))
        return self.optional(body)

    def _undeclared_reasoning(self, call_markers: Sequence[str]) -> P:
        """A reasoning block at the start of the output although the template shows none: read as reasoning
        (and a lone end marker there dropped)."""
        blocks = [self.repair("undeclared_reasoning", self.literal(start)) + self._reasoning_body(end, call_markers)
                  + self.space() for start, end in REASONING_SPELLINGS]
        strays = [self._stray_end(end) for _, end in REASONING_SPELLINGS]
        return self.optional(self.space() + self.choice(blocks + strays))

    def _stray_end(self, end: str) -> P:
        return self.repair("stray_reasoning_end", self.space() + self.literal(end.strip(C_SPACE))) + self.space()

    def _reasoning_body(self, end_marker: str, markers: Sequence[str]) -> P:
        """Reasoning after its start: up to its end marker, further end markers before the content dropped; at a
        call marker, a draft call if the end marker follows later (held back from a stream until it does), else
        the start of the calls (reasoning ends there)."""
        end = end_marker.strip(C_SPACE)
        closed = self.optspace(end_marker)
        stray = self.zero_or_more(self._stray_end(end))  # (outside the draft's atomic: it waits on trailing whitespace)
        if not markers:
            return self.reasoning(self.until(end)) + closed + stray
        draft = self._draft_call(markers, end, closed)
        # (the markers are markup there where the strict parser reads reasoning: the recovery plan's triggers)
        return self.reasoning(self.until_one_of([end, *markers])) + self.choice([
            closed, draft, self.repair("reasoning_ended_by_call", self.peek(self.markup(markers)))]) + stray

    def _draft_call(self, markers: Sequence[str], end: str, closed: P) -> P:
        """At a call marker inside reasoning, a draft call the reasoning's end marker (`end`, read by `closed`)
        follows: reasoning up to it, whole or not at all (a stream holds it back until the marker comes)."""
        at_call = self.peek(self.choice([self.literal(m) for m in markers]))
        return at_call + self.atomic(self.reasoning(self.until(end)) + closed)

    # --- calls ----------------------------------------------------------------------------------------------

    def value_or_text(self, value: P, text: Callable[[], P], checked: Callable[[], P] | None = None) -> P:
        # (whole or not at all: a stream never shows a prefix of the text as a value, `0` of `018956`)
        return self.atomic(checked() if checked is not None else value) | text()

    def nested_elements(self, strict: Callable[[], P], elements: Callable[[], P]) -> P:
        return strict() | elements()

    def arguments_value(self) -> P:
        # (nothing where the template writes the arguments string as it is, and it was empty: `{}`; not before a
        # fence, which opens the arguments: `fenced_arguments`)
        return self.json_object() | self.repair("empty_arguments", self.negate(self.literal(FENCE)))

    def loose_json_calls(self, calls: P, name_key: str, args_key: str, names: Sequence[str]) -> P:
        # the template's calls first, then as models write them beyond it
        return calls | self.loose_json_call(name_key, args_key, names)

    def call_separator(self, between: P) -> P:
        return between | self.repair("call_separator", self._loose_between())

    def member_separator(self, separator: str) -> P:
        # (the member after it says where it begins: its key, which the caller reads next)
        return self.literal(separator) | self.repair("missing_separator", self.eps())

    def arguments_marker(self, marker: str) -> P:
        core = marker.strip(C_SPACE)
        if not core:
            return super().arguments_marker(marker)
        # Left out: a code fence's opening whole, else the marker's last token (`<|tool_call_argument_begin|>`
        # of `:0<|tool_call_argument_begin|>`: the call's index before it is still written).
        fence = core.startswith(FENCE)
        token = None if fence else _LAST_TOKEN.search(core)
        before = "" if fence else core[:token.start()] if token else core
        if before == core:
            return self.call_part_marker(marker)
        left_out = (self.literal(before) if before else self.eps()) + self.peek(self.space() + self.literal("{"))
        return self.call_part_marker(marker) | self.repair("arguments_fence" if fence else "missing_arguments_marker",
                                                           left_out)

    def fenced_arguments(self, args: P) -> P:
        fenced = self.literal(FENCE) + self.optional(self.literal("json")) + self.space() + args + self.space() \
            + self.literal(FENCE)
        # (the arguments first: a partial parse ends inside them, where a call is open; they read nothing before a
        # fence, `arguments_value`)
        return args | self.repair("arguments_fence", fenced)

    def call_id_text(self, suffix: str) -> P:
        return self.until_one_of((suffix, "{"))

    def python_spelled(self, param: Parameter) -> P | None:
        types = param.types
        literals = [p for t, p in (("boolean", self.python_bool), ("null", self.python_null),
                                   ("object", self.python_dict), ("array", self.python_array)) if t in types]
        if not literals:
            return None
        return self.repair("python_value", self.tool_arg_json_value(self.choice([make() for make in literals])))

    def tagged_arguments(self, args: P, json_open: str = "", json_close: str = "") -> P:
        json_args = self.tool_args(self.json_object())
        if json_open:
            json_args = self.literal(json_open) + self.space() + json_args + self.space() + self.literal(json_close)
        return self.repair("json_arguments", json_args) | args

    def call_array(self, calls: P) -> P:
        return super().call_array(calls) | self.repair("call_array", self.peek(self.literal("{")) + calls)

    def extra_calls(self, calls: P, call: P) -> P:
        return calls + self.zero_or_more(self.repair("extra_call", self._loose_between()) + call)

    def value_choice(self, values: Sequence[P], rules: str, quote: str) -> P:
        json_string = self.rule(f"{rules}-json-string", self.repair("json_string_value", self.json_string()))
        # (Gemma 4 writes `filename:'output.pdf'` under load: jundot/omlx PR #1854)
        python_string = self.rule(f"{rules}-python-string", self.repair("python_value", self.literal("'")
                                  + self.python_escaped_body("'") + self.literal("'")))
        # (the opening quote left out, `query:weather in Tokyo<|"|>`, as SGLang's Gemma 4 tests feed it: the text
        # up to the closing quote, never across a bracket of the syntax around it)
        unopened = self.rule(f"{rules}-unopened-string", self.repair("missing_value_opener", self.until_one_of(
            [quote, "{", "}", "[", "]"]) + self.literal(quote)))
        return self.choice([*values, json_string, python_string, unopened])

    def undeclared_keyword(self, schema: Any) -> P | None:
        if _closed(schema):
            return None
        name = self.tool_arg_name(self.chars("[A-Za-z_]", 1, 1) + self.chars("[A-Za-z0-9_]", 0, 63))
        return self.repair("undeclared_argument", self.tool_arg(
            self.tool_arg_open(name + self.literal("=")) + self.tool_arg_value(self.python_or_json_value())
            + self.tool_arg_close(self.eps())))

    def undeclared_arg(self, arg: Callable[[], P], schema: Any) -> list[P]:
        return [] if _closed(schema) else [self.repair("undeclared_argument", arg())]

    def undeclared_attribute_arg(self, opener: str, string_value: P, schema: Any) -> list[P]:
        quote = opener[-1:]
        if quote not in ('"', "'"):
            return []

        def arg() -> P:
            name = self.tool_arg_name(self.chars(f"[^{quote}<>\n]", 1, 128))
            return self.tool_arg(self.tool_arg_open(self.literal(opener) + name + self.literal(quote + ">"))
                                 + string_value)
        return self.undeclared_arg(arg, schema)

    def message_after_calls(self, calls: P, message: Callable[[], P]) -> P:
        return calls + self.optional(self.repair("message_after_calls", message()))

    def value_closer(self, close: str) -> P:
        # (not where only whitespace ends the output: a partial match there would leave the value open, and an
        # output cut after its closer would lose it)
        again = self.negate(self.space() + self.end()) + self.space() + self.literal(close)
        return self.literal(close) + self.optional(self.repair("stray_closer", again))

    def written_otherwise(self, strict: Callable[[], P], other: Callable[[], P], marks: str, kind: str) -> P:
        if marks:
            self.markup([marks])  # (a node no parser refers to: data for the recovery plan's triggers)
        return strict() | self.repair(kind, other())

    def labelled_marker(self, token: str, label: str, follows: Callable[[], P] | None = None) -> P:
        return self.literal(token + label) | self._followed(self.repair("marker_label", self.literal(token)), follows)

    def _followed(self, marker: P, follows: Callable[[], P] | None) -> P:
        """`marker` (a repair), where `follows()` reads what comes next (an atomic whole: a marker the output's
        end cuts off before that is text, `holes_in`)."""
        return marker if follows is None else self.atomic(marker + self.peek(follows()))

    def header_marker(self, text: str, then: str = "") -> P:
        header = self.space() + self.marker_spaced(text.lstrip(C_SPACE))
        if then:
            header = header + self.peek(self.space() + self.literal(then))
        return self.atomic(self.tag(HEADER, header))

    def empty_markers(self, token: str, label: str) -> P:
        return self.zero_or_more(self.literal(token) + self.peek(self.literal(token)))

    def grouped_calls(self, call: P) -> P:
        return call + self.zero_or_more(self.repair("calls_grouped", self._loose_between()) + call)

    def more_calls_before(self, call: Callable[[], P], *closer: Callable[[], P]) -> tuple[Callable[[], P], ...]:
        # (a call read here sits inside the first call's closer: the mapper closes that call first, pre-order)
        return (lambda: self.zero_or_more(self.repair("calls_grouped", self.space() + call()))
                + self.cpp_sum(*closer),)

    def call_sections(self, first: P, again: Callable[[], P], markers: Sequence[str]) -> P:
        stops = [m.strip(C_SPACE) for m in markers if m.strip(C_SPACE)]
        # (a further section begins with its marker: text the model echoes after the calls is no section. Text
        # between two sections is the recovery's: content up to the next call marker, where reading resumes)
        at_marker = self.peek(self.choice([self.literal(m) for m in stops])) if stops else self.eps()
        # (the whitespace before may be the output's end: where text follows it, it goes with that text)
        return first + self.zero_or_more(self.tag(END_SPACE, self.space()) + at_marker
                                         + self.repair("section_repeated", again()))

    def name_attribute(self, opener: str, name: Callable[[], P]) -> tuple[Callable[[], P], ...]:
        element = opener.removesuffix(' name="')
        if element == opener:
            return super().name_attribute(opener, name)

        def attributes() -> P:  # (`type="text"`: what they say is not read; never the name: PEG does not go back)
            value = self.choice([self.literal(q) + self.until(q) + self.literal(q) for q in ('"', "'")])
            return self.zero_or_more(self.chars("[ \t\n]") + self.negate(self.literal("name="))
                                     + self.chars("[A-Za-z_:]", 1, 1) + self.chars(r"[A-Za-z0-9_:.\-]", 0)
                                     + self.literal("=") + value)

        def spelled(quote: str) -> P:
            # (no whitespace before the name at all, `<functionname="f">`, as a tokenizer that drops a space
            # writes it: vLLM's MiniCPM5 tests)
            return (self.literal(element) + attributes() + self.chars("[ \t\n]", 0) + self.literal(f"name={quote}")
                    + name() + self.literal(quote) + attributes() + self.space() + self.literal(">"))

        def either() -> P:
            strict = self.cpp_sum(*super(RelaxedBuilder, self).name_attribute(opener, name))
            return self.choice([strict, self.repair("attribute_spelling", self.choice([spelled('"'), spelled("'")]))])

        return (either,)

    def _loose_between(self) -> P:
        """Between two calls as models write them: whitespace, or `;` or `,` with whitespace around."""
        return self.space() + self.optional(self.chars("[;,]", 1, 1) + self.space())

    def typed_value_unquoted(self, arg: P, f: Function, param: Parameter, name_prefix: str, name_suffix: str,
                             quote: str) -> P:
        quote = quote.strip(C_SPACE)
        if not quote or not name_suffix.endswith(quote):
            return arg
        opener = self.tool_arg_open(name_prefix + self.tool_arg_name(self.literal(param.name))
                                    + name_suffix[:-len(quote)])
        value = self.tool_arg_json_value(self.schema(self.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema,
                                                     pointer=param.pointer))
        return arg | self.tool_arg(opener + self.repair("unquoted_value", value | self.syntax_value(quote)))

    def string_marked_value(self, typed: P, as_string: Callable[[], P]) -> P:
        return typed | self.repair("string_markers", as_string())

    def space_then(self, piece: P) -> P:
        return self.space() + piece

    def joined_markers(self, text: str) -> P:
        return self.marker_spaced(text)

    def escaped_name(self, name: str, spelled: str) -> P:
        declared = super().escaped_name(name, spelled)
        if spelled == name:
            return declared
        return self.choice([declared, self.atomic(self.tag(TOOL_NAME_ESCAPED, self.literal(spelled)))])

    def opener_again(self, opener: P, marker: str, follows: Callable[[], P] | None = None) -> P:
        again = self._followed(self.repair("repeated_opener", self.marker_spaced(marker)), follows)
        return opener + self.optional(self.space() + again)

    def spaced_marker(self, text: str) -> P:
        return self.space() + self.markup([text])

    def optionally_closed_call(self, head: P, closer: str) -> P:
        return self.tool(head + self.tool_close(self.eps())) + self.optional(self.space_then(self.literal(closer)))

    def tagged_call_choice(self, strict: Callable[[], P], markers: TaggedMarkers | None,
                           tools: Sequence[Function], json_first: Callable[[Parameter], bool]) -> P:
        if markers is None:
            return strict()
        # calls as the template writes them and beyond (None: an undeclared tool, where names are marked); a tool
        # whose parameters are a union at the root, as the first of its object schemas that fits the call, or read
        # as the first that reads it
        calls: list[P] = []
        for f in tools:
            union = branches(f)
            calls += [self.repair("union_parameters", call) for call in (
                *(self.loose_tagged_call(markers, b, json_first, branch=True) for b in union),
                *(self.loose_tagged_call(markers, b, json_first) for b in union))] if union \
                else [self.loose_tagged_call(markers, f, json_first)]
        if markers.names_marked:
            calls.append(self.loose_tagged_call(markers, None, json_first))
        # a JSON call object where the name begins, as the family's JSON dialect writes a call
        json_call = self.repair("json_call", self.loose_json_call("name", "arguments", [f.name for f in tools]))
        return self.choice([*calls, json_call + self.space() + self.tagged_call_close(markers) + self.space()])

    def python_string_body(self, quote: str, form: CallForm | None) -> P:
        return self.python_escaped_body(quote)

    def python_string_value(self, value: P, form: CallForm | None, keys: list[str], key: str) -> P:
        # A quote the model left unescaped inside a string (`command='sed -n '1,5p' f'`): the literal holds only
        # where an argument's or the call's end follows it; else the value runs to a quote that one follows, as
        # a template that prints values as they are writes. (A quote right before another argument's name,
        # `"x"days=3`, is a missing comma: no such value, and the call stays unreadable.)
        ends = python_value_ends(form, keys, key)
        names = [k + "=" for k in keys if k != key]
        printed = self.choice([self.quoted_as_is(q, [*ends, *names]) + self.peek(self.choice([self.literal(e)
                                                                                               for e in ends]))
                               for q in "'\""])
        # (a triple-quoted string, `query='''a ' and ] inside'''`, as Python writes one holding quotes or lines:
        # its text between the quotes)
        triple = self.choice([self.literal(q * 3) + self.tool_arg_string_value(self.until(q * 3)) + self.literal(q * 3)
                              for q in "'\""])
        ended = self.peek(self.space() + self.chars("[,)]", 1, 1))
        return value + ended | self.repair("python_value", triple + ended) | self.repair("unescaped_quote", printed)

    def python_call_list(self, call: P, between: P) -> P:
        # a call it cannot read, beside one it can: its text is content
        bad = self.negate(call) + self.repair("unreadable_call", self.content(self._python_call_text()))
        return self.zero_or_more(bad + between) + call + self.zero_or_more(between + (call | bad))

    def _python_call_text(self) -> P:
        """Any `name(...)` with balanced brackets and closed quotes: a call the relaxed parser cannot read."""
        def balanced() -> P:
            quoted = [self.literal(q) + self.python_escaped_body(q) + self.literal(q) for q in "\"'"]
            nested = [self.literal(o) + self.ref("python-balanced") + self.literal(c) for o, c in ("()", "[]", "{}")]
            return self.zero_or_more(self.choice([self.chars("[^()\\[\\]{}'\"]"), *quoted, *nested]))

        return self.chars("[A-Za-z_]") + self.chars("[A-Za-z0-9_.]", 0) + "(" \
            + self.rule("python-balanced", balanced) + ")"
