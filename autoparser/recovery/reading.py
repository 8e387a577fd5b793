"""The default parse: llama.cpp's message wherever its parse reads the output whole, else what the model meant,
each repair a diagnostic.

llama.cpp answers any output its parser rejects with "Failed to parse input". `Reader.read` gives the same
message wherever the strict parse is well-formed, and otherwise reads on, in order:

1. The strict parser (the C++'s) reads the whole output and its message's text holds none of the texts the
   relaxed parser reads as markup (`RecoveryPlan.triggered`): its message stands.
2. The relaxed parser (the format's build on the relaxed builder: recovery/relax.py) accepts it: its message,
   its `repair:<kind>` nodes read as diagnostics.
3. The output ends inside a structure (a call whose closers are missing, arguments cut off): the closers the
   parse waits for are supplied, else the arguments are closed as JSON (recovery/completion.py).
4. Text the parser cannot place: the output up to the longest prefix the relaxed parser can still continue
   (cut back to before a call it cannot complete) is read as in 3; the rest is content, or, from the next
   call marker on, read again.

Every step makes a `Reading`: the message and the spans of the output it accounts for. Where a complete
output's reading does not account for a text, recovery/coverage.py puts it into the content with a
diagnostic: no text is lost, and no exception escapes for a complete output. A stream (recovery/stream.py)
reaches the same message.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from autoparser.chat.growth import held_tail
from autoparser.chat.mapper import map_accounted, without_open_calls
from autoparser.chat.tags import CONTENT, REASONING, TOOL, TOOL_ARGS, TOOL_CLOSE, TOOL_OPEN
from autoparser.chat.tools import Parameter
from autoparser.peg import Arena, ParseResult
from autoparser.peg import nodes as N
from autoparser.peg.engine import OBS_LITERAL, OBS_UNTIL_CUT
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery.checks import (
    begun_marker,
    call_positions,
    diagnostic,
    drop_repeated_start,
    enumerated_parameters,
    mistyped,
    moved,
    with_late_reasoning,
    with_repairs,
)
from autoparser.recovery.completion import closed_as_complete, closed_calls, complete_at_end, parse_text, viable_prefix
from autoparser.recovery.coverage import (
    SPECIAL_TOKEN,
    Reading,
    Span,
    covered_by,
    empty_sections,
    guaranteed,
    holes_in,
    kept_in_reasoning,
    skipped_by,
    special_tail,
    unread_cut_call,
    without_trailing_special,
)
from autoparser.recovery.plan import END_SPACE, REPAIR, RecoveryPlan
from autoparser.types import ChatFormat, ChatMessage, Diagnostic

__all__ = ["Reader", "pending_space_held", "with_unparsed"]


# How many unreadable calls one output may skip (each skip parses the rest again).
_MAX_SKIPS = 8

_UNREADABLE_CALL = REPAIR + "unreadable_call"

# The diagnostics of text a reading cannot place.
_UNREAD = frozenset({"unparsed_text", "unparsed_reasoning", "trailing_text"})


class StrictParse(NamedTuple):
    """Step 1 of the default parse: the strict parse of a complete output and its message."""

    result: ParseResult
    message: ChatMessage
    """The mapped message (where it stands, the model's repeat of the reasoning start the prompt opened
    dropped)."""
    dropped: list[Span]
    """What the mapping left out of the message (`map_accounted`)."""
    whole: bool
    """The parse read the whole output as llama.cpp reads it (`Reader._read_whole`)."""
    stands: bool
    """Its message is the default parse's: read whole, and no text of it the relaxed parser reads as markup."""

    @property
    def reads_all(self) -> bool:
        """It stands and accounts for every character of the output (read to its end, nothing dropped), so
        the guarantee has nothing to check: the common case, made without building a `Reading`."""
        result = self.result
        return self.stands and result.end == len(result.text) and not holes_in(result, self.dropped)


