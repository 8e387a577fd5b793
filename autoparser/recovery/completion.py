"""Completing an output that ends inside a structure: the closers the parse waits for, supplied at the end (only
closers: never a name, a key or text), then arguments still open closed as JSON; and the longest prefix the
parser can still continue, where an output stops fitting."""

from __future__ import annotations

import json
from dataclasses import replace

from autoparser.chat.mapper import map_result
from autoparser.errors import ParseError
from autoparser.peg import Arena, Ast, ParseResult, ResultType
from autoparser.peg import nodes as N
from autoparser.peg.engine import OBS_LITERAL, OBS_STRING, OBS_UNTIL, OBS_UNTIL_CUT
from autoparser.peg.nodes import C_SPACE
from autoparser.types import ChatFormat, ChatMessage, Diagnostic, ToolCall

__all__ = ["close_json", "closed_as_complete", "closed_calls", "complete_at_end", "parse_text", "viable_prefix"]



def parse_text(arena: Arena, text: str, *, partial: bool = True) -> ParseResult:
    """`text` parsed as a prefix of an output, where a parse running out of text needs more (`partial`), or as
    a complete one (where it fails: a reasoning that never ends is no draft). The nesting guard's error is a
    failure there."""
    try:
        return arena.parse(text, partial=partial)
    except ParseError as e:
        return ParseResult(type=ResultType.FAIL, start=0, end=e.position, nodes=(), invalid_utf8=(), ast=Ast(),
                           text=text)


def viable_prefix(arena: Arena, effective: str, offset: int) -> int:
    """The length of the longest prefix of `effective` (at least `offset`) the parser can continue: its parse
    does not fail, nor end before the prefix does (a format without an end anchor succeeds on what it read
    and leaves the rest)."""

    def stops(end: int) -> bool:
        result = parse_text(arena, effective[:end])
        return result.fail or (result.success and result.end < end)

    lo, hi = offset, len(effective)  # effective[:lo] is viable (or lo == offset), effective[:hi] is not
    if stops(lo):
        return offset
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if stops(mid):
            hi = mid
        else:
            lo = mid
    return lo


def _waiting_for(arena: Arena, result: ParseResult) -> list[str]:
    """What the parse waited for at the end of the input, as texts to append: the rest of a literal or a
    delimiter cut off by the end, the delimiter of a scan that ran into it, the quote of a JSON string."""
    text, out = result.text, []
    for kind, pid, pos in result.observed:
        if pid < 0:
            continue
        node = arena.parsers[pid]
        if kind == OBS_LITERAL and isinstance(node, N.Literal):
            out.append(node.literal[len(text) - pos:])
        elif kind in (OBS_UNTIL, OBS_UNTIL_CUT) and isinstance(node, N.Until):
            for d in node.delimiters:
                cut = len(text) - pos if kind == OBS_UNTIL_CUT else 0
                out.append(d[cut:] if 0 <= cut <= len(d) and d.startswith(text[pos:]) else d)
        elif kind == OBS_STRING:
            out.append('"')
    return list(dict.fromkeys(s for s in out if s))


def complete_at_end(arena: Arena, closers: frozenset[str], text: str, fmt: ChatFormat) -> tuple[ParseResult, str]:
    """`text` (a partial parse) with the closers the parse waits for appended, as long as each is one of the
    format's `closers` and keeps the parse alive; the parse reached, and what was appended.

    A parse waits only where its first open choice does: after a call, whitespace at the end may be the start
    of the separator before another call (`,`), where the closer that ends the output (`</tool_call>`) is the
    other way on. Where nothing it waits for closes, and nothing was appended yet (the output's structures are
    whole), a closer of the format that ends the parse there (it succeeds, reading the closer to its end and no
    more text into a field) is appended."""
    result, pieces = parse_text(arena, text), list[str]()  # (the closers appended, in order)
    for _ in range(8):
        if not result.need_more_input:
            break
        before = map_result(result, fmt)
        for want in _waiting_for(arena, result):
            # (what the appended text completes must be a closer: the rest of an opener cut off, `<tool` +
            # `_call>`, ends a closer too)
            done = text + "".join(pieces) + want
            if not any(c.endswith(want) and done.endswith(c.strip(C_SPACE) or c) for c in closers) and want != '"':
                continue
            tried = parse_text(arena, done)
            if tried.fail or not _only_closes(before, map_result(tried, fmt), [*pieces, want]):
                continue
            result = tried
            pieces.append(want)
            break
        else:
            ending = None if pieces else _ending_closer(arena, closers, text, before, fmt)
            if ending is not None:
                return ending
            break
    if result.need_more_input and not pieces:
        return closed_as_complete(arena, closers, text, fmt) or (result, "")
    return result, "".join(pieces)


