"""Recovering what the model meant from a malformed output, with an honest account of what was repaired.

llama.cpp answers any output its parser rejects with "Failed to parse input". The default parse here gives the
same message wherever the strict parse is well-formed, and otherwise repairs, each repair recorded as a
`Diagnostic` in the message. In order:

1. The strict parser (the C++'s) reads the whole output and its message's text holds none of the texts the
   lenient parser reads as markup (`Recovery.triggers`): its message stands (the lenient one would be the same).
2. The lenient parser (the format's own relaxations, each a `repair:<kind>` tag in the grammar: a call opener
   the model left out, a repeated reasoning marker, ...) accepts it: its message, the tags read as diagnostics.
3. The output ends inside a structure (a call whose closers are missing, arguments cut off): the closers the
   parse waits for are supplied (only closers: never a name, a key or text), else the arguments are closed as
   JSON; a diagnostic names what was missing.
4. Text the parser cannot place: the output up to the longest prefix the lenient parser can still continue
   (cut back to before a call it cannot complete) is read as in 3, and the rest is kept as content.

Whatever happens, no text is lost (each character is in a field, a recognised marker, or a diagnostic's
`raw`), no exception escapes for a complete output, and tool-call arguments are valid JSON. A stream
(chat/stream.py) reaches the same message: every step is a function of a prefix of the output that only
extends what earlier prefixes gave.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from autoparser.chat.mapper import map_result, without_open_calls
from autoparser.chat.tags import (
    CONTENT,
    REASONING,
    REPAIR,
    TOOL,
    TOOL_ARG_CLOSE,
    TOOL_ARG_NAME,
    TOOL_ARG_STRING_VALUE,
    TOOL_ARG_VALUE,
    TOOL_ARGS,
    TOOL_CLOSE,
    TOOL_ID,
    TOOL_NAME,
)
from autoparser.chat.tools import Function, parameters
from autoparser.errors import AutoparserError, ParseError
from autoparser.peg import Arena, Ast, AstNode, ParseResult, ResultType
from autoparser.peg import nodes as N
from autoparser.peg.engine import OBS_LITERAL, OBS_STRING, OBS_UNTIL, OBS_UNTIL_CUT
from autoparser.types import ChatFormat, ChatMessage, Diagnostic, ToolCall

__all__ = ["SPECIAL_TOKEN", "Recovery", "after_unparsed", "checked_calls", "close_json", "closers",
           "drop_repeated_start", "finish", "markup_spans", "may_become_marker", "recover", "repair_diagnostics",
           "rest_after", "split_unparsed", "unaccounted", "viable_prefix", "with_unparsed"]

_WS = " \t\n\v\f\r"

# What each repair says, `{raw}` being the text it concerns: the relaxations of lenient grammars (`repair:<kind>`
# tags), then what the recovery itself does.
_MESSAGES = {
    "missing_call_opener": "tool call without its opener at {pos}: read as a call",
    "repeated_reasoning_start": "reasoning start {raw!r} repeated at {pos} (the prompt opened it): dropped",
    "prompt_reasoning": "the output at {pos} continues a reasoning block the prompt left open: read as reasoning "
                        "(llama.cpp reads it as content)",
    "undeclared_reasoning": "reasoning block {raw!r} at {pos} that the template does not show: read as reasoning",
    "stray_reasoning_end": "reasoning end {raw!r} at {pos} with no reasoning open: dropped",
    "reasoning_ended_by_call": "tool call at {pos} while reasoning was open: reasoning ends there",
    "unknown_tool": "call to {raw!r} at {pos}, a tool the request does not declare: kept",
    "arguments_key": "arguments under {raw!r} at {pos}: read as the arguments",
    "arguments_as_string": "arguments given as a JSON string at {pos}: decoded",
    "call_wrapper": "call wrapped in {raw!r} at {pos}: unwrapped",
    "argument_whitespace": "argument value at {pos} without the template's surrounding newlines: accepted",
    "missing_argument_closer": "argument value at {pos} not closed: it ends where the call does",
    "missing_call_closer": "tool call at {pos} not closed: it ends where the next marker begins",
    "unparsed_text": "text at {pos} does not fit the format: kept as content",
    "trailing_text": "text at {pos} after the end of the format: kept as content",
    "unreadable_call": "call {raw!r} at {pos} cannot be read (its neighbours can): kept as content",
    "call_opener_spelling": "call opener {raw!r} at {pos} spelled unlike the template: accepted",
    "extra_call": "another call at {pos} where the request allows one: read as a call",
    "call_separator": "calls separated by {raw!r} at {pos}, not as the template separates them: accepted",
    "unescaped_quote": "string value {raw!r} at {pos} holds a quote it does not escape: read up to the quote "
                       "an argument or the call's end follows",
}


@dataclass(frozen=True)
class Recovery:
    """What the default parse of one request needs beside the strict parser."""

    lenient: Arena
    """The lenient parser: the strict one plus the format's relaxations (the strict one if it has none)."""
    triggers: tuple[str, ...] = ()
    """Texts the lenient parser reads as markup where the strict one reads text: where the strict message's
    content or reasoning holds one, the lenient parser may read the output differently."""
    lead_triggers: tuple[str, ...] = ()
    """The same, read as markup only at the start of the content (reasoning markers)."""
    reasoning_start: str = ""
    """The reasoning start marker, dropped at the start of reasoning when the model repeats it."""
    tools: tuple[Function, ...] = ()
    """The request's tools, which a recovered call's arguments are checked against."""
    prompt_reasoning: bool = False
    """The prompt leaves a reasoning block open that only the lenient parser reads (chat/generic.py
    `_with_prompt_reasoning`): every output may be reasoning the strict message shows as content."""
    call_markers: tuple[str, ...] = ()
    """The texts calls begin with (the format's trigger words, and where calls have no marker, how the
    template begins one): after a call it cannot read, the reading resumes at the next one."""

    @functools.cached_property
    def _lead_pattern(self) -> re.Pattern[str] | None:
        return re.compile("|".join(map(re.escape, self.lead_triggers))) if self.lead_triggers else None

    def triggered(self, msg: ChatMessage) -> bool:
        """Whether the strict message's text holds a trigger, where the lenient parser may read otherwise."""
        content = msg.content
        if self.prompt_reasoning and content:
            return True
        if any(t in content or t in msg.reasoning_content for t in self.triggers):
            return True
        lead = self._lead_pattern
        return lead is not None and lead.match(content, _lead_end(content)) is not None