@dataclass(frozen=True)
class Reader:
    """The default parse of one request's outputs: what every step of it shares."""

    strict: Arena
    """llama.cpp's parser."""
    plan: RecoveryPlan
    generation_prompt: str
    """Prepended to the output: the parsers are built to read it first."""
    format: ChatFormat

    @functools.cached_property
    def offset(self) -> int:
        """Where the output begins in the text the parsers read."""
        return len(self.generation_prompt)

    def read(self, output: str, *, partial: bool = False) -> ChatMessage:
        """The message of `output` (see the module docstring), which accounts for all its text (of a `partial`
        one, for all it has decided, whitespace at the end of its text held back: `pending_space_held`)."""
        if partial:
            return pending_space_held(self.with_late_reasoning(guaranteed(self.reading(output, True), output, True),
                                                               output, True))
        strict = self.strict_parse(output)
        if strict.reads_all:
            # (the accepted path: llama.cpp's message, and nothing left to account for)
            return self.completed(strict.message, output)
        msg = self.with_reasoning_opened(self.completed(guaranteed(self.reading(output, strict=strict), output),
                                                        output), output)
        # (a recovered message's calls are closed where their JSON is cut, whichever reading made them; the
        # strict reading's are llama.cpp's)
        if msg.diagnostics and any(not _json(c.arguments) for c in msg.tool_calls):
            return closed_calls(msg, len(output), closers_only=True)
        return msg

    def completed(self, msg: ChatMessage, output: str) -> ChatMessage:
        """What a complete output's message is once it is known to end there (a stream's, at its end only)."""
        plan = self.plan  # (on every accepted parse: the readings only where they may apply)
        if plan.reasoning_requested:
            msg = self.with_reasoning_before_end(msg, output)
        msg = self.with_late_reasoning(msg, output, False)
        if plan.turn_end and output[-1:] in _TOKEN_ENDS:
            msg = self.without_turn_end(msg, output)
        return msg

    def with_reasoning_before_end(self, msg: ChatMessage, output: str) -> ChatMessage:
        """`msg`, where the output begins with text and the reasoning end marker with no reasoning open and its
        start not before it (`reasoning</think>answer`), with that text as reasoning (`missing_reasoning_start`), as
        vLLM, SGLang and Ollama read it; not where the generation prompt closed a reasoning block (thinking off).
        (Only in a complete output: while more may come, text without the end marker is content, and a stream
        shows it so: it waits where the marker comes.)"""
        start, end = self.plan.reasoning_start, self.plan.reasoning_end
        content = msg.content
        if not end or msg.reasoning_content or end not in output or not start or start in output[:output.find(end)] \
                or end in self.generation_prompt:  # (a prompt that closed the reasoning turned thinking off)
            return msg
        if end in content:
            at = content.find(end)
            before, after = content[:at], content[at + len(end):]
        else:  # the parse read the marker as markup (a format that drops a stray end marker)
            text = output[:output.find(end)].strip(C_SPACE)
            at = len(content) - len(content.lstrip(C_SPACE)) + len(text)
            before, after = content[:at], content[at:]
            if not content.lstrip(C_SPACE).startswith(text) or not (after.strip(C_SPACE) or msg.tool_calls):
                return msg  # (nothing after it: the marker ends the message, as such formats end one)
        if not before.strip(C_SPACE) or not output.lstrip(C_SPACE).startswith(before.lstrip(C_SPACE)):
            return msg  # (the marker does not end the text the output begins with)
        pos = output.find(end, len(before) - len(before.lstrip(C_SPACE)))
        diags = [*msg.diagnostics, diagnostic("missing_reasoning_start", pos, end)]
        cursor = pos + len(end)
        while after.lstrip(C_SPACE).startswith(end):  # (the end marker written again: dropped, as after a start)
            cursor = output.find(end, cursor)
            diags.append(diagnostic("stray_reasoning_end", cursor, end))
            after, cursor = after.lstrip(C_SPACE)[len(end):], cursor + len(end)
        return replace(msg, reasoning_content=before, content=after,
                       diagnostics=tuple(sorted(diags, key=lambda d: d.position)))

    def with_late_reasoning(self, msg: ChatMessage, output: str, partial: bool) -> ChatMessage:
        """`msg` with the reasoning blocks its content holds read as reasoning (checks.with_late_reasoning)."""
        plan = self.plan
        return with_late_reasoning(msg, plan.reasoning_start, plan.reasoning_end, output, partial)

    def with_reasoning_opened(self, msg: ChatMessage, output: str) -> ChatMessage:
        """`msg`, where it holds reasoning without its start (`missing_reasoning_start`) and text it cannot read
        after it, as the output reads with the reasoning start before it, where that reading reads it all and
        the same reasoning: a format whose every message has a header reads what follows the end marker only
        after a start (gpt-oss: `reasoning<|end|><|start|>assistant<|channel|>final<|message|>answer`)."""
        start = self.plan.reasoning_start
        kinds = {d.kind for d in msg.diagnostics}
        if not start or "missing_reasoning_start" not in kinds or not kinds & _UNREAD:
            return msg
        again = self.read(start + output)
        if any(d.kind in _UNREAD for d in again.diagnostics) \
                or again.reasoning_content.strip(C_SPACE) != msg.reasoning_content.strip(C_SPACE):
            return msg
        shift = len(start)
        diags = [moved(d, -shift) for d in again.diagnostics if d.position >= shift]
        diags.extend(d for d in msg.diagnostics if d.kind == "missing_reasoning_start")
        return replace(again, diagnostics=tuple(sorted(diags, key=lambda d: d.position)))

    def without_turn_end(self, msg: ChatMessage, output: str) -> ChatMessage:
        """`msg` without the end-of-turn tokens the output ends with (`plan.turn_end`: `answer<|im_end|>`, where a
        server did not stop on them), where its content or its reasoning runs up to them: formatting, as they
        are after the format's end. (The strict parse keeps them, as llama.cpp does.)"""
        tail = special_tail(output, False)
        if not tail or any(t not in self.plan.turn_end for t in SPECIAL_TOKEN.findall(tail)):
            return msg
        if msg.content.endswith(tail):
            return replace(msg, content=msg.content[:-len(tail)])
        if not msg.content and msg.reasoning_content.endswith(tail):
            return replace(msg, reasoning_content=msg.reasoning_content[:-len(tail)])
        return msg

    def strict_parse(self, output: str) -> StrictParse:
        """Step 1: the strict parse of a complete output, and whether its message stands."""
        result = parse_text(self.strict, self.generation_prompt + output)
        if result.fail:
            return StrictParse(result, ChatMessage(), [], False, False)
        msg, dropped = map_accounted(result, self.format)
        # (a value llama.cpp's mapper writes into the arguments unchecked may leave them no JSON: not read whole)
        whole = self._read_whole(result, output, msg) and all(_json(c.arguments) for c in msg.tool_calls) \
            and not mistyped(msg, self._enumerated)
        skipped = [*skipped_by(result, self.strict, self.offset), *self._unopened(result, self.strict, msg)]
        if self._cut_markers(result, self.strict):
            whole = False
        if not whole or skipped or self.plan.triggered(msg) or self.plan.drops_text(output):
            # (a text the parse stepped over, or a block it dropped, reached no field: the relaxed parser may
            # read it)
            return StrictParse(result, msg, dropped + skipped, whole, False)
        msg = drop_repeated_start(msg, self.plan.reasoning_start, output, False)
        return StrictParse(result, msg, dropped, True, True)

    def reading(self, output: str, partial: bool = False, skips: int = 0, *,
                strict: StrictParse | None = None) -> Reading:
        """The steps of the default parse (see the module docstring); `strict`: step 1's, if made already."""
        effective, offset, plan = self.generation_prompt + output, self.offset, self.plan
        if not partial:
            strict = strict or self.strict_parse(output)
            if strict.stands:
                return self.reading_of(strict.message, strict.result, strict.dropped, partial, self.strict)
        strict_whole = strict is not None and strict.whole
        relaxed = parse_text(plan.relaxed, effective) if partial else self.complete_parse(effective)
        if strict is not None and strict.result.success and relaxed.success and relaxed.end < strict.result.end \
                and not strict.dropped and not self.plan.triggered(strict.message):
            # the relaxations read less of the output than the strict parse (losing none), which holds no text
            # they read as markup
            relaxed = strict.result
        if relaxed.success or (partial and not relaxed.fail):
            shown = without_open_calls(relaxed) if partial else relaxed
            msg, dropped = map_accounted(shown, self.format)
            msg = with_repairs(msg, shown, plan, output, offset, partial, recovered=not strict_whole)
            return self.rest_after(self.reading_of(msg, shown, dropped, partial, plan.relaxed), relaxed, output, partial,
                                   skips)
        if not relaxed.fail:  # a complete output ending inside a structure
            head, ended = self._head(effective, len(output), partial)
            before_last = (self._before_last_call(effective, len(effective)) or self._before_marker_cut_off(effective)) \
                if not partial and not head.message.tool_calls and self._waits_in_draft(relaxed, effective) else None
            if before_last is not None:  # (the rest, from the last call's opener or the cut marker on, is read after it)
                first, first_ended, cut = before_last
                first = replace(first, message=with_repairs(first.message, first_ended, plan, effective[offset:cut],
                                                            offset, False))
                return self.after_unparsed(output, first, cut - offset, partial, skips)
            # (not stuck in a lookahead short of the end, and no value run over the markup that ends its call:
            # that value's closer was left out, the output was not cut off; it is text where it cannot be read)
            if (ended.success or ended.end >= len(effective)) and not self._over_call_closers(head.message):
                return replace(head, message=with_repairs(head.message, ended, plan, output, offset, partial))
        if strict is not None and strict.result.success and not strict.dropped:
            # the relaxations found nothing to repair: the strict reading stands (where it drops no text)
            msg = with_repairs(strict.message, strict.result, plan, output, offset, partial, recovered=False,
                               relaxed=False)
            return self.rest_after(self.reading_of(msg, strict.result, [], partial, self.strict), strict.result,
                                   output, skips=skips)
        head, cut = self.split_unparsed(effective)
        return self.after_unparsed(output, head, cut, partial, skips)

    def reading_of(self, msg: ChatMessage, result: ParseResult, dropped: list[Span], partial: bool,
                   arena: Arena) -> Reading:
        """The reading of a message mapped from `result`, the parse of `arena` (the mapping having `dropped`
        these spans; what the parse stepped over is not accounted for either: `skipped_by`)."""
        dropped = [*dropped, *skipped_by(result, arena, self.offset, partial)]
        cut = self._cut_markers(result, arena) if not partial else []
        if not partial:
            dropped += [*cut, *self._unopened(result, arena, msg)]
        return Reading(msg, tuple(covered_by(result, self.offset, dropped, partial)), result, self.offset,
                       cut_markers=tuple(a - self.offset for a, _b in cut))

    def _over_call_closers(self, msg: ChatMessage) -> bool:
        """Whether the last call of a completed output holds a text that ends a call or a call section."""
        if not msg.tool_calls:
            return False
        arguments = msg.tool_calls[-1].arguments
        return any(m in arguments for m in self._call_closer_texts)

    @functools.cached_property
    def _call_closer_texts(self) -> tuple[str, ...]:
        # (as a JSON string holds it: `"` and `\` escaped, a newline too)
        texts = (c.strip(C_SPACE) for c in self.plan.call_closers)
        return tuple(dict.fromkeys(json.dumps(t, ensure_ascii=False)[1:-1] for t in texts if t.strip('"}],')))

    @functools.cached_property
    def _call_markers(self) -> tuple[str, ...]:
        return tuple(m for m in (m.strip(C_SPACE) for m in self.plan.call_markers) if m)

    def _unopened(self, result: ParseResult, arena: Arena, msg: ChatMessage) -> list[Span]:
        """The call markup of a parse of a complete output (`msg` its message) that opened no call: the markers
        of a call the end cut off before its name, and, in a message without calls, sections that hold nothing
        read. (A message with calls, or an output that writes no call marker, needs no walk of the parse: its
        markup opened its calls, and a section between them that holds none is read as text already, the reading
        resuming at the next call: `split_unparsed`.)"""
        markers, text = self._call_markers, result.text
        if not any(text.find(m, self.offset) >= 0 for m in markers):
            return []
        empty = empty_sections(result, arena, self.offset) if not msg.tool_calls else []
        return [*empty, *unread_cut_call(result, markers, self.offset)]

    @functools.cached_property
    def _enumerated(self) -> dict[str, list[Parameter]]:
        """The request's tools that have parameters whose strings their schema enumerates (`mistyped`)."""
        return enumerated_parameters(self.plan.tools)

    def _cut_markers(self, result: ParseResult, arena: Arena) -> list[Span]:
        """Where a parse of a complete output stopped at the start of a marker the end cut off that would open a
        call or reasoning (`hello <tool`, `...</tool_call>\n<tool`): the generation stopped there and wrote no
        marker, so that text is the model's own (a closer cut off, `</tool_ca`, closes what it began)."""
        if not result.need_more_input:
            return []
        text = result.text
        openers = {m.strip(C_SPACE) for m in (*self.plan.call_markers, self.plan.reasoning_start)} - {""}
        out = []
        for kind, pid, pos in result.observed:
            node = arena.parsers[pid] if pid >= 0 else None
            cut = text[pos:]
            if isinstance(node, N.Until) and kind == OBS_UNTIL_CUT:
                markers = [d.strip(C_SPACE) for d in node.delimiters if d.startswith(cut)]
            elif isinstance(node, N.Literal) and kind == OBS_LITERAL:
                markers = [node.literal.strip(C_SPACE)]
            else:
                continue
            if cut.strip(C_SPACE) and any(m in openers for m in markers):
                out.append((pos, len(text)))
            elif cut.strip(C_SPACE) and (begins := _header_begins(text, pos, self.plan.headers)) is not None:
                out.append((begins, len(text)))  # (a message header cut off, `to=user<|mess`: from where it begins)
        return out

    def _read_whole(self, result: ParseResult, output: str, msg: ChatMessage | None = None) -> bool:
        """Whether a parse read the whole output as llama.cpp reads it: to its end (but for the special tokens
        it ends with: a format without an end anchor succeeds on a prefix, and what follows may be a call the
        relaxations can read), or running out of text before any call (open content or reasoning); and
        mapped all it read (the C++ reads a call's arguments as any JSON value but maps only an object: a
        string gives `{}`, which `msg`, the parse's message if known, shows without walking the tree)."""
        if result.fail:
            return False
        open_call = result.need_more_input
        if open_call:
            if result.end < self.offset + len(output):
                return False  # waiting in a lookahead short of the end
        elif result.end < len(result.text) and without_trailing_special(output[result.end - self.offset:], False):
            return False
        # (over every node made: one of a branch that failed only sends the output to the relaxed reading)
        nodes = result.ast.nodes
        if open_call and any(n.tag.startswith(TOOL) for n in nodes):  # (every tool tag: some formats have no TOOL)
            return False  # the output ends inside or after a call: closers may be missing
        if msg is None or (msg.tool_calls and any(c.arguments == "{}" for c in msg.tool_calls)):
            return not any(n.tag == TOOL_ARGS and n.text.lstrip(C_SPACE).startswith('"') for n in nodes)
        return True

    def complete_parse(self, effective: str) -> ParseResult:
        """The relaxed parse of a complete output: as llama.cpp parses (as a prefix: a parse running out of text
        is accepted as far as it got), unless read as complete it is whole and holds calls the prefix reading
        cannot show (a call after reasoning that never ends is the start of the calls, not a draft still being
        written)."""
        relaxed, offset = self.plan.relaxed, self.offset
        result = parse_text(relaxed, effective)
        if result.success or result.fail:
            return result
        complete, read = parse_text(relaxed, effective, partial=False), effective
        if complete.fail and complete.end > offset:
            # (text after the calls the complete reading cannot hold: read as complete up to it, the rest is
            # trailing text, as after calls the prefix reading shows)
            read = effective[:complete.end]
            complete = parse_text(relaxed, read, partial=False)
        if complete.success and self._read_whole(complete, read[offset:]) \
                and len(call_positions(complete, offset)) > len(call_positions(result, offset)) \
                and not any(n.tag == CONTENT and n.start < offset for n in complete.ast.walk(complete.nodes)):
            # (and no content read from the generation prompt; but where text after its calls is a call whose
            # closers the output leaves out, the head's completion appends them: `_head`)
            if not _text_after_calls(complete):
                return complete
            closed = closed_as_complete(relaxed, self.plan.closers, effective, self.format)
            if closed is None or len(call_positions(closed[0], offset)) <= len(call_positions(complete, offset)):
                return complete
        return result

    def _head(self, effective: str, output_len: int, partial: bool) -> tuple[Reading, ParseResult]:
        """The reading of a viable text (its parse does not fail), completed at the end if it is complete."""
        relaxed = self.plan.relaxed
        if partial:
            result = parse_text(relaxed, effective)
            msg, dropped = map_accounted(result, self.format)
            return self.reading_of(msg, result, dropped, partial, relaxed), result
        result, added = complete_at_end(relaxed, self.plan.closers, effective, self.format)
        msg, dropped = map_accounted(result, self.format)
        # (a parse that stops before them read no closer appended; one whose call has no name, nothing they closed
        # reached the message: the closers close calls and values only)
        if added and result.end > len(effective) and msg.tool_calls:
            pos = len(effective) - self.offset
            msg = replace(msg, diagnostics=(*msg.diagnostics, Diagnostic(
                "missing_closer", pos, f"missing {added!r} at {pos}: closed at end of output", "")))
        return self.reading_of(closed_calls(msg, output_len), result, dropped, partial, relaxed), result

    def split_unparsed(self, effective: str) -> tuple[Reading, int]:
        """For a text the relaxed parser rejects: the reading of the part it can read (the longest prefix it can
        continue, cut back to before a call it cannot complete, read as complete), and where in the output the
        rest begins."""
        relaxed, offset = self.plan.relaxed, self.offset
        viable = viable_prefix(relaxed, effective, offset)
        cut = offset
        if viable > offset:
            prefix = parse_text(relaxed, effective[:viable])
            cut = min(_before_open_call(relaxed, prefix, viable), _before_cut_marker(prefix, viable),
                      _before_end_space(prefix, viable))
            if offset < cut < viable:
                # (a marker the part before the call begins, `[` of `[THINK]` before `<tool_call>`: the text after
                # it, not the output's end, cuts it, so it is no marker and goes on as text)
                cut = _before_cut_marker(parse_text(relaxed, effective[:cut]), cut)
        cut = self._before_dangling_marker(effective, max(cut, offset))
        head, ended = self._head(effective[:cut], cut - offset, False)
        if not ended.fail and ended.end < cut:
            cut = ended.end  # the head's parse ends (or waits, in a lookahead) before the cut: the rest is unparsed
        msg = with_repairs(head.message, ended, self.plan, effective[offset:cut], offset, False)
        return replace(head, message=msg, covered=tuple((a, min(b, cut - offset)) for a, b in head.covered
                                                        if a < cut - offset)), cut - offset

    def _waits_in_draft(self, result: ParseResult, effective: str) -> bool:
        """Whether a prefix reading waits on a draft call: what it read last is reasoning a call marker follows,
        and nothing after it (`_draft_call` holds the call back, a stream too, until the reasoning's end marker
        comes)."""
        last = None
        for node in result.ast.walk(result.nodes):
            if node.tag and (last is None or node.end >= last.end):  # (the innermost of those ending last)
                last = node
        return last is not None and last.tag == REASONING \
            and any(effective.startswith(m, last.end) for m in self._call_markers)

    def _before_last_call(self, effective: str, cut: int) -> tuple[Reading, ParseResult, int] | None:
        """The reading of the text before the last call opener ahead of `cut`, where it reads calls (with its
        parse, and where it ends). A complete output whose prefix reading waits on a draft call
        (`_waits_in_draft`) that the output's end cuts off reads none, however many whole calls precede the cut
        one: the calls before it are read so, and the cut one goes on as text."""
        last = max((effective.rfind(m, self.offset, cut) for m in self._call_markers), default=-1)
        if last <= self.offset:
            return None
        head, ended = self._head(effective[:last], last - self.offset, False)
        return (head, ended, last) if head.message.tool_calls and not ended.fail else None

    def _before_marker_cut_off(self, effective: str) -> tuple[Reading, ParseResult, int] | None:
        """The reading of the text before a marker the output's end cuts off (`...</arg_value><arg_k`), where it
        reads calls (with its parse, and where the marker begins): a complete output whose prefix reading waits on
        a draft call reads none, though the call before the cut marker is whole but for its closers."""
        at = _marker_begins(effective, self._markers, self.offset, len(effective) - 1)
        if at is None:
            return None
        head, ended = self._head(effective[:at], at - self.offset, False)
        return (head, ended, at) if head.message.tool_calls and not ended.fail else None

    @functools.cached_property
    def _markers(self) -> frozenset[str]:
        """The relaxed parser's markers longer than one character (what an output's end may cut off)."""
        return frozenset(m for node in self.plan.relaxed.parsers if isinstance(node, N.Literal)
                         and len(m := node.literal.strip(C_SPACE)) > 1)

    def _before_dangling_marker(self, effective: str, cut: int) -> int:
        """`cut` (in the text the parsers read), or, where the text before it ends with a call marker (whitespace
        after it aside), where that marker begins: the marker opened the call the parse cannot read from `cut` on
        (`<tool_call>nope<tool_sep>`, a tool the request does not declare), and goes with it."""
        before = effective[self.offset:cut].rstrip(C_SPACE)
        starts = [len(before) - len(m) for m in self._call_markers if before.endswith(m)]
        return self.offset + min(starts) if starts else cut

    def after_unparsed(self, output: str, head: Reading, cut: int, partial: bool, skips: int) -> Reading:
        """The reading of an output the parse cannot read from `cut` on, `head` being that of the part before:
        the text from `cut` up to the next call marker is content (a diagnostic says so) and the reading
        resumes there, as if that text were not there; without a later marker, all the rest is content."""
        resume = min((at for m in self.plan.call_markers if (at := output.find(m, cut + 1)) > cut), default=-1)
        if resume < 0 or skips >= _MAX_SKIPS:
            return self._with_unparsed(head, output, cut, partial)
        skipped, before = output[cut:resume], head.message
        rest = self.reading(output[:cut] + output[resume:], partial, skips + 1)
        after = rest.message
        if not (after.content.startswith(before.content)
                and after.tool_calls[:len(before.tool_calls)] == before.tool_calls):
            return self._with_unparsed(head, output, cut, partial)
        shift, kept = len(skipped), len(before.content)
        diags = [moved(d, shift) if d.position >= cut else d for d in after.diagnostics]
        diags.append(diagnostic("unparsed_text", cut, skipped))
        message = replace(after, content=before.content + skipped + after.content[kept:],
                          diagnostics=tuple(sorted(diags, key=lambda d: d.position)))

        def back(pos: int) -> int:  # a position in the output without the skipped text, in the output
            return pos if pos < cut else pos + shift

        covered = [(cut, resume)]
        for a, b in rest.covered:
            covered.extend([(a, min(b, cut)), (resume, back(b))] if a < cut < b else [(back(a), back(b))])
        ends = [(back(pos), n if n <= kept else n + shift) for pos, n in rest.content_ends()]
        ends.append((resume, kept + shift))
        return Reading(message, tuple(covered), ends=tuple(sorted(ends)))

    def _with_unparsed(self, head: Reading, output: str, position: int, partial: bool,
                       kind: str = "unparsed_text") -> Reading:
        """`head` with the output from `position` on kept as content (`with_unparsed`), and accounted for."""
        msg = with_unparsed(head.message, output[position:], position, partial, self.plan.call_markers, kind,
                            head.open_reasoning_at(position))
        added = len(msg.content) - len(head.message.content)
        return replace(head, message=msg, covered=(*head.covered, (position, len(output))),
                       ends=(*head.ends, (len(output), len(msg.content))) if added else head.ends)

    def rest_after(self, reading: Reading, result: ParseResult, output: str, partial: bool = False,
                   skips: int = 0) -> Reading:
        """A parse that succeeded before the end of the text: the rest of the output is content (the strict
        parse ignores it), but for the special tokens it ends with, and for calls after the text: where a call
        marker follows, the reading resumes there (`after_unparsed`), as models write text between calls."""
        if not result.success:
            return reading
        end = result.end - self.offset
        again = self._closer_again(output, end)
        if again:  # (markup, not text: said by a diagnostic)
            at = end + len(output[end:]) - len(output[end:].lstrip(C_SPACE))
            msg = reading.message
            reading = replace(reading, message=replace(msg, diagnostics=(
                *msg.diagnostics, diagnostic("repeated_closer", at, again))), covered=(*reading.covered,
                                                                                     (end, at + len(again))))
            end = at + len(again)
        split = self.split_at_unread_call(output, end, len(reading.message.tool_calls))
        if split is not None:  # (and the reading resumes at a later call)
            return self.after_unparsed(output, *split, partial, skips)
        if self._calls_from(output, end + 1):
            return self.after_unparsed(output, reading, end, partial, skips)
        return self._with_unparsed(reading, output, end, partial, "trailing_text")

    def split_at_unread_call(self, output: str, end: int, calls: int) -> tuple[Reading, int] | None:
        """Where a parse that read `calls` calls stopped at `end` before a call it cannot read to its end (a
        format without an end anchor succeeds short of it): the reading of what of it can be read, as where the
        parse fails, and where in the output the rest begins (`split_unparsed`); None where no such call follows
        or nothing more of it can be read."""
        if not self._calls_from(output, end):
            return None
        head, cut = self.split_unparsed(self.generation_prompt + output)
        return (head, cut) if cut > end and len(head.message.tool_calls) > calls else None

    def _calls_from(self, output: str, end: int) -> bool:
        """Whether a call marker begins at or after `end` in the output."""
        return any(output.find(m, end) >= end for m in self.plan.call_markers)

    def _closer_again(self, output: str, end: int) -> str:
        """The closer the format's reading ended with, written again right after it (`<tool_call|><tool_call|>`),
        or ""."""
        before, after = output[:end].rstrip(C_SPACE), output[end:].lstrip(C_SPACE)
        closers = sorted({c.strip(C_SPACE) for c in self.plan.closers} - {""}, key=len, reverse=True)
        return next((c for c in closers if before.endswith(c) and after.startswith(c)), "")


