"""What the recovery says about a message: the repairs the relaxed parser made (one line each, from one table),
the reasoning start the model wrote again, and a recovered call checked against the request's tools."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from autoparser.chat.tags import NAME_TAGS, TOOL, TOOL_OPEN
from autoparser.chat.tools import Function, Parameter, parameters
from autoparser.errors import AutoparserError
from autoparser.peg import ParseResult
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.plan import REPAIR, RecoveryPlan, lead_end
from autoparser.types import ChatMessage, Diagnostic

__all__ = ["MESSAGES", "begun_marker", "call_positions", "checked_calls", "diagnostic", "drop_repeated_start",
           "enumerated_parameters", "may_become_marker", "mistyped", "moved", "repair_diagnostics",
           "with_late_reasoning", "with_repairs", "without_revisable_calls"]


# What each repair says, `{raw}` being the text it concerns and `{pos}` where it is in the output: the readings
# of the relaxed parser (`repair:<kind>` nodes), then what the recovery itself does.
MESSAGES = {
    "missing_call_opener": "tool call without its opener at {pos}: read as a call",
    "repeated_reasoning_start": "reasoning start {raw!r} repeated at {pos} (the prompt opened it): dropped",
    "enumerated_value": "value {raw!r} at {pos} is none of the strings its schema admits: read as the JSON value "
                        "it spells",
    "union_parameters": "call at {pos} to a tool whose parameters are a union at the root (llama.cpp reads no "
                        "argument of it): read by the object schema of the union that fits it",
    "repeated_opener": "opener {raw!r} at {pos} written again after the same opener: markup",
    "prompt_reasoning": "the output at {pos} continues a reasoning block the prompt left open: read as reasoning "
                        "(llama.cpp reads it as content)",
    "unrequested_reasoning": "reasoning block {raw!r} at {pos} where the request turned thinking off (llama.cpp "
                             "drops it): read as reasoning",
    "undeclared_reasoning": "reasoning block {raw!r} at {pos} that the template does not show: read as reasoning",
    "typed_reasoning": "reasoning block {raw!r} at {pos}, which the template writes only from typed content: read "
                       "as reasoning",
    "missing_reasoning_start": "reasoning end {raw!r} at {pos} with no reasoning open: the text before it read as "
                               "reasoning",
    "reasoning_after_content": "reasoning block {raw!r} at {pos} after the content (the template writes reasoning "
                               "first): read as reasoning",
    "stray_reasoning_end": "reasoning end {raw!r} at {pos} with no reasoning open: dropped",
    "attribute_spelling": "a name attribute spelled otherwise at {pos} (in single quotes, or beside other "
                          "attributes): read as the template's",
    "missing_reasoning_block": "no reasoning block at {pos}, where the format writes one: the text read as "
                               "content",
    "reasoning_ended_by_call": "tool call at {pos} while reasoning was open: reasoning ends there",
    "unknown_tool": "call to {raw!r} at {pos}, a tool the request does not declare: kept",
    "name_key": "tool name under {raw!r} at {pos}: read as the name",
    "arguments_key": "arguments under {raw!r} at {pos}: read as the arguments",
    "arguments_as_string": "arguments given as a JSON string at {pos}: decoded",
    "empty_arguments": "no arguments written at {pos} (an empty arguments string): read as {{}}",
    "call_wrapper": "call wrapped in {raw!r} at {pos}: unwrapped",
    "extra_member": "call member {raw!r} at {pos}, which no field of a call holds: dropped (kept here)",
    "argument_whitespace": "argument value at {pos} without the template's surrounding newlines: accepted",
    "missing_argument_closer": "argument value at {pos} not closed: it ends where the next argument or the call "
                               "does",
    "missing_call_closer": "tool call at {pos} not closed: it ends where the next marker begins",
    "missing_argument_opener": "argument name at {pos} without its opener: read by its closer",
    "missing_value_opener": "argument value at {pos} without its opener: read from the name's closer",
    "restarted_call": "the call before {pos}, left without its closer, written again at {pos}: one call",
    "unparsed_text": "text at {pos} does not fit the format: kept as content",
    "unparsed_reasoning": "text at {pos} inside the open reasoning does not fit the format: kept as reasoning",
    "trailing_text": "text at {pos} after the end of the format: kept as content",
    "unreadable_call": "call {raw!r} at {pos} cannot be read (its neighbours can): kept as content",
    "unclosed_marker": "marker at {pos} without its closing text: it ends at the end of its line",
    "call_opener_spelling": "call opener {raw!r} at {pos} spelled unlike the template: accepted",
    "extra_call": "another call at {pos} where the request allows one: read as a call",
    "calls_grouped": "another call at {pos} inside the wrapper the template writes around each call: read as a call",
    "json_arguments": "call arguments at {pos} written as a JSON object, not as the template writes them: read "
                      "as the arguments",
    "json_call": "call at {pos} written as a JSON object, not as the template writes calls: read as a call",
    "marker_label": "marker {raw!r} at {pos} without the label the template writes after it: accepted",
    "json_string_value": "string value {raw!r} at {pos} quoted as JSON, not as the template quotes strings: "
                         "read as the JSON string",
    "call_parentheses": "call at {pos} with its arguments in parentheses, where the template writes braces: read "
                        "as the template's",
    "undeclared_argument": "argument {raw!r} at {pos}, which the tool's schema does not list: kept",
    "stray_closer": "closer {raw!r} at {pos} where nothing it closes is open: markup",
    "repeated_closer": "closer {raw!r} at {pos} written again after the one that closed: markup",
    "message_after_calls": "message at {pos} after the calls, which end the turn in the template: read as the "
                           "answer",
    "self_closing_call": "call at {pos} written as one self-closing element without arguments: read as a call "
                         "with none",
    "missing_recipient": "message at {pos} without the recipient the template writes in its header: a call by "
                         "its body",
    "section_repeated": "another call section at {pos} after the first: its calls read as calls",
    "call_array": "call at {pos} written without the JSON array the template writes calls in: read as a call",
    "call_separator": "calls separated by {raw!r} at {pos}, not as the template separates them: accepted",
    "python_value": "value {raw!r} at {pos} spelled as in Python: read as the JSON value it stands for",
    "unquoted_value": "argument value {raw!r} at {pos} without the quotes the template writes around values: "
                      "read as its JSON value",
    "string_markers": "argument {raw!r} at {pos} with the markers the template writes around a string only: "
                      "read as the value of its type",
    "missing_arguments_marker": "call arguments at {pos} without the marker the template writes before them: "
                                "read as the arguments",
    "missing_separator": "argument at {pos} without the separator the template writes before it: read as the "
                         "next argument",
    "arguments_fence": "call arguments at {pos} with a code fence where the template writes none, or without the "
                       "one it writes: read as the arguments",
    "unescaped_quote": "string value {raw!r} at {pos} holds a quote it does not escape: read up to the quote "
                       "an argument or the call's end follows",
}


def diagnostic(kind: str, position: int, raw: str) -> Diagnostic:
    """The diagnostic of one repair of the table, at `position` in the output."""
    return Diagnostic(kind, position, MESSAGES.get(kind, kind + " at {pos}").format(raw=raw, pos=position), raw)


def moved(d: Diagnostic, shift: int) -> Diagnostic:
    """`d` `shift` characters later in the output: its position, and the message that says it."""
    pos = d.position + shift
    if d.kind in MESSAGES:
        return diagnostic(d.kind, pos, d.raw)
    # (the others name a tool, or what was added, before ` at {pos}`: never output text)
    return replace(d, position=pos, message=re.sub(rf" at {d.position}(?![0-9])", f" at {pos}", d.message, count=1))


def repair_diagnostics(result: ParseResult, offset: int, partial: bool = True) -> list[Diagnostic]:
    """The repairs the relaxed parser made: one per `repair:<kind>` node of the parse (one the text ends inside
    only if the output is complete, not `partial`, and the node holds more than whitespace: while more may
    come, it may turn out otherwise, and a complete output ending inside a repair that holds some text keeps
    it); nor one of whitespace that nothing follows: what it would have been between (a separator before
    another call) never came, and whitespace at the end of an output is no repair."""
    out, length = [], len(result.text)
    for node in result.ast.walk(result.nodes):
        if not node.tag.startswith(REPAIR):
            continue
        text = node.text
        if text and node.end >= length and not text.strip(C_SPACE):
            continue
        if not node.is_partial or (not partial and text.strip(C_SPACE)):
            out.append(diagnostic(node.tag[len(REPAIR):], max(0, node.start - offset), text))
    return list(dict.fromkeys(out))  # (a closer both a call and its wrapper miss is one repair)


def drop_repeated_start(msg: ChatMessage, marker: str, output: str, partial: bool) -> ChatMessage:
    """Reasoning that begins with its own start marker: the model wrote the marker the prompt had opened. The
    marker goes (a diagnostic keeps it); while the reasoning could still become the marker, nothing shows."""
    reasoning = msg.reasoning_content
    if not marker or not reasoning:
        return msg
    start = lead_end(reasoning)
    if reasoning.startswith(marker, start):
        pos = max(output.find(marker), 0)
        return replace(msg, reasoning_content=reasoning[start + len(marker):],
                       diagnostics=(*msg.diagnostics, diagnostic("repeated_reasoning_start", pos, marker)))
    if partial and may_become_marker(reasoning, marker):
        return replace(msg, reasoning_content="")
    return msg


def begun_marker(text: str, markers: Iterable[str]) -> int:
    """How long a beginning of one of `markers` (not the whole marker) `text` ends with: 0 where none."""
    return max((n for m in markers for n in range(1, len(m)) if text.endswith(m[:n])), default=0)


def with_late_reasoning(msg: ChatMessage, start: str, end: str, output: str, partial: bool) -> ChatMessage:
    """`msg` with each reasoning block its content holds (`answer<think>more</think>rest`: a model that thinks
    again after it began its answer, or between its calls) read as reasoning, after the reasoning before it, the
    content around it joined (`reasoning_after_content`, its markers in the diagnostic), as vLLM's, SGLang's and
    TensorRT-LLM's reasoning parsers read it. A start marker nothing closes stays content (prose may mention
    one): while more may come (`partial`), the content from it on waits, as does a start marker being written."""
    content = msg.content
    if not start or not end or (start not in content and not partial):
        return msg
    reasoning, diags = msg.reasoning_content, list(msg.diagnostics)
    at, cursor = content.find(start), 0
    while at >= 0:
        close = content.find(end, at + len(start))
        if close < 0:
            if partial:
                content = content[:at]
            break
        body = content[at + len(start):close]
        pos = output.find(start + body + end, cursor)
        pos = pos if pos >= 0 else max(output.find(start, cursor), 0)
        cursor = pos + 1
        reasoning += body
        diags.append(diagnostic("reasoning_after_content", pos, start + end))
        content = content[:at] + content[close + len(end):]
        at = content.find(start, at)
    if partial:  # (a start marker being written)
        content = content[:len(content) - begun_marker(content, (start,))]
    if content == msg.content:
        return msg
    return replace(msg, content=content, reasoning_content=reasoning,
                   diagnostics=tuple(sorted(diags, key=lambda d: d.position)))


def may_become_marker(reasoning: str, marker: str) -> bool:
    """Whether `reasoning` (its leading whitespace aside) is a strict prefix of `marker`: while more may come,
    it may still turn out to be the repeated marker."""
    start = lead_end(reasoning)
    return len(reasoning) - start < len(marker) and marker.startswith(reasoning[start:])


def with_repairs(msg: ChatMessage, result: ParseResult, plan: RecoveryPlan, output: str, offset: int,
                 partial: bool, *, recovered: bool = True, relaxed: bool = True) -> ChatMessage:
    """The repairs the relaxed parser made, as diagnostics (a `relaxed` result: the strict parser makes none),
    and the repeated reasoning start dropped; a `recovered` message's calls also checked against the request's
    tools (the strict reading is the C++'s, left as is)."""
    diags = repair_diagnostics(result, offset, partial) if relaxed else []
    if diags:
        msg = replace(msg, diagnostics=(*diags, *msg.diagnostics))
    if relaxed and len(msg.tool_calls) > 1:
        msg = without_restarted_calls(msg, diags, result, offset)
    if relaxed and partial and msg.tool_calls:
        msg = without_revisable_calls(msg, diags, result, offset)
    if (recovered or diags) and not partial and msg.tool_calls:
        msg = checked_calls(msg, plan.tools, call_positions(result, offset))
    msg = drop_repeated_start(msg, plan.reasoning_start, output, partial)
    if len(msg.diagnostics) < 2:
        return msg
    return replace(msg, diagnostics=tuple(sorted(msg.diagnostics, key=lambda d: d.position)))


def without_restarted_calls(msg: ChatMessage, repairs: Sequence[Diagnostic], result: ParseResult,
                            offset: int) -> ChatMessage:
    """`msg` (mapped from `result`) without a call the model wrote again right after itself where it left out
    its closer (`<tool_call>skill\n{...}\n<tool_call>skill\n{...}</tool_call>`): it started the call over, and the
    call is one (Ollama's Laguna parser test `IgnoresDuplicatedNestedToolCall`). The repeat's text is kept in a
    diagnostic. (A stream shows a call once it is closed, and drops the repeat as it closes: it never shows.)
    `repairs`: the parse's (`repair_diagnostics`)."""
    missing = [d.position for d in repairs if d.kind == "missing_call_closer"]
    calls, starts = msg.tool_calls, call_positions(result, offset)
    if not missing or len(starts) != len(calls):
        return msg
    kept, diags = [calls[0]], list(msg.diagnostics)
    for i in range(1, len(calls)):
        before, call = calls[i - 1], calls[i]
        if (call.name, call.arguments) == (before.name, before.arguments) \
                and any(starts[i - 1] < at <= starts[i] for at in missing):
            end = starts[i + 1] if i + 1 < len(starts) else len(result.text) - offset
            diags.append(diagnostic("restarted_call", starts[i], result.text[offset + starts[i]:offset + end]))
        else:
            kept.append(call)
    if len(kept) == len(calls):
        return msg
    return replace(msg, tool_calls=tuple(kept), diagnostics=tuple(diags))


def without_revisable_calls(msg: ChatMessage, repairs: Sequence[Diagnostic], result: ParseResult,
                            offset: int) -> ChatMessage:
    """`msg` (mapped from a partial `result`) without the first call whose argument value a repair ended
    (`missing_argument_closer`: at the call's closer), nor any call after it. While more may come, the value's
    own closer may still come, and the value then runs to it, the call's closing markers its text (a Qwen3.5
    output writing `</tool_call>` inside a file's content, quoted in jundot/omlx PR #2588): the call shows when
    the output ends, as the whole parse reads it (a stream shows a call once, whole). `repairs`: the parse's."""
    ends = [d.position for d in repairs if d.kind == "missing_argument_closer"]
    if not ends or not msg.tool_calls:
        return msg
    starts = call_positions(result, offset)
    first = sum(1 for s in starts if s <= min(ends)) - 1  # (the call the earliest such value is in)
    if first < 0 or first >= len(msg.tool_calls):
        return msg
    return replace(msg, tool_calls=msg.tool_calls[:first])


def call_positions(result: ParseResult, offset: int) -> list[int]:
    """Where each call of the message begins in the output: calls are published once their name is read, and a
    call begins where its `tool` node (or, in formats without one, its `tool-open` node) does."""
    out, start = [], 0
    for n in result.ast.walk(result.nodes):
        if n.tag in (TOOL, TOOL_OPEN):
            start = n.start
        elif n.tag in NAME_TAGS:
            out.append(max(0, start - offset))
    return out


_PY_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list), "null": lambda v: v is None,
}