def _parse(arena: Arena, text: str, *, complete: bool = False) -> ParseResult:
    """`text` parsed as a prefix of an output (where a parse running out of text needs more), or as a
    `complete` one (where it fails: a reasoning that never ends is no draft)."""
    try:
        return arena.parse(text, partial=not complete)
    except ParseError as e:  # the nesting guard: read as a failure there
        return ParseResult(type=ResultType.FAIL, start=0, end=e.position, nodes=(), invalid_utf8=(), ast=Ast(),
                           text=text)


# --- closers --------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def closers(arena: Arena) -> frozenset[str]:
    """The texts that only close something in this format: literals under tool-close and argument-close tags,
    the delimiters of string argument values. Supplying them never invents a name, a key or content."""
    out: set[str] = set()
    parsers = arena.parsers

    def literals(pid: int, depth: int = 0) -> Iterable[str]:
        node = parsers[pid]
        if depth > 12:
            return
        if isinstance(node, N.Literal):
            yield node.literal
        elif isinstance(node, N.Until):
            yield from node.delimiters
        for child in N.child_ids(node):
            yield from literals(child, depth + 1)

    def holds_call(pid: int, depth: int = 0) -> bool:
        node = parsers[pid]
        if isinstance(node, N.Tag) and node.tag == TOOL:
            return True
        if depth > 3 or not isinstance(node, (N.Choice, N.Rule, N.Tag, N.Sequence)):
            return False
        return any(holds_call(c, depth + 1) for c in N.child_ids(node))

    for node in parsers:
        if isinstance(node, N.Tag) and node.tag in (TOOL_CLOSE, TOOL_ARG_CLOSE, TOOL_ARG_STRING_VALUE):
            out.update(s for s in literals(node.child) if s.strip(_WS))
        elif isinstance(node, N.Sequence):
            # the literal right after a call (`</tool_call>` after `<function=...>...</function>`)
            for before, after in zip(node.children, node.children[1:]):
                lit = parsers[after]
                if isinstance(lit, N.Literal) and lit.literal.strip(_WS) and holds_call(before):
                    out.add(lit.literal)
        elif isinstance(node, N.Rule) and node.trigger:
            # a call section's own closer: the last literal of its body
            body = parsers[node.child]
            if isinstance(body, N.Sequence) and body.children:
                last = parsers[body.children[-1]]
                if isinstance(last, N.Literal) and last.literal.strip(_WS):
                    out.add(last.literal)
    return frozenset(out)


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
    seen: set[str] = set()
    return [s for s in out if s and not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]