# What an output ending with a special token (and whitespace) ends with.
_TOKEN_ENDS = frozenset(">" + C_SPACE)


def _json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def pending_space_held(msg: ChatMessage) -> ChatMessage:
    """A partial output's message without the whitespace its content and reasoning end with: a marker that
    follows may take it (`</think>\n\n`), and a stream cannot take back what it sent; nor the special tokens
    they end with (or one still being written), which are formatting if the output ends there
    (`Reader.without_turn_end`): `held_tail`. It shows once text follows it, or the output is complete."""
    content = msg.content[:len(msg.content) - held_tail(msg.content)]
    reasoning = msg.reasoning_content[:len(msg.reasoning_content) - held_tail(msg.reasoning_content)]
    if len(content) == len(msg.content) and len(reasoning) == len(msg.reasoning_content):
        return msg
    return replace(msg, content=content, reasoning_content=reasoning)


def with_unparsed(head: ChatMessage, tail: str, position: int, partial: bool = False,
                  markers: tuple[str, ...] = (), kind: str = "unparsed_text",
                  open_reasoning: int | None = None) -> ChatMessage:
    """`head` with the output text from `position` on (`tail`) kept as content, and a diagnostic saying so;
    special tokens at its end are markup, not text. While more may come (`partial`), a call marker the tail
    may end in the start of waits (the reading may resume at it). Where the tail follows reasoning still open
    (`open_reasoning`: the length of the reasoning before it, `Reading.open_reasoning_at`), it stands inside
    the reasoning and is kept there where it is the beginning of a call marker the output's end cuts (`10<｜`:
    no marker, its text stays where it stands; `unparsed_reasoning`). Other text there is content (a call where
    reasoning is open ends the reasoning, `reasoning_ended_by_call`, as does a call the request does not allow)."""
    tail = without_trailing_special(tail, partial)
    if partial:
        tail = tail[:len(tail) - begun_marker(tail, markers)]
    if not tail:
        return head
    if open_reasoning is not None and kind == "unparsed_text" and begun_marker(tail, markers) == len(tail):
        return kept_in_reasoning(head, open_reasoning, tail, position)
    return replace(head, content=head.content + tail, diagnostics=(*head.diagnostics,
                                                                   diagnostic(kind, position, tail)))


