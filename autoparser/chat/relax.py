"""The relaxations of a format's lenient parser: how models write outputs beyond what the template renders.

A format's build function, run on a lenient builder (`ChatBuilder(lenient=True)`), adds these to what it
reads; each is a `repair:<kind>` tag that the default parse (chat/recover.py) reports as a diagnostic. They
are derived from the markers the format already has (a call's opener, its closers, its value delimiters),
never from a model's name. The lenient parser parses only: it never becomes a grammar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoparser.chat.tags import REPAIR, TOOL_ARGS_STRING, ChatTags
from autoparser.chat.tools import Function, Parameter, parameters
from autoparser.peg import P

__all__ = ["Relaxations", "TaggedMarkers"]

_C_SPACE = " \t\n\v\f\r"


def _lead(s: str) -> str:
    return s[:len(s) - len(s.lstrip(_C_SPACE))]


def _trail(s: str) -> str:
    return s[len(s.rstrip(_C_SPACE)):]


# A name models give a tool or an argument the request does not declare.
_NAME_CHARS = "[A-Za-z0-9_.:-]"


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

    @property
    def readable(self) -> bool:
        """Whether a loose reading can tell the parts apart: an argument opener, a value closer, a call end."""
        return all(s.strip(_C_SPACE) for s in (self.arg_prefix, self.value_suffix)) \
            and bool((self.call_close or self.after_call).strip(_C_SPACE))

    @property
    def names_marked(self) -> bool:
        """Whether a marker says where a name begins, so that a call to an undeclared tool can be told apart."""
        return bool(self.name_prefix.strip(_C_SPACE))



class Relaxations(ChatTags):
    """`ChatTags` plus the relaxations; `lenient` says whether a format's build adds them."""

    def __init__(self, *, lenient: bool = False) -> None:
        super().__init__()
        # Whether this builds the lenient parser of a format (chat/recover.py): the relaxations on top of the
        # strict parser, which parses only and never becomes a grammar.
        self.lenient = lenient
        # Texts this (lenient) parser reads as markup where the strict one reads text (Recovery.triggers):
        # anywhere in it, or only at the start of the content (`lead_triggers`: reasoning markers)
        self.repair_triggers: list[str] = []
        self.lead_triggers: list[str] = []
        # Where a call may begin beside the grammar's trigger words (a bare JSON call's `{"name"`): after text
        # it cannot read, the reading resumes at one (Recovery.call_markers).
        self.call_markers: list[str] = []
        # The opening tag of a reasoning block the prompt leaves open and the strict (C++) parser does not read
        # (generic.py `_with_prompt_reasoning`), or "": where set, every output is read by this parser.
        self.prompt_reasoning = ""

    def repair(self, kind: str, p: P | str) -> P:
        """`repair:kind:(p)`: a relaxation the strict format does not allow; the default parse reports it."""
        return self.tag(REPAIR + kind, p)

    def opener_or_missing(self, opener: str) -> P:
        """`opener | repair:call_opener_spelling:(trimmed) | repair:missing_call_opener:(ε)`: a call opener
        the model may write without the whitespace the template puts around it (`<tool_call>{`), or leave
        out."""
        trimmed = opener.strip(_C_SPACE)
        if not trimmed or trimmed == opener:
            return self.choice([self.literal(opener), self.repair("missing_call_opener", self.eps())])
        self.repair_triggers.append(trimmed)
        return self.choice([self.literal(opener), self.repair("call_opener_spelling", self.literal(trimmed)),
                            self.repair("missing_call_opener", self.eps())])

    def call_opener(self, opener: str) -> P:
        """A call's (or a section's) opener; in a lenient parser, one the model may leave out or spell without
        its whitespace (`opener_or_missing`)."""
        if self.lenient and opener.strip(_C_SPACE):
            return self.opener_or_missing(opener)
        return self.literal(opener)

    def opened(self, opener: str, then: P) -> P:
        """`opener then`, the opener a `call_opener`. (`then` is made first, and the strict parser's literal
        after it, as the C++ evaluates `opener + then`.)"""
        return self.call_opener(opener) + then

    def calls_opened(self, opener: str, call: P, min_calls: int, max_calls: int) -> P:
        """`(opener call){min,max}`; in a lenient parser, the first call's opener may be left out (a format
        whose every call has its own opener: the model drops the first one most)."""
        if not (self.lenient and opener.strip(_C_SPACE)):
            return self.repeat(opener + call, min_calls, max_calls)
        first = self.opened(opener, call)
        if max_calls != 1:
            first = first + self.repeat(opener + call, 0, -1 if max_calls < 0 else max_calls - 1)
        return first if min_calls > 0 else self.optional(first)

    def content_until_calls(self, markers: Sequence[str], bare: Sequence[str], call: P) -> P:
        """Content up to the first of `markers`; in a lenient parser, also up to a `bare` text where `call`
        follows (`content_before_calls`)."""
        if self.lenient and bare:
            return self.content_before_calls(markers, bare, call)
        return self.content(self.until_one_of(list(markers)) if len(markers) > 1 else self.until(markers[0]))

    def content_before_calls(self, markers: Sequence[str], bare: Sequence[str], call: P) -> P:
        """Content up to the first marker, or up to the first of the `bare` texts where `call` follows (a call
        written without its opener); at a bare text no call follows, the content goes on past it."""
        self.repair_triggers.extend(bare)
        # (a marker's surrounding whitespace may be left out: the opener reads it so, see opener_or_missing)
        delimiters = list(dict.fromkeys([*(m.strip(_C_SPACE) or m for m in markers), *bare]))
        at_bare = self.choice([self.literal(t) for t in bare])
        more = self.sequence([self.peek(at_bare), self.negate(call), self.content(at_bare + self.until_one_of(delimiters))])
        return self.content(self.until_one_of(delimiters)) + self.zero_or_more(more)

    def loose_tagged_call(self, m: TaggedMarkers, f: Function | None,
                          json_first: Callable[[Parameter], bool] = lambda param: param.types != {"string"}) -> P:
        """One tagged call as the template writes it, and as models write it beyond the template. A format's
        lenient parser reads its calls with this alone, so that what a stream shows of a well-formed call is
        what the whole parse gives; values read as the format reads them (`json_first`: JSON where it parses,
        else a string; the other parameters' values are strings). `f` None: a call to a tool the request does
        not declare, read as `repair:unknown_tool`, its values JSON where they parse, else strings.

        Beyond the template:
        a name prefix ending in `=` written with a space (`<function bash>`); arguments in any order and number
        (a missing required one is the recovery's to report); values without the template's whitespace around
        them (`<parameter=path>/tmp/x</parameter>`; extra whitespace stays in the value, as in the strict
        parse); a value's closer left out where the call's closer follows; a call's closer left out where the
        next marker follows; a value that does not fit its schema kept as a string."""
        t = str.strip
        call_end, after = t(m.call_close, _C_SPACE), t(m.after_call, _C_SPACE)
        value_end = t(m.value_suffix, _C_SPACE)
        ends_call = [e for e in (call_end, after) if e]
        ends = list(dict.fromkeys([_lead(m.value_suffix) + value_end, value_end,
                                   *("\n" + e for e in ends_call), *ends_call]))
        at_call_end = self.peek(self.space() + self.choice([self.literal(e) for e in ends_call]))
        close = self.tool_arg_close(self.choice([
            self.literal(_lead(m.value_suffix) + value_end), self.literal(value_end),
            self.repair("missing_argument_closer", at_call_end)]))
        string = self.tool_arg_string_value(self.until_one_of(ends)) + close

        def opener(name: P) -> P:
            head = self.literal(t(m.arg_prefix, _C_SPACE)) + name + self.literal(t(m.arg_suffix, _C_SPACE))
            ws = _trail(m.arg_suffix)
            if ws:
                head = head + self.choice([self.literal(ws), self.repair("argument_whitespace", self.eps())])
            return self.tool_arg_open(self.space() + head)

        def json_then_string(json_value: P, fallback: P) -> P:
            return self.choice([self.atomic(self.tool_arg_json_value(json_value) + close), fallback])

        args: list[P] = []
        if f is None:
            args.append(opener(self.tool_arg_name(self.chars(_NAME_CHARS, 1, 64)))
                        + json_then_string(self.json(), string))
        else:
            for param in parameters(f):
                value = string
                if json_first(param):
                    json_value = self.schema(self.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema,
                                             pointer=param.pointer)
                    value = json_then_string(json_value, string)
                args.append(self.tool_arg(opener(self.tool_arg_name(self.literal(param.name))) + value))
        prefix = t(m.name_prefix, _C_SPACE)
        name_open = self.literal(_lead(m.name_prefix) + prefix) if prefix else self.eps()
        if prefix.endswith("="):
            name_open = self.choice([name_open, self.repair("call_opener_spelling", self.literal(prefix[:-1] + " "))])
        name = self.tool_name(self.literal(f.name)) if f is not None \
            else self.repair("unknown_tool", self.tool_name(self.chars(_NAME_CHARS, 1, 64)))
        name_close = self.literal(t(m.name_suffix, _C_SPACE)) + self.optional(self.literal(_trail(m.name_suffix))) \
            if t(m.name_suffix, _C_SPACE) else self.space()
        # without a closer of its own, a call ends where the next marker shows (not at a half-seen one)
        call_close = self.literal(call_end) if call_end else self.peek(self.space() + self.literal(after))
        if call_end and after:
            call_close = self.choice([call_close, self.repair("missing_call_closer", self.peek(self.literal(after)))])
        body = self.zero_or_more(self.tool_arg(self.choice(args)) if f is None else self.choice(args)) \
            if args else self.eps()
        return self.tool(self.tool_open(name_open + name + name_close) + self.tool_args(body) + self.space()
                         + self.tool_close(call_close)) + self.space()

    def loose_json_call(self, name_key: str, args_key: str, names: Sequence[str]) -> P:
        """One JSON call as models write it beyond the template: its members in any order, others skipped; the
        arguments under a usual key other than the template's (`parameters` for `arguments`) or given as a
        JSON string; the call wrapped in `{"type": "function", "function": {...}}`; a tool the request does
        not declare (`repair:unknown_tool`). A call has a name: an object without one is no call."""
        ws = self.space()

        def key(k: P) -> P:
            return k + ws + self.literal(":") + ws

        def other(*excluded: str) -> P:  # a member the call does not need
            skip = self.negate(self.choice([self.literal(f'"{k}"') for k in excluded])) if excluded else self.eps()
            return skip + key(self.json_string()) + self.json()

        def comma() -> P:
            return ws + self.literal(",") + ws

        declared = self.choice([self.tool_name(self.literal(n)) + self.peek(self.literal('"')) for n in names])
        name_value = self.literal('"') + self.choice([
            declared, self.repair("unknown_tool", self.tool_name(self.string_content('"')))]) + self.literal('"')
        name = key(self.literal(f'"{name_key}"')) + self.atomic(name_value)
        others = [k for k in ("arguments", "parameters", "args", "input") if k != args_key]
        args_key_p = self.choice([self.literal(f'"{args_key}"'),
                                  *(self.repair("arguments_key", self.literal(f'"{k}"')) for k in others)])
        args_value = self.choice([
            self.tool_args(self.json_object()),
            self.repair("arguments_as_string", self.literal('"') + self.tag(TOOL_ARGS_STRING, self.string_content('"'))
                        + self.literal('"'))])
        args = key(args_key_p) + args_value
        # members before the name, the name, members after it
        flat = self.zero_or_more(self.choice([args, other(name_key)]) + comma()) + name \
            + self.zero_or_more(comma() + self.choice([args, other()]))
        wrapper = self.zero_or_more(other("function") + comma()) \
            + self.repair("call_wrapper", key(self.literal('"function"'))) + self.literal("{") + ws + flat + ws \
            + self.literal("}") + self.zero_or_more(comma() + other())
        return self.tool(self.tool_open(self.literal("{")) + ws + self.choice([flat, wrapper]) + ws
                         + self.tool_close(self.literal("}")))