def _complete_at_end(arena: Arena, text: str, fmt: ChatFormat) -> tuple[ParseResult, str]:
    """`text` (a NEED_MORE parse) with the closers the parse waits for appended, as long as each is a closer of
    the format and keeps the parse alive; the parse reached, and what was appended."""
    allowed = closers(arena)
    result, added = _parse(arena, text), ""
    for _ in range(8):
        if not result.need_more_input:
            break
        before = map_result(result, fmt)
        for want in _waiting_for(arena, result):
            if not any(c.endswith(want) for c in allowed) and want != '"':
                continue
            tried = _parse(arena, text + added + want)
            if tried.fail or not _only_closes(before, map_result(tried, fmt)):
                continue
            result, added = tried, added + want
            break
        else:
            break
    return result, added


def _only_closes(before: ChatMessage, after: ChatMessage) -> bool:
    """`after` adds nothing to `before` but closing: the same text fields, the same calls with arguments grown
    by closing punctuation only, and maybe calls the closers completed (their text was in the output)."""
    if (after.content, after.reasoning_content) != (before.content, before.reasoning_content):
        return False
    if len(after.tool_calls) < len(before.tool_calls):
        return False
    for a, b in zip(after.tool_calls, before.tool_calls):
        if a.name != b.name or not a.arguments.startswith(b.arguments):
            return False
        if a.arguments[len(b.arguments):].strip(_WS + '"}],'):
            return False
    return True


def close_json(text: str) -> str:
    """`text`, a JSON value cut off by the end of the output, closed: the open string, then the open arrays
    and objects; a member cut before its value is dropped. Valid JSON text stays as it is."""
    if not text.strip(_WS):
        return "{}"
    try:
        json.loads(text)
        return text
    except ValueError:
        pass
    stack: list[str] = []
    in_string = escaped = False
    last_safe = 0  # a position after which the text may be cut and closed (after a complete member or item)
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
    candidates = []
    head = text[:-1] if escaped else text
    candidates.append(head + ('"' if in_string else "") + "".join(reversed(stack)))
    cut = text[:last_safe].rstrip(_WS + ",")
    depth: list[str] = []
    in_string = escaped = False
    for ch in cut:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth.append("}" if ch == "{" else "]")
        elif ch in "}]" and depth:
            depth.pop()
    candidates.append(cut + "".join(reversed(depth)))
    for c in candidates:
        try:
            json.loads(c)
            return c
        except ValueError:
            continue
    return "{}"


# --- the default parse ----------------------------------------------------------------------------------------