def _header_begins(text: str, pos: int, headers: Sequence[str]) -> int | None:
    """Where the message header `text` ends in the start of begins, at `pos` (past the whitespace there) or before,
    the whitespace before it included (a header's marker cut off by the end: ` to=us`, ` to=user<|mess`, `<|channel|>fin`), or None."""
    begins = _marker_begins(text, headers, 0, len(text) - len(text[pos:].lstrip(C_SPACE)))
    return None if begins is None else len(text[:begins].rstrip(C_SPACE))


def _marker_begins(text: str, markers: Iterable[str], lo: int, hi: int) -> int | None:
    """The first place from `lo` to `hi` where a marker that `text` ends with begins, whole or cut off by the end
    (`text` from there is a prefix of one of `markers`), or None."""
    begins = [start for m in markers for start in range(max(lo, len(text) - len(m)), hi + 1) if m.startswith(text[start:])]
    return min(begins, default=None)


def _before_end_space(prefix: ParseResult, viable: int) -> int:
    """Where whitespace the parse of a prefix read as the output's end begins (`END_SPACE`): text follows it,
    so it belongs to that text (`viable` if there is none)."""
    for node in prefix.ast.walk(prefix.nodes):
        if node.tag == END_SPACE and node.end >= viable and node.start < node.end:
            return node.start
    return viable