def _fits(value: object, types: frozenset[str]) -> bool:
    return any(_PY_TYPES[t](value) for t in types if t in _PY_TYPES)


def enumerated_parameters(tools: Iterable[Function]) -> dict[str, list[Parameter]]:
    """Each tool's parameters whose strings its schema enumerates beside other values (`{"enum": ["7", 8]}`), by
    the tool's name; tools without any are left out."""
    out: dict[str, list[Parameter]] = {}
    for f in tools:
        try:
            params = [p for p in parameters(f) if p.enumerated_strings is not None]
        except AutoparserError:
            continue
        if params:
            out[f.name] = params
    return out


def mistyped(msg: ChatMessage, enumerated: Mapping[str, list[Parameter]]) -> bool:
    """Whether a call holds, as a string, a text its schema admits only as the JSON value it spells (`"8"` under
    `{"enum": ["7", 8]}`; `enumerated`: `enumerated_parameters` of the request's tools): llama.cpp reads a raw value
    as a string wherever its schema admits some string, and the relaxed reading types it
    (`LooseCalls.loose_tagged_call`)."""
    for call in msg.tool_calls if enumerated else ():
        params = enumerated.get(call.name)
        try:
            args = json.loads(call.arguments) if params else None
        except ValueError:
            continue
        if not isinstance(args, dict):
            continue
        for param in params or ():
            value = args.get(param.name)
            if isinstance(value, str) and value not in (param.enumerated_strings or ()):
                try:
                    spelled = json.loads(value)
                except ValueError:
                    continue
                if param.node.admits(spelled):
                    return True
    return False