def repair_diagnostics(result: ParseResult, offset: int, complete: bool = False) -> list[Diagnostic]:
    """The repairs the lenient grammar made: one per `repair:<kind>` node of the parse (one the text ends
    inside only if the output is `complete` and the node holds more than whitespace: while more may come, it
    may turn out otherwise, and a complete output ending inside a repair that holds some text keeps it)."""
    out = []
    for node in result.ast.walk(result.nodes):
        if node.tag.startswith(REPAIR) and (not node.is_partial or (complete and node.text.strip(_WS))):
            kind = node.tag[len(REPAIR):]
            pos = max(0, node.start - offset)
            out.append(Diagnostic(kind, pos, _MESSAGES.get(kind, kind + " at {pos}").format(raw=node.text, pos=pos),
                                  node.text))
    return out


def drop_repeated_start(msg: ChatMessage, marker: str, output: str, is_partial: bool) -> ChatMessage:
    """Reasoning that begins with its own start marker: the model wrote the marker the prompt had opened. The
    marker goes (a diagnostic keeps it); while the reasoning could still become the marker, nothing shows."""
    reasoning = msg.reasoning_content
    if not marker or not reasoning:
        return msg
    start = _lead_end(reasoning)
    if reasoning.startswith(marker, start):
        pos = output.find(marker)
        diag = Diagnostic("repeated_reasoning_start", max(pos, 0),
                          _MESSAGES["repeated_reasoning_start"].format(raw=marker, pos=max(pos, 0)), marker)
        return replace(msg, reasoning_content=reasoning[start + len(marker):],
                       diagnostics=(*msg.diagnostics, diag))
    if is_partial and may_become_marker(reasoning, marker):
        return replace(msg, reasoning_content="")
    return msg


def may_become_marker(reasoning: str, marker: str) -> bool:
    """Whether `reasoning` (its leading whitespace aside) is a strict prefix of `marker`: while more may come,
    it may still turn out to be the repeated marker."""
    start = _lead_end(reasoning)
    return len(reasoning) - start < len(marker) and marker.startswith(reasoning[start:])


_NOT_WS = re.compile(r"[^ \t\n\v\f\r]")


def _lead_end(text: str) -> int:
    """Where the leading whitespace of `text` ends (without copying the text)."""
    m = _NOT_WS.search(text)
    return m.start() if m else len(text)


def _closed_calls(msg: ChatMessage, position: int) -> ChatMessage:
    """Every call's arguments valid JSON (a complete output may end inside them)."""
    calls, diags = [], list(msg.diagnostics)
    for call in msg.tool_calls:
        args = close_json(call.arguments)
        if args != call.arguments:
            diags.append(Diagnostic("truncated_arguments", position,
                                    f"arguments of {call.name!r} cut off at {position}: closed as {args!r}",
                                    call.arguments))
        calls.append(ToolCall(call.name, args, call.id))
    return replace(msg, tool_calls=tuple(calls), diagnostics=tuple(diags))


def _head(lenient: Arena, effective: str, offset: int, fmt: ChatFormat, output_len: int,
          is_partial: bool) -> tuple[ChatMessage, ParseResult]:
    """The message of a viable text (its parse does not fail): complete at the end if the output is complete."""
    if is_partial:
        result = _parse(lenient, effective)
        return map_result(result, fmt), result
    result, added = _complete_at_end(lenient, effective, fmt)
    msg = map_result(result, fmt)
    diags = list(msg.diagnostics)
    if added:
        pos = len(effective) - offset
        diags.append(Diagnostic("missing_closer", pos, f"missing {added!r} at {pos}: closed at end of output", ""))
    msg = replace(msg, diagnostics=tuple(diags))
    return _closed_calls(msg, output_len), result


def viable_prefix(lenient: Arena, effective: str, offset: int) -> int:
    """The length of the longest prefix of `effective` (at least `offset`) the parser can continue."""
    lo, hi = offset, len(effective)  # effective[:lo] is viable (or lo == offset), effective[:hi] is not
    if _parse(lenient, effective[:lo]).fail:
        return offset
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _parse(lenient, effective[:mid]).fail:
            hi = mid
        else:
            lo = mid
    return lo


