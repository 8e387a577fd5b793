"""No text lost, at run time: every character of a complete output is accounted for where the default parse
returns, or it becomes content with a diagnostic.

A character is accounted for when it lies in markup the parser consumed (a marker, a closer, the whitespace
between), in a field node whose text reached the message (content, reasoning, a call's name, id or
arguments), or in a text the recovery itself keeps (text after the format ends, text it cannot read: both
content with a diagnostic). What is not (a call the mapper dropped for want of a name, arguments that are no
object, a name or a draft an `atomic` had not finished where the output ends, the text a scan to the first
call stepped over: `skipped_by`, markup that opened no call: `empty_sections`, `unread_cut_call`) is put into the
content where it stands in the output, with an `unparsed_text` diagnostic. Whitespace and the special tokens an
output ends with are formatting, not text. The spans come from the parse the message was mapped from, its
mapping and its end-of-input records: the check costs little where the parse read the output whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from autoparser.chat.growth import run_at_end
from autoparser.chat.tags import CONTENT, FIELD_TAGS, NAME_TAGS, REASONING, SCAN_TO_CALLS, TOOL, TOOL_OPEN
from autoparser.peg import Arena, ParseResult
from autoparser.peg import nodes as N
from autoparser.peg.engine import OBS_DROPPED
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.checks import diagnostic
from autoparser.types import ChatMessage

__all__ = ["SPECIAL_TOKEN", "Reading", "Span", "content_ends", "covered_by", "empty_sections", "guaranteed", "holes_in",
           "kept_in_reasoning", "merged", "skipped_by", "special_tail", "unread_cut_call", "without_trailing_special"]

Span = tuple[int, int]

# Special tokens (`<|call|>`, `<|tool_response>`, `</s>`): at the end of an output, markup the format ends with,
# not text of the model's to keep.
# (a token's name is word characters, `▁` and `.:/-`: `<|"|>` is Gemma 4's quote, `<|tool_respons. x>` text)
_SPECIAL_TOKEN = r"<[|｜][\w▁.:/-]{0,40}[|｜]?>|<[\w▁.:/-]{1,40}[|｜]>|</s>|<eos>|<end_of_turn>"
SPECIAL_TOKEN = re.compile(_SPECIAL_TOKEN)
_TRAILING_SPECIAL = re.compile(rf"(?:\s|{_SPECIAL_TOKEN})*\Z")
_LONGEST_SPECIAL = 48  # (no token of `_SPECIAL_TOKEN`, nor one being written, is longer)
_CUT_SPECIAL = re.compile(r"<[^<>\s]{0,40}\Z")  # `<|tool_resp` while the output may still complete it
_NOT_WS = re.compile(f"[^{C_SPACE}]")


def without_trailing_special(text: str, partial: bool) -> str:
    """`text` without the special tokens it ends with (the end-of-turn markup of the format), nor, while more
    may come (`partial`), a special token still being written."""
    if partial:  # (a token being written is at most `_LONGEST_SPECIAL` long: searched there only)
        being_written = _CUT_SPECIAL.search(text, max(0, len(text) - _LONGEST_SPECIAL))
        if being_written is not None:
            text = text[:being_written.start()]
    return text[:run_at_end(_TRAILING_SPECIAL, text, len(text), _LONGEST_SPECIAL)]


def special_tail(text: str, partial: bool) -> str:
    """The special tokens `text` ends with, from the first of them, with the whitespace between and after them
    (and, while more may come, a special token still being written); "" where it ends with none."""
    if not partial:  # (the common case without a search: the text does not end with a special token)
        stripped = text.rstrip(" \n\r\t")
        lt = stripped.rfind("<") if stripped.endswith(">") else -1
        if lt < 0 or not SPECIAL_TOKEN.fullmatch(stripped, lt):
            return ""
    tail = text[len(without_trailing_special(text, partial)):]
    first = tail.find("<")
    return tail[first:] if first >= 0 else ""


def content_ends(result: ParseResult, offset: int, tag: str = CONTENT) -> list[Span]:
    """Where each content node of a parse (or each node of another text field, `tag`) ends in the output, with
    the field's length up to there."""
    out, length = [], 0
    for node in result.ast.walk(result.nodes):
        if node.tag == tag:
            length += len(node.sanitized_text())
            out.append((node.end - offset, length))
    return out


