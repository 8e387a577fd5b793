"""Calls as models write them beyond their template, read loosely: the tagged and the JSON call of the relaxed
builder (recovery/relax.py). Each reading beyond the template is a `repair:<kind>` node, derived from the
markers the format already has (a call's opener, its closers, its value delimiters), never from a model's
name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from autoparser.chat.builder import ChatBuilder, TaggedMarkers
from autoparser.chat.tags import TOOL_ARGS_STRING, TOOL_NAME_STRING
from autoparser.chat.tools import Function, Parameter, parameters
from autoparser.peg import P
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.plan import LOOKAHEAD_ONLY, RELAXED_MARKUP, REPAIR

__all__ = ["FENCE", "NAME_CHARS", "LooseCalls", "marker_pieces"]


# A code fence (Markdown's), which models write around JSON, and some templates around a call's arguments.
FENCE = "```"

# A name models give a tool or an argument the request does not declare.
NAME_CHARS = "[A-Za-z0-9_.:-]"


# Where a marker may take any whitespace, or none: a run of whitespace inside it, or between two tags
_MARKER_GAP = re.compile(r"[ \t\r\n]+|(?<=>)(?=<)")


def marker_pieces(text: str) -> list[str]:
    """The parts of a marker (without its surrounding whitespace) between which models write whitespace, or
    none, where the template writes some or none: `marker_spaced` reads them so."""
    return _MARKER_GAP.split(text.strip(C_SPACE))


def _lead(s: str) -> str:
    return s[:len(s) - len(s.lstrip(C_SPACE))]


def _trail(s: str) -> str:
    return s[len(s.rstrip(C_SPACE)):]


class LooseCalls(ChatBuilder):
    """`ChatBuilder` plus the `repair:<kind>` node and the loose call readings the relaxed builder uses."""

    def repair(self, kind: str, p: P | str) -> P:
        """`repair:kind:(p)`: a reading the strict format does not allow; the default parse reports it."""
        return self.tag(REPAIR + kind, p)

    def markup(self, texts: Sequence[str]) -> P:
        """A choice of `texts` that the relaxed parser reads as markup where llama.cpp's reads text (tagged, so
        that the recovery plan finds them: `RecoveryPlan.triggers`)."""
        return self.tag(RELAXED_MARKUP, self.choice([self.literal(t) for t in texts]))

    def loose_tagged_call(self, m: TaggedMarkers, f: Function | None,
                          json_first: Callable[[Parameter], bool] = lambda param: param.types != {"string"}, *,
                          branch: bool = False) -> P:
        """One tagged call as the template writes it, and as models write it beyond the template. A format's
        relaxed parser reads its calls with this alone, so that what a stream shows of a well-formed call is
        what the whole parse gives; values read as the format reads them (`json_first`: JSON where it parses,
        else a string; the other parameters' values are strings). `f` None: a call to a tool the request does
        not declare, read as `repair:unknown_tool`, its values JSON where they parse, else strings. `branch`: `f`
        is one object schema of a union its parameters are at the root (`branches`), so that a parameter whose
        strings the branch enumerates (`"kind": {"const": "count"}`) reads those only: the branch fits the call.

        Beyond the template:
        a name prefix ending in `=` written with a space (`<function bash>`); arguments in any order and number
        (a missing required one is the recovery's to report); values without the template's whitespace around
        them (`<parameter=path>/tmp/x</parameter>`; extra whitespace stays in the value, as in the strict
        parse); a value as Python spells it where the schema allows it (`python_spelled`); a value's closer
        left out where the call's closer or a declared argument's opener follows, or written where no value is
        open; a key's opener or its value's left out where the template writes the key between two tags; a call's closer left out where the next marker follows; the arguments as one JSON object
        (`tagged_arguments`); a value that does not fit its schema kept as a string."""
        t = str.strip
        call_end, after = t(m.call_close, C_SPACE), t(m.after_call, C_SPACE)
        value_end = t(m.value_suffix, C_SPACE)
        ends_call = [e for e in (call_end, after) if e]
        # (a value's closer left out where a declared argument's opener follows, `x\n<parameter=b>`: the opener up
        # to its first gap, so that a value's own text stops the value only where it names a declared argument)
        arg_prefix, arg_suffix = t(m.arg_prefix, C_SPACE), t(m.arg_suffix, C_SPACE)
        next_args = [arg_prefix + param.name + (_MARKER_GAP.split(arg_suffix)[0] if arg_suffix else "")
                     for param in parameters(f)] if f is not None and arg_prefix else []
        ends = list(dict.fromkeys([_lead(m.value_suffix) + value_end, value_end,
                                   *("\n" + e for e in (*ends_call, *next_args)), *ends_call, *next_args]))
        # (the openers are markup there, where the strict parser reads a value: triggers of the recovery plan)
        at_next = self.peek(self.space() + self.choice([*(self.literal(e) for e in ends_call),
                                                        *([self.markup(next_args)] if next_args else [])]))
        value_closers = [self.literal(c) for c in dict.fromkeys([_lead(m.value_suffix) + value_end, value_end])]
        close = self.tool_arg_close(self.choice([
            *value_closers, self.repair("missing_argument_closer", at_next)]))
        text = self.until_one_of(ends)
        # (a key between two tags, its own closer and then the value's opener, `<arg_key>K</arg_key><arg_value>`,
        # not one tag broken at a space inside it, DSML's `" string="true">`: its opener or the value's may be left
        # out, `opener`)
        tags = marker_pieces(t(m.arg_suffix, C_SPACE))
        two_tags = len(tags) > 1 and tags[-2].endswith(">") and tags[-1].startswith("<")
        if value_end:
            # (a value holding its closer's text, which the template writes as it is: `<arg_value>use </arg_value>
            # in docs</arg_value>`; a closer is the value's own where text and another value closer follow it
            # before the next argument or the call's end. While more may come that is undecided: a stream waits
            # there, never showing a value cut at a closer that turns out to be its own, and an output cut
            # after a closer waits first for the call's end, the closer a completion appends.)
            next_markers = [x for x in dict.fromkeys([*ends_call, t(m.arg_prefix, C_SPACE), value_end]) if x]
            # (nor where a declared argument follows without its key's opener, `Paris</arg_value>days</arg_key>`)
            unopened = [param.name + tags[-2] for param in parameters(f)] if two_tags and f is not None else []
            # (the call's closer likewise: `<arg_value>a </tool_call> b</arg_value>`, lmdeploy's GLM-4.7 tests)
            closer = self.choice([*value_closers, *(self.literal(e) for e in ends_call)])
            not_held = [self.literal(x) for x in next_markers]
            if unopened:
                not_held.append(self.tag(LOOKAHEAD_ONLY, self.choice([self.literal(x) for x in unopened])))
            held = self.peek(closer + self.negate(self.space() + self.choice(not_held))
                             + self.until_one_of(next_markers) + self.literal(value_end)) + closer
            text = text + self.zero_or_more(held + self.until_one_of(ends))
        string = self.tool_arg_string_value(text) + close

        def unclosed(suffix: str) -> P | None:
            # (a name's marker whose closing text the model left out, `<parameter=path\n` for
            # `<parameter=path>\n`: the line it ends holds the name, where the template writes a newline there)
            closing, ws = t(suffix, C_SPACE), _trail(suffix)
            return self.repair("unclosed_marker", self.literal("\n")) if closing and ws.startswith("\n") else None

        def opener(name: P) -> P:
            head = self.marker_spaced(t(m.arg_suffix, C_SPACE))
            if t(m.typed_arg_suffix, C_SPACE):  # (the one before a value that is no string: the value says its type)
                head = head | self.marker_spaced(t(m.typed_arg_suffix, C_SPACE))
            ws = _trail(m.arg_suffix)
            if ws:
                head = head + self.choice([self.literal(ws), self.repair("argument_whitespace", self.eps())])
            missing = unclosed(m.arg_suffix)
            if missing is not None:
                head = head | missing
            key = self.literal(t(m.arg_prefix, C_SPACE)) + name
            # (a key between two tags: the key's opener or the value's left out, where the key's closer still bounds
            # the key, as GLM-4.7 and GLM-5.2 outputs quoted in vLLM PR #47190 and issue #49248 do; the whitespace
            # before the value's opener is the marker's)
            if two_tags:
                head = head | self.repair("missing_value_opener", self.space_between(tags[:-1]) + self.space())
                key = key | self.repair("missing_argument_opener", name)
            return self.tool_arg_open(self.space() + key + head)

        def json_then_string(json_value: P, fallback: P, param: Parameter | None = None) -> P:
            # (then the value as Python spells it, `True`, `None`, `{'k': 'v'}`: python_spelled)
            python = self.python_spelled(param) if param is not None else None
            pythons = [self.atomic(python + close)] if python is not None else []
            # (whitespace around a JSON value is formatting: an indented value is the JSON it holds)
            return self.choice([self.atomic(self.space() + self.tool_arg_json_value(json_value) + self.space()
                                            + close), *pythons, fallback])

        def one_of(strings: frozenset[str]) -> list[P]:
            # (the strings a schema enumerates, each a whole value, the longest first)
            return [self.atomic(self.tool_arg_string_value(self.literal(text)) + close)
                    for text in sorted(strings, key=len, reverse=True)]

        args: list[P] = []
        if f is None:
            args.append(opener(self.tool_arg_name(self.chars(NAME_CHARS, 1, 64)))
                        + json_then_string(self.json(), string))
        else:
            for param in parameters(f):
                value = string
                enumerated = param.enumerated_strings
                only = param.node.finite_strings() if branch and param.types <= {"string"} else None
                if only is not None:
                    value = self.choice(one_of(only))
                elif enumerated is not None and not json_first(param):
                    # (a raw text that is none of the strings the schema admits is the JSON value it spells: `8`
                    # under `{"enum": ["7", 8]}`, where the template writes a string raw and a number as JSON)
                    spelled = self.atomic(self.space() + self.tool_arg_json_value(self.json()) + self.space() + close)
                    value = self.choice([*one_of(enumerated), self.repair("enumerated_value", spelled), string])
                elif json_first(param):
                    json_value = self.schema(self.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema,
                                             pointer=param.pointer)
                    value = json_then_string(json_value, string, param)
                args.append(self.tool_arg(opener(self.tool_arg_name(self.literal(param.name))) + value))
        prefix = t(m.name_prefix, C_SPACE)
        # (indentation before the call's opener where the template writes none, as before its arguments; the
        # opener's markers with any whitespace between them, or none: `marker_spaced`)
        name_open = self.space() + self.marker_spaced(_lead(m.name_prefix) + prefix) if prefix else self.eps()
        if prefix.endswith("="):
            name_open = self.choice([name_open, self.repair("call_opener_spelling", self.literal(prefix[:-1] + " "))])
        name = self.tool_name(self.literal(f.name)) if f is not None \
            else self.repair("unknown_tool", self.tool_name(self.chars(NAME_CHARS, 1, 64)))
        name_close = self.literal(t(m.name_suffix, C_SPACE)) + self.optional(self.literal(_trail(m.name_suffix))) \
            if t(m.name_suffix, C_SPACE) else self.space()
        missing = unclosed(m.name_suffix)
        if missing is not None:
            name_close = name_close | missing
        one = self.tool_arg(self.choice(args)) if f is None else self.choice(args) if args else None
        if value_end:  # (a value's closer where no value is open, `<function=f>\n</parameter>\n</function>`)
            stray = self.repair("stray_closer", self.space() + self.literal(value_end))
            one = stray if one is None else self.choice([one, stray])
        body = self.zero_or_more(one) if one is not None else self.eps()
        return self.tool(self.tool_open(name_open + name + name_close) + self.tagged_arguments(self.tool_args(body))
                         + self.space()
                         + self.tool_close(self.tagged_call_close(m))) + self.space()

    def marker_spaced(self, text: str) -> P:
        """A marker as the template writes it, with any whitespace, or none, where it has whitespace inside
        (`</arg_key>\n<arg_value>`) and between two tags it writes together (`</arg_key><arg_value>`), as models
        write it (formatting: not reported). Its leading and trailing whitespace stay as written."""
        core = text.strip(C_SPACE)
        if not core:
            return self.literal(text)
        pieces = marker_pieces(core)
        pieces[0], pieces[-1] = _lead(text) + pieces[0], pieces[-1] + _trail(text)
        spelled = self.spelling_of(core)
        if spelled:  # (as the template's tool instructions spell it: `also_spelled`)
            return self.choice([self.space_between(pieces), self.repair(
                "call_opener_spelling", self.literal(_lead(text) + spelled + _trail(text)))])
        return self.space_between(pieces)

    def spelling_of(self, marker: str) -> str:
        """How the template's instructions spell `marker` otherwise (`also_spelled`), or ''."""
        return ""

    def space_between(self, pieces: Sequence[str]) -> P:
        """`pieces` in order, with any whitespace, or none, between them."""
        out = self.literal(pieces[0])
        for piece in pieces[1:]:
            out = out + self.space() + self.literal(piece)
        return out

    def call_part_marker(self, text: str) -> P:
        core = text.strip(C_SPACE)
        if not core:
            return super().call_part_marker(text)
        marker = self.space() + self.marker_spaced(core) + self.space()
        if core == FENCE:  # the end of a fence around a call's arguments: left out with its opening (arguments_marker)
            return marker | self.repair("arguments_fence", self.eps())
        return marker

    def tagged_call_close(self, m: TaggedMarkers) -> P:
        """Where a tagged call ends: its closer, or, without a closer of its own, where the next marker shows
        (not at a half-seen one); a closer left out where the next marker follows, or the next call's opener."""
        call_end, after, opener = (t.strip(C_SPACE) for t in (m.call_close, m.after_call, m.call_open))
        call_close = self.literal(call_end) if call_end else self.peek(self.space() + self.literal(after))
        missing = [self.peek(self.literal(after))] if call_end and after else []
        if opener and opener not in (call_end, after):
            missing.append(self.peek(self.space() + self.literal(opener)))
        if missing:
            call_close = self.choice([call_close, self.repair("missing_call_closer", self.choice(missing))])
        return call_close

    def loose_json_call(self, name_key: str, args_key: str, names: Sequence[str]) -> P:
        """One JSON call as models write it beyond the template: its members in any order; the
        arguments under a usual key other than the template's (`parameters` for `arguments`) or given as a
        JSON string; the call wrapped in `{"type": "function", "function": {...}}`; a tool the request does
        not declare (`repair:unknown_tool`); the name under `name` where the template's key is another; the
        call's `id`; a member a call has no field for (`repair:extra_member`). A call has a name: an object
        without one is no call."""
        ws = self.space()

        def key(k: P) -> P:
            return k + ws + self.literal(":") + ws

        def other(*excluded: str) -> P:  # a member the call does not need
            skip = self.negate(self.choice([self.literal(f'"{k}"') for k in excluded])) if excluded else self.eps()
            # (`"type": "function"` is the OpenAI call's markup; any other member is text the message has no
            # field for: the diagnostic keeps it)
            return self.choice([key(self.literal('"type"')) + self.literal('"function"'),
                                self.repair("extra_member", skip + key(self.json_string()) + self.json())])

        def comma() -> P:
            return ws + self.literal(",") + ws

        def name_string(p: P) -> P:  # (a name JSON escapes, `"\\"get weather\\""`, is the name it decodes to)
            return self.atomic(self.tag(TOOL_NAME_STRING, p))

        declared = self.choice([name_string(self.literal(json.dumps(n, ensure_ascii=False)[1:-1]))
                                + self.peek(self.literal('"')) for n in names])
        name_value = self.literal('"') + self.choice([
            declared, self.repair("unknown_tool", name_string(self.string_content('"')))]) + self.literal('"')
        name_key_p = self.literal(f'"{name_key}"')
        if name_key != "name":  # (the name under the key most JSON dialects use, `name` for `tool_name`)
            name_key_p = name_key_p | self.repair("name_key", self.literal('"name"'))
        name = key(name_key_p) + self.atomic(name_value)
        others = [k for k in ("arguments", "parameters", "args", "input") if k != args_key]
        args_key_p = self.choice([self.literal(f'"{args_key}"'),
                                  *(self.repair("arguments_key", self.literal(f'"{k}"')) for k in others)])
        args_value = self.choice([
            self.tool_args(self.json_object()),
            self.repair("arguments_as_string", self.literal('"') + self.tag(TOOL_ARGS_STRING, self.string_content('"'))
                        + self.literal('"'))])
        args = key(args_key_p) + args_value
        # (the call's id, where a template renders the whole OpenAI call: `{"id": ..., "type": "function", ...}`)
        call_id = key(self.literal('"id"')) + self.literal('"') + self.tool_id(self.string_content('"')) \
            + self.literal('"')
        # members before the name, the name, members after it
        flat = self.zero_or_more(self.choice([args, call_id, other(name_key, "name")]) + comma()) + name \
            + self.zero_or_more(comma() + self.choice([args, call_id, other()]))
        wrapper = self.zero_or_more(self.choice([call_id, other("function")]) + comma()) \
            + self.repair("call_wrapper", key(self.literal('"function"'))) + self.literal("{") + ws + flat + ws \
            + self.literal("}") + self.zero_or_more(comma() + self.choice([call_id, other()]))
        return self.tool(self.tool_open(self.literal("{")) + ws + self.choice([flat, wrapper]) + ws
                         + self.tool_close(self.literal("}")))