def checked_calls(msg: ChatMessage, tools: Iterable[Function], positions: list[int]) -> ChatMessage:
    """A recovered message's calls against the request's tools: a required argument left out and a value of a
    type its schema does not admit are reported, and kept as the model wrote them (a streamed call's arguments
    cannot be taken back; a tagged value that reads as its type, `42` for an integer, is already typed)."""
    declared = {f.name: f for f in tools}
    diags = list(msg.diagnostics)
    for i, call in enumerate(msg.tool_calls):
        f = declared.get(call.name)
        try:
            args = json.loads(call.arguments)
            params = parameters(f) if f is not None else []
        except (ValueError, AutoparserError):
            continue
        if not isinstance(args, dict):
            continue
        pos = positions[i] if i < len(positions) else 0
        for param in params:
            if param.name not in args:
                if param.required:
                    diags.append(Diagnostic("missing_argument", pos, f"call to {call.name!r} at {pos} lacks its "
                                            f"required argument {param.name!r}: kept without it", ""))
                continue
            types, value = param.types, args[param.name]
            if types and not types >= _PY_TYPES.keys() and not _fits(value, types):
                raw = json.dumps(value, ensure_ascii=False)
                diags.append(Diagnostic("argument_type", pos, f"argument {param.name!r} of {call.name!r} at {pos} "
                                        f"is not of type {'/'.join(sorted(types))}: kept as given", raw))
    return replace(msg, diagnostics=tuple(diags))