def _before_cut_marker(result: ParseResult, cut: int) -> int:
    """Where a marker the text ends in the start of begins (`[TH` of `[THINK]`): a marker cut off is no
    marker, its text goes on as content; `cut` when the text ends in none."""
    starts = [pos for kind, _pid, pos in result.observed if kind == OBS_LITERAL and pos < len(result.text)]
    return min(starts, default=cut)


def _text_after_calls(result: ParseResult) -> bool:
    """Whether a parse reads text after the last of its calls (there, closers an output leaves out may make a
    call of it)."""
    ends = [n.end for n in result.ast.walk(result.nodes) if n.tag in (TOOL, TOOL_ARGS, TOOL_CLOSE)]
    return bool(ends) and bool(result.text[max(ends):].strip(C_SPACE))


def _before_open_call(arena: Arena, result: ParseResult, cut: int) -> int:
    """Where the call the parse of a text is still inside began, its opener included (the call's text goes on
    as content), or the call section it is inside where it has read no call there yet; `cut` when the parse is
    inside neither, or inside a call read whole but for its closer."""
    triggers = {name for name, rid in arena.rules.items()
                if isinstance(arena.parsers[rid], N.Rule) and arena.parsers[rid].trigger}  # type: ignore[union-attr]
    open_call = None
    last_closed_end = 0
    nodes = list(result.ast.walk(result.nodes))
    for node in nodes:
        if node.tag in (TOOL, _UNREADABLE_CALL):  # (one the relaxed parser skips is a call too)
            if node.is_partial:
                open_call = node
                break
            last_closed_end = node.end
        elif node.tag == TOOL_CLOSE and not node.is_partial:
            last_closed_end = max(last_closed_end, node.end)
    if open_call is None:
        # (a format without a node for the whole call: one is open while its opener or its arguments are, from
        # its opener on; or, before any of its nodes, while the call section after the last call is)
        inside = next((n for n in nodes if n.tag in (TOOL_OPEN, TOOL_ARGS) and n.is_partial), None)
        if inside is None:
            if any(n.tag in (TOOL_OPEN, TOOL_ARGS) and n.start >= last_closed_end for n in nodes):
                return cut  # (a call read whole but for its closer: the completion closes it)
            sections = [n.start for n in nodes if n.rule in triggers and n.is_partial and n.start >= last_closed_end]
            return min(sections, default=cut)
        opens = [n.start for n in nodes if n.tag == TOOL_OPEN and last_closed_end <= n.start <= inside.start]
        call_start = opens[-1] if opens else inside.start
    else:
        call_start = open_call.start
    # The opener before the call's body (`<tool_call>\n` before `{`) is the start of the call section rule; a
    # section around it that the trigger rule does not begin (Kimi K2's `<|tool_calls_section_begin|>` before
    # `<|tool_call_begin|>`) is a rule holding the open call that begins after the text before it.
    text_end = max((n.end for n in nodes if n.tag in (CONTENT, REASONING) and n.end <= call_start), default=0)
    start = call_start
    for node in nodes:
        if node.is_partial and last_closed_end <= node.start < start and node.end >= call_start \
                and (node.rule in triggers or (node.rule and node.start >= text_end)):
            start = node.start
    return start