@dataclass(frozen=True)
class Reading:
    """A message read from an output, with the spans of the output it accounts for, and where its content came
    from, so that text it does not account for can be put into the content where it stands in the output."""

    message: ChatMessage
    covered: tuple[Span, ...]
    result: ParseResult | None = None
    """The parse the message was mapped from (its content nodes say where the content came from)."""
    offset: int = 0
    """The length of the generation prompt `result` parsed before the output."""
    ends: tuple[Span, ...] = ()
    """Content beside the parse's (text kept after it, or all of it without a parse): where each piece ends
    in the output, and the length of the content up to there."""
    cut_markers: tuple[int, ...] = ()
    """Where an opener the output's end cuts off begins (`<tool_ca`): no marker, the model's own text."""

    def content_ends(self) -> list[Span]:
        """Where each piece of the content ends in the output, with the length of the content up to there."""
        own = content_ends(self.result, self.offset) if self.result is not None else []
        return [*own, *self.ends]

    def open_reasoning_at(self, position: int) -> int | None:
        """Where the reading's reasoning runs up to `position`, no closer after it (the reasoning still open),
        the length of the reasoning there; None where it does not."""
        if self.result is None or any(pos == position for pos, _n in self.content_ends()):
            return None
        return dict(content_ends(self.result, self.offset, REASONING)).get(position)


def holes_in(result: ParseResult, dropped: Iterable[Span] = (), partial: bool = False) -> list[Span]:
    """The spans (of the parsed text) a parse consumed but does not account for: those whose field text the
    mapping `dropped`, and, in a complete output (not `partial`), what an `atomic` running into the end of the
    text dropped (`OBS_DROPPED`)."""
    holes = list(dropped)
    if not partial and result.need_more_input:
        end = result.end
        holes.extend((pos, end) for kind, _pid, pos in result.observed if kind == OBS_DROPPED)
    return holes


@functools.lru_cache(maxsize=256)
def _markup_of(arena: Arena) -> re.Pattern[str]:
    """A run of a parser's markup: its literal texts (its markers), special tokens and whitespace."""
    texts = {node.literal.strip(C_SPACE) for node in arena.parsers
             if isinstance(node, N.Literal) and node.literal.strip(C_SPACE)}
    alternatives = [*map(re.escape, sorted(texts, key=len, reverse=True)), _SPECIAL_TOKEN, f"[{C_SPACE}]+"]
    return re.compile(f"(?:{'|'.join(alternatives)})*")


def skipped_by(result: ParseResult, arena: Arena, offset: int, partial: bool = False) -> list[Span]:
    """The texts (spans of the parsed text, from `offset` on) a parse of `arena` stepped over: what a rule that
    scans to the first call (`SCAN_TO_CALLS`) consumed, but whitespace around it, where it is more than markup
    (a stray end marker it steps over is markup). llama.cpp's Gemma 4 parser scans there where the text before
    the call fits no message (a thought never closed): its text reaches no field. A scan that reaches the end of
    the text is undecided while more may come (`partial`); in a complete output it stepped over all it read."""
    if result.fail or SCAN_TO_CALLS not in arena.rules:  # (the common case: a parser without such a scan)
        return []
    out, text = [], result.text
    for node in result.ast.walk(result.nodes):
        if node.rule != SCAN_TO_CALLS or node.end <= max(node.start, offset) or (partial and node.end >= len(text)):
            continue
        start, end = max(node.start, offset), node.end
        if _markup_of(arena).fullmatch(text, start, end):
            continue
        while text[start] in C_SPACE:
            start += 1
        while text[end - 1] in C_SPACE:
            end -= 1
        out.append((start, end))
    return out


@functools.lru_cache(maxsize=256)
def _section_rules(arena: Arena) -> frozenset[str]:
    """The names of a parser's rules that hold calls: those that wake a lazy grammar (`trigger_rule`)."""
    return frozenset(node.name for node in arena.parsers if isinstance(node, N.Rule) and node.trigger)


def empty_sections(result: ParseResult, arena: Arena, offset: int) -> list[Span]:
    """The call sections of a parse of a complete output that hold nothing read, neither a call nor text (spans
    of the parsed text, from `offset` on): `<|tools_prefix|>[` where the output ends, `<tool_call>` before a call
    it cannot read. Markup that opened no call is the model's text, not formatting. (A section whose text some
    field holds, a call it cannot read kept as content, shows its markup as a stream shows it: markup.)"""
    if result.fail:
        return []
    rules = _section_rules(arena)
    if not rules:
        return []
    sections: list[Span] = []
    read: list[int] = []
    for node in result.ast.walk(result.nodes):
        if node.tag in FIELD_TAGS:
            read.append(node.start)
        elif node.rule in rules and node.end > max(node.start, offset):
            sections.append((max(node.start, offset), node.end))
    return [(start, end) for start, end in sections if not any(start <= at < end for at in read)]


def unread_cut_call(result: ParseResult, markers: Sequence[str], offset: int) -> list[Span]:
    """Of a parse of a complete output that ran into its end inside a call whose name it had not read
    (`<tool_call>\n<function=ba`, the generation cut off), the text from the first of the call `markers`, or
    from that call's own start, after the last text it read into a field of the message (a span of the parsed
    text): that markup opened no call. (The name the end cut off is a hole already: `holes_in`. The fields of
    the call itself, an id or a draft of arguments, never reached the message: `{"tool_call_id": "0", "`.)"""
    if not result.need_more_input or result.fail:
        return []
    nodes = list(result.ast.walk(result.nodes))
    names = [n.start for n in nodes if n.tag in NAME_TAGS]
    unnamed = [n for n in nodes if n.tag in (TOOL, TOOL_OPEN) and n.is_partial
               and not any(n.start <= at < n.end for at in names)]
    text, start = result.text, offset
    for node in nodes:
        if node.tag in FIELD_TAGS and not any(call.start <= node.start < call.end for call in unnamed):
            start = max(start, node.end)
    at = min([*(i for m in markers if m and (i := text.find(m, start)) >= 0),
              *(call.start for call in unnamed if call.start >= start)], default=-1)
    return [(at, len(text))] if at >= 0 else []