def _before_cut_marker(result: ParseResult, cut: int) -> int:
    """Where a marker the text ends in the start of begins (`[TH` of `[THINK]`): a marker cut off is no
    marker, its text goes on as content; `cut` when the text ends in none."""
    starts = [pos for kind, _pid, pos in result.observed if kind == OBS_LITERAL and pos < len(result.text)]
    return min(starts, default=cut)


_UNREADABLE_CALL = REPAIR + "unreadable_call"


def _before_open_call(arena: Arena, result: ParseResult, cut: int) -> int:
    """Where the call the parse of a text is still inside began, its opener included (the call's text goes on
    as content); `cut` when the parse is inside no call."""
    triggers = {name for name, rid in arena.rules.items()
                if isinstance(arena.parsers[rid], N.Rule) and arena.parsers[rid].trigger}  # type: ignore[union-attr]
    open_call = None
    last_closed_end = 0
    for node in result.ast.walk(result.nodes):
        if node.tag in (TOOL, _UNREADABLE_CALL):  # (one the lenient parser skips is a call too)
            if node.is_partial:
                open_call = node
                break
            last_closed_end = node.end
    if open_call is None:
        return cut
    # The opener before the call's body (`<tool_call>\n` before `{`) is the start of the call section rule.
    start = open_call.start
    for node in result.ast.walk(result.nodes):
        if node.rule in triggers and node.is_partial and last_closed_end <= node.start < start \
                and node.end >= open_call.start:
            start = node.start
    return start


# Special tokens (`<|call|>`, `<|tool_response>`, `</s>`): after a complete parse, markup the format ends with,
# not text of the model's to keep.
_SPECIAL_TOKEN = r"<[|｜][^<>\n]{0,40}>|<[^<>\s]{1,40}[|｜]>|</s>|<eos>|<end_of_turn>"
SPECIAL_TOKEN = re.compile(_SPECIAL_TOKEN)


_TRAILING_SPECIAL = re.compile(rf"(?:\s|{_SPECIAL_TOKEN})*\Z")
_CUT_SPECIAL = re.compile(r"<[^<>\s]{0,40}\Z")  # `<|tool_resp` while the output may still complete it


def _without_trailing_special(text: str, is_partial: bool) -> str:
    """`text` without the special tokens it ends with (the end-of-turn markup of the format), nor, while more
    may come, a special token still being written."""
    if is_partial:
        text = _CUT_SPECIAL.sub("", text)
    return text[:_TRAILING_SPECIAL.search(text).start()]  # type: ignore[union-attr]


def rest_after(msg: ChatMessage, result: ParseResult, output: str, offset: int,
               is_partial: bool = False) -> ChatMessage:
    """A parse that succeeded before the end of the text: the rest of the output is content (the strict
    parse ignores it), but for the special tokens it ends with."""
    if not result.success:
        return msg
    position = result.end - offset
    return with_unparsed(msg, output[position:], position, is_partial, kind="trailing_text")


def _reading(arena: Arena, effective: str, offset: int) -> ParseResult:
    """The parse of a complete output: as llama.cpp parses it (as a prefix: a parse running out of text is
    accepted as far as it got), unless read as complete it is whole and holds calls the prefix reading cannot
    show (a call after reasoning that never ends is the start of the calls, not a draft still being written)."""
    result = _parse(arena, effective)
    if result.success or result.fail:
        return result
    complete = _parse(arena, effective, complete=True)
    if complete.success and _read_whole(complete, effective[offset:], offset) \
            and len(_call_positions(complete, offset)) > len(_call_positions(result, offset)) \
            and not any(n.tag == CONTENT and n.start < offset for n in complete.ast.walk(complete.nodes)):
        return complete  # (and no content read from the generation prompt)
    return result