def closed_as_complete(arena: Arena, closers: frozenset[str], text: str,
                        fmt: ChatFormat) -> tuple[ParseResult, str] | None:
    """`text` read as the complete output it is, with one or two of the format's `closers` appended: the first
    (the shortest) that makes it parse whole, adds calls to what the partial parse reads, and ends up in no field.
    For a partial parse that waits on no closer: a call in reasoning no end marker follows is a draft while more
    may come, so that parse waits on the end marker; in a complete output the reasoning ends at the call, and the
    call's closers the output leaves out are appended to that reading."""
    before = map_result(parse_text(arena, text), fmt)
    pieces = sorted({c.strip(C_SPACE) or c for c in closers}, key=lambda c: (len(c), c))
    # (the rest of a closer the output ends in the start of, `</tool_ca`, first)
    rests = [c[k:] for c in pieces for k in range(len(c) - 1, 0, -1) if text.endswith(c[:k])]
    for appended in dict.fromkeys([*rests, *pieces, *(a + b for a in pieces for b in pieces)]):
        tried = parse_text(arena, text + appended, partial=False)
        if not tried.success or tried.end != len(text) + len(appended):
            continue
        after = map_result(tried, fmt)
        fields = [after.content, after.reasoning_content, *(c.arguments for c in after.tool_calls)]
        written = [p for p in pieces if p.strip('"}],') and p in text[-len(p):] + appended]  # (or completed)
        if len(after.tool_calls) > len(before.tool_calls) and not any(p in f for p in written for f in fields):
            return tried, appended
    return None


def _ending_closer(arena: Arena, closers: frozenset[str], text: str, before: ChatMessage,
                   fmt: ChatFormat) -> tuple[ParseResult, str] | None:
    """The parse of `text` with one of the format's `closers` appended where that ends it (the longest such
    closer first), the message otherwise unchanged; None if none does."""
    for closer in sorted({c.strip(C_SPACE) or c for c in closers}, key=lambda c: (-len(c), c)):
        tried = parse_text(arena, text + closer)
        if tried.success and tried.end == len(text) + len(closer) \
                and _only_closes(before, map_result(tried, fmt), [closer]):
            return tried, closer
    return None


def _only_closes(before: ChatMessage, after: ChatMessage, appended: list[str]) -> bool:
    """`after` adds nothing to `before` but closing: the same text fields, the same calls with arguments grown
    by closing punctuation only, and maybe calls the closers completed (their text was in the output, and no
    closer `appended` is in their arguments: a closer that ends up in a value made the text before it a value's
    own, where a value may hold its closer)."""
    if (after.content, after.reasoning_content) != (before.content, before.reasoning_content):
        return False
    if len(after.tool_calls) < len(before.tool_calls):
        return False
    for a, b in zip(after.tool_calls, before.tool_calls):
        if a.name != b.name or not a.arguments.startswith(b.arguments):
            return False
        if a.arguments[len(b.arguments):].strip(C_SPACE + '"}],'):
            return False
    markers = [m for m in (piece.strip(C_SPACE) for piece in appended) if m.strip('"}],')]  # (not JSON's closing)
    return not any(m in c.arguments for c in after.tool_calls[len(before.tool_calls):] for m in markers)


def _json_stack(text: str) -> tuple[list[str], bool, bool, int]:
    """The closers of the arrays and objects open at the end of `text`, whether a string is open there, whether
    an escape is, and a position after which the text may be cut and closed (after a complete member or item)."""
    stack: list[str] = []
    in_string = escaped = False
    last_safe = 0
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
            last_safe = i + 1
        elif ch in "}]" and stack:
            stack.pop()
            last_safe = i + 1
        elif ch == ",":
            last_safe = i
    return stack, in_string, escaped, last_safe


def close_json(text: str) -> str:
    """`text`, a JSON value cut off by the end of the output, closed: the open string, then the open arrays
    and objects; a member cut before its value is dropped. Valid JSON text stays as it is."""
    if not text.strip(C_SPACE):
        return "{}"
    try:
        json.loads(text)
        return text
    except ValueError:
        pass
    stack, in_string, escaped, last_safe = _json_stack(text)
    head = text[:-1] if escaped else text
    cut = text[:last_safe].rstrip(C_SPACE + ",")
    candidates = [head + ('"' if in_string else "") + "".join(reversed(stack)),
                  cut + "".join(reversed(_json_stack(cut)[0]))]
    for c in candidates:
        try:
            json.loads(c)
            return c
        except ValueError:
            continue
    return "{}"


def closed_calls(msg: ChatMessage, position: int, *, closers_only: bool = False) -> ChatMessage:
    """Every call's arguments valid JSON (a complete output may end inside them); with `closers_only`, only
    where closing them appends to them (arguments that are no JSON for another reason stay as they are)."""
    calls, diags = [], list(msg.diagnostics)
    for call in msg.tool_calls:
        args = close_json(call.arguments)
        if closers_only and not args.startswith(call.arguments):
            args = call.arguments
        if args != call.arguments:
            diags.append(Diagnostic("truncated_arguments", position,
                                    f"arguments of {call.name!r} cut off at {position}: closed as {args!r}",
                                    call.arguments))
        calls.append(ToolCall(call.name, args, call.id))
    return replace(msg, tool_calls=tuple(calls), diagnostics=tuple(diags))