def covered_by(result: ParseResult, offset: int, dropped: Iterable[Span] = (), partial: bool = False) -> list[Span]:
    """The spans of the output (`result` parsed generation prompt + output, the prompt `offset` long) the parse
    accounts for: all it consumed but its `holes_in` (what the mapping `dropped`, and in a complete output what
    an `atomic` running into the end of the text dropped: a name, a key or a draft it had not finished; a marker
    cut off by the end is markup)."""
    if result.fail:
        return []
    start, end = result.start, result.end
    holes = holes_in(result, dropped, partial)
    if not holes:  # (the common case: one span, made without sorting anything)
        return [(max(start, offset) - offset, end - offset)] if end > offset else []
    holes.sort()
    out = []
    for hole_start, hole_end in holes:
        if hole_start < end and hole_end > start:
            if hole_start > start:
                out.append((start, hole_start))
            start = max(start, hole_end)
    if end > start:
        out.append((start, end))
    return [(max(a, offset) - offset, b - offset) for a, b in out if b > offset]


def merged(spans: Iterable[Span]) -> list[Span]:
    """`spans` sorted, overlapping and touching ones joined."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _gaps(covered: Sequence[Span], length: int) -> list[Span]:
    if len(covered) == 1 and covered[0][0] <= 0 and covered[0][1] >= length:
        return []
    gaps, pos = [], 0
    for start, end in merged(covered):
        if start > pos:
            gaps.append((pos, min(start, length)))
        pos = max(pos, end)
    if pos < length:
        gaps.append((pos, length))
    return [(a, b) for a, b in gaps if b > a]


def guaranteed(reading: Reading, output: str, partial: bool = False) -> ChatMessage:
    """The message of a reading with every text it does not account for put into the content where it stands
    in the output (after the content read before it), each with an `unparsed_text` diagnostic (an opener the
    output's end cuts off where the reasoning is open, into the reasoning, `unparsed_reasoning`); whitespace and
    the special tokens the output ends with are formatting, not text. (Of a `partial` output, whose reading
    leaves open what more may complete, these are the texts its closed structure dropped.)"""
    msg = reading.message
    gaps = _gaps(reading.covered, len(output))
    if partial and gaps and gaps[-1][1] == len(output):
        gaps.pop()  # (where a partial parse stops short of the end, it waits for what follows: undecided)
    if not gaps:
        return msg  # (the common case: the parse read it all; nothing scans the text)
    tail = len(without_trailing_special(output, partial))
    lost = [(a, min(b, tail)) for a, b in gaps if a < tail]
    lost = [(a, b) for a, b in lost if _NOT_WS.search(output, a, b)]
    if not lost:
        return msg
    in_content = []
    for start, end in lost:
        if start in reading.cut_markers and (before := reading.open_reasoning_at(start)) is not None:
            # (an opener the end cuts off where the reasoning is open stands in the reasoning: `10<｜DSML｜fun`)
            msg = kept_in_reasoning(msg, before, output[start:end], start)
        else:
            in_content.append((start, end))
    content, diags, inserted = msg.content, list(msg.diagnostics), 0
    ends = reading.content_ends()
    for start, end in in_content:
        text = output[start:end]
        at = max((n for pos, n in ends if pos <= start), default=0) + inserted
        content = content[:at] + text + content[at:]
        inserted += len(text)
        # (one text kept as content says so once: where the reading kept the text right after it already)
        after = next((i for i, d in enumerate(diags) if d.kind == "unparsed_text" and d.position == end), None)
        if after is None:
            diags.append(diagnostic("unparsed_text", start, text))
        else:
            diags[after] = diagnostic("unparsed_text", start, text + diags[after].raw)
    return replace(msg, content=content, diagnostics=tuple(sorted(diags, key=lambda d: d.position)))


def kept_in_reasoning(msg: ChatMessage, before: int, text: str, position: int) -> ChatMessage:
    """`msg` with `text`, a text the reading does not account for at `position` in the output, inserted into the
    reasoning after its first `before` characters, where it stands (`unparsed_reasoning`)."""
    at, reasoning = min(before, len(msg.reasoning_content)), msg.reasoning_content
    return replace(msg, reasoning_content=reasoning[:at] + text + reasoning[at:], diagnostics=tuple(sorted(
        (*msg.diagnostics, diagnostic("unparsed_reasoning", position, text)), key=lambda d: d.position)))