def _read_whole(result: ParseResult, output: str, offset: int, msg: ChatMessage | None = None) -> bool:
    """Whether a parse read the whole output as llama.cpp reads it: to its end (but for the special tokens it
    ends with: a format without an end anchor succeeds on a prefix, and what follows may be a call the
    relaxations can read), or running out of text before any call (open content or reasoning); and mapped
    all it read (the C++ reads a call's arguments as any JSON value but maps only an object: a string gives
    `{}`, which `msg`, the parse's message if known, shows without walking the tree)."""
    if result.fail:
        return False
    open_call = result.need_more_input
    if open_call:
        if result.end < offset + len(output):
            return False  # waiting in a lookahead short of the end
    elif _without_trailing_special(output[result.end - offset:], False):
        return False
    # (over every node made: one of a branch that failed only sends the output to the lenient reading)
    nodes = result.ast.nodes
    if open_call and any(n.tag.startswith(TOOL) for n in nodes):  # (every tool tag: some formats have no TOOL)
        return False  # the output ends inside or after a call: closers may be missing
    if msg is None or any(c.arguments == "{}" for c in msg.tool_calls):
        return not any(n.tag == TOOL_ARGS and n.text.lstrip(_WS).startswith('"') for n in nodes)
    return True


def recover(strict: Arena, rec: Recovery, output: str, generation_prompt: str, fmt: ChatFormat, *,
            is_partial: bool = False, skips: int = 0) -> ChatMessage:
    """The default parse of `output` (see the module docstring)."""
    effective = generation_prompt + output
    offset = len(generation_prompt)
    strict_result, strict_whole = None, False
    if not is_partial:
        strict_result = _parse(strict, effective)
        msg = map_result(strict_result, fmt) if not strict_result.fail else ChatMessage()
        strict_whole = _read_whole(strict_result, output, offset, msg)
        if strict_whole and not rec.triggered(msg):
            return finish(msg, strict_result, rec, output, offset, is_partial, recovered=False, relaxed=False)
    lenient = _parse(rec.lenient, effective) if is_partial else _reading(rec.lenient, effective, offset)
    if strict_result is not None and strict_result.success and lenient.success \
            and lenient.end < strict_result.end:
        lenient = strict_result  # the relaxations read less of the output than the strict parse
    if lenient.success or (is_partial and not lenient.fail):
        shown = without_open_calls(lenient) if is_partial else lenient
        msg = finish(map_result(shown, fmt), shown, rec, output, offset, is_partial, recovered=not strict_whole)
        return rest_after(msg, lenient, output, offset, is_partial)
    if not lenient.fail:  # a complete output ending inside a structure
        msg, ended = _head(rec.lenient, effective, offset, fmt, len(output), is_partial)
        if ended.success or ended.end >= len(effective):  # (not stuck in a lookahead short of the end)
            return finish(msg, ended, rec, output, offset, is_partial)
    if strict_result is not None and strict_result.success:
        # the relaxations found nothing to repair: the strict reading stands
        msg = finish(map_result(strict_result, fmt), strict_result, rec, output, offset, is_partial,
                     recovered=False, relaxed=False)
        return rest_after(msg, strict_result, output, offset)
    readable, cut = split_unparsed(rec, effective, offset, fmt)
    return after_unparsed(strict, rec, output, generation_prompt, fmt, readable, cut, is_partial)


# How many unreadable calls one output may skip (each skip parses the rest again).
_MAX_SKIPS = 8


def after_unparsed(strict: Arena, rec: Recovery, output: str, generation_prompt: str, fmt: ChatFormat,
                   readable: ChatMessage, cut: int, is_partial: bool, skips: int = 0) -> ChatMessage:
    """The message of an output the parse cannot read from `cut` on, `readable` being that of the part before:
    the text from `cut` up to the next call marker is content (a diagnostic says so) and the reading resumes
    there, as if that text were not there; without a later marker, all the rest is content."""
    resume = min((at for m in rec.call_markers if (at := output.find(m, cut + 1)) > cut), default=-1)
    if resume < 0 or skips >= _MAX_SKIPS:
        return with_unparsed(readable, output[cut:], cut, is_partial, rec.call_markers)
    skipped = output[cut:resume]
    rest = recover(strict, rec, output[:cut] + output[resume:], generation_prompt, fmt, is_partial=is_partial,
                   skips=skips + 1)
    if not (rest.content.startswith(readable.content)
            and rest.tool_calls[:len(readable.tool_calls)] == readable.tool_calls):
        return with_unparsed(readable, output[cut:], cut, is_partial, rec.call_markers)
    shift = len(skipped)
    diags = [_moved(d, shift) if d.position >= cut else d for d in rest.diagnostics]
    diags.append(Diagnostic("unparsed_text", cut, _MESSAGES["unparsed_text"].format(raw=skipped, pos=cut), skipped))
    return replace(rest, content=readable.content + skipped + rest.content[len(readable.content):],
                   diagnostics=tuple(sorted(diags, key=lambda d: d.position)))


def _moved(d: Diagnostic, shift: int) -> Diagnostic:
    """`d` `shift` characters later in the output: its position, and the message that says it."""
    pos = d.position + shift
    if d.kind in _MESSAGES:
        return replace(d, position=pos, message=_MESSAGES[d.kind].format(raw=d.raw, pos=pos))
    # (the others name a tool, or what was added, before ` at {pos}`: never output text)
    return replace(d, position=pos, message=re.sub(rf" at {d.position}(?![0-9])", f" at {pos}", d.message, count=1))


def split_unparsed(rec: Recovery, effective: str, offset: int, fmt: ChatFormat) -> tuple[ChatMessage, int]:
    """For a text the lenient parser rejects: the message of the part it can read (the longest prefix it can
    continue, cut back to before a call it cannot complete, read as complete), and where in the output the
    rest begins."""
    viable = viable_prefix(rec.lenient, effective, offset)
    cut = offset
    if viable > offset:
        prefix = _parse(rec.lenient, effective[:viable])
        cut = min(_before_open_call(rec.lenient, prefix, viable), _before_cut_marker(prefix, viable))
    cut = max(cut, offset)
    msg, ended = _head(rec.lenient, effective[:cut], offset, fmt, cut - offset, False)
    if not ended.fail and ended.end < cut:
        cut = ended.end  # the head's parse ends (or waits, in a lookahead) before the cut: the rest is unparsed
    return finish(msg, ended, rec, effective[offset:cut], offset, False), cut - offset


def with_unparsed(head: ChatMessage, tail: str, position: int, is_partial: bool = False,
                  markers: Iterable[str] = (), kind: str = "unparsed_text") -> ChatMessage:
    """`head` with the output text from `position` on (`tail`) kept as content, and a diagnostic saying so;
    special tokens at its end are markup, not text. While more may come, a call marker the tail may end in the
    start of waits (the reading may resume at it)."""
    tail = _without_trailing_special(tail, is_partial)
    if is_partial:
        tail = tail[:len(tail) - max((n for m in markers for n in range(1, len(m)) if tail.endswith(m[:n])),
                                     default=0)]
    if not tail:
        return head
    diag = Diagnostic(kind, position, _MESSAGES[kind].format(raw=tail, pos=position), tail)
    return replace(head, content=head.content + tail, diagnostics=(*head.diagnostics, diag))


def finish(msg: ChatMessage, result: ParseResult, rec: Recovery, output: str, offset: int,
           is_partial: bool, *, recovered: bool = True, relaxed: bool = True) -> ChatMessage:
    """The repairs the grammar made, as diagnostics (a `relaxed` result, of the lenient parser: the strict one
    has no relaxations), and the repeated reasoning start dropped; a `recovered` message's calls also checked
    against the request's tools (the strict reading is the C++'s, left as is)."""
    diags = repair_diagnostics(result, offset, not is_partial) if relaxed else []
    if diags:
        msg = replace(msg, diagnostics=(*diags, *msg.diagnostics))
    if (recovered or diags) and not is_partial and msg.tool_calls:
        msg = checked_calls(msg, rec.tools, _call_positions(result, offset))
    msg = drop_repeated_start(msg, rec.reasoning_start, output, is_partial)
    if len(msg.diagnostics) < 2:
        return msg
    return replace(msg, diagnostics=tuple(sorted(msg.diagnostics, key=lambda d: d.position)))


def _call_positions(result: ParseResult, offset: int) -> list[int]:
    """Where each call of the message begins in the output (calls are published once their name is read)."""
    ast = result.ast
    return [max(0, n.start - offset) for n in ast.walk(result.nodes)
            if n.tag == TOOL and any(d.tag == TOOL_NAME for d in ast.walk(n.children))]


_PY_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list), "null": lambda v: v is None,
}


def _fits(value: object, types: frozenset[str]) -> bool:
    return any(_PY_TYPES[t](value) for t in types if t in _PY_TYPES)


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


# --- no text lost ---------------------------------------------------------------------------------------------

# The tags whose text goes into a message field; what else a parse consumes is markup.
_FIELDS = (CONTENT, REASONING, TOOL_NAME, TOOL_ID, TOOL_ARGS, TOOL_ARG_NAME, TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE)


def markup_spans(arena: Arena, generation_prompt: str, output: str,
                 fmt: ChatFormat = ChatFormat.PEG_NATIVE) -> list[tuple[int, int]]:
    """The spans of `output` the parser reads as markup: consumed by its parse (of the longest prefix it can
    read, with the closers it waits for at the end) but inside no node whose text goes into a message field."""
    effective = generation_prompt + output
    offset = len(generation_prompt)
    result = _reading(arena, effective, offset)
    if result.fail:
        result = _parse(arena, effective[:viable_prefix(arena, effective, offset)])
    elif not result.success:
        result = _complete_at_end(arena, effective, fmt)[0]
    ast = result.ast

    def innermost(node: AstNode) -> bool:  # tagged arguments' tool-args node holds their markup too
        return not any(d.tag in _FIELDS for d in ast.walk(node.children))

    fields = sorted((n.start, n.end) for n in ast.walk(result.nodes) if n.tag in _FIELDS and innermost(n))
    spans, pos = [], max(result.start, offset)
    for start, end in fields:
        if start > pos:
            spans.append((pos, start))
        pos = max(pos, end)
    end = min(result.end, len(effective))  # (not the closers the completion added)
    if end > pos:
        spans.append((pos, end))
    return [(a - offset, b - offset) for a, b in spans if b > offset]


_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")


def _words(text: str) -> list[str]:
    """The words of a text, JSON escapes read as separators (`\\n` is no `n`)."""
    return re.findall(r"\w+", _ESCAPE.sub(" ", text))


_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}


def unaccounted(output: str, message: ChatMessage, markup: Iterable[tuple[int, int]]) -> Counter[str]:
    """The words of `output` (runs of letters, digits, underscores) found neither in a field of `message`
    (content, reasoning, a call's name, arguments or id), nor in markup (`markup_spans`) or a special token, nor
    in a diagnostic's raw text: empty when no text was lost. Counted with their multiplicity."""
    chars = list(output)
    for start, end in markup:
        chars[max(start, 0):end] = " " * (min(end, len(chars)) - max(start, 0))
    rest = SPECIAL_TOKEN.sub(" ", "".join(chars))
    texts = [message.content, message.reasoning_content, *(d.raw for d in message.diagnostics)]
    for call in message.tool_calls:
        texts += [call.name, call.arguments, call.id]
    # Each word is looked for inside the fields' text and used up there: a marker between two words of a field
    # (`assistant<|content|>The`) joins them in the field, and that is no loss.
    have = "\x00".join(_ESCAPE.sub(" ", t) for t in texts)
    lost: Counter[str] = Counter()
    for word in _words(rest):
        whole = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", have)
        if whole is None and word in _PYTHON_LITERALS:  # a python-style call's value, as its JSON literal
            word = _PYTHON_LITERALS[word]
            whole = re.search(rf"(?<!\w){word}(?!\w)", have)
        at = whole.start() if whole else have.find(word)
        if at < 0:
            lost[word] += 1
        else:
            have = have[:at] + "\x00" * len(word) + have[at + len(word):]
    return lost
