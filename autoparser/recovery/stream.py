"""The default stream: llama.cpp's stream (chat/stream.py), reading the output as the default parse does.

`RecoveringStream` is a `StreamParser` over the relaxed parser that differs through the strict stream's hooks:
a call still open is not shown (a call is shown whole or not at all: one found malformed later goes to
content, and what a stream sent cannot be taken back); a repeated reasoning start is dropped, and held back
while the reasoning could still become one; a reasoning block the content holds waits until it closes (then it
is reasoning) or the output ends (then a start marker nothing closed is content); where the relaxed parser
rejects the output, the part it reads stays and the rest is content, or read again from the next call marker
(re-read at every chunk, which only malformed outputs pay); the final message is the default parse's (`Reader.read`), the same for any chunking.
"""

from __future__ import annotations

from collections.abc import Callable

from autoparser.chat.growth import FieldGrowth, held_tail, map_growing_accounted
from autoparser.chat.mapper import map_accounted, without_open_calls
from autoparser.chat.stream import StreamParser
from autoparser.chat.tags import TOOL
from autoparser.errors import ParseError
from autoparser.peg import ParseResult
from autoparser.peg.ast import AstId
from autoparser.recovery.checks import (
    drop_repeated_start,
    may_become_marker,
    repair_diagnostics,
    without_restarted_calls,
    without_revisable_calls,
)
from autoparser.recovery.coverage import Reading, covered_by, guaranteed
from autoparser.recovery.reading import Reader, pending_space_held
from autoparser.types import ChatMessage, MessageDelta

__all__ = ["RecoveringStream"]


class RecoveringStream(StreamParser):
    """Output chunks to deltas, as the default parse reads the output (see the module docstring)."""

    def __init__(self, reader: Reader, *, gen_tool_call_id: Callable[[], str] | None = None) -> None:
        super().__init__(reader.plan.relaxed, generation_prompt=reader.generation_prompt, format=reader.format,
                         gen_tool_call_id=gen_tool_call_id)
        self._reader = reader
        self._tail: int | None = None  # where, in the output, the text the relaxed parser rejects begins
        self._head: Reading | None = None  # the reading of the output before it
        self._last: ParseResult | None = None  # the parse the last mapped message came from (its repairs)

    @property
    def message(self) -> ChatMessage:
        """The message so far, with the repairs made so far."""
        message = super().message
        if not self._finished and self._tail is None and self._last is not None:
            repairs = repair_diagnostics(self._last, self._offset)
            if repairs:
                return ChatMessage(message.role, message.content, message.reasoning_content, message.tool_calls,
                                   (*repairs, *message.diagnostics))
        return message

    def feed(self, chunk: str | bytes) -> list[MessageDelta]:
        if self._tail is None:
            return super().feed(chunk)
        # past the text the relaxed parser rejects: the whole output read again
        piece = self._decoded(chunk)
        if not piece:
            self.last_deltas = []
            return self.last_deltas
        self._parts.append(piece)
        return self._publish(self._unparsed(), settled=True)

    def _unparsed(self) -> ChatMessage:
        assert self._head is not None and self._tail is not None
        reading = self._reader.after_unparsed(self.text, self._head, self._tail, True, 0)
        return guaranteed(reading, self.text, True)

    def _parsed(self, result: ParseResult) -> list[MessageDelta] | None:
        if result.fail:
            # From here on the output is the part the parser reads and, after it, content.
            self._head, self._tail = self._reader.split_unparsed(self._text())
            return self._publish(self._unparsed(), settled=True)
        end = result.end - self._offset
        if result.success and end < len(self.text):
            # The format ended before the text: the rest is content (parsed from the start while it grows).
            message = self._mapped(result, None)[0]  # (which accounts for the text before `end`)
            reading = self._reader.rest_after(Reading(message, ((0, end),), result, self._offset), result,
                                              self.text, True)
            return self._publish(guaranteed(reading, self.text, True), settled=True)
        return None

    def _mapped(self, result: ParseResult, spine: tuple[AstId, ...] | None) -> tuple[ChatMessage,
                                                                                     FieldGrowth | None]:
        self._last = result
        shown = without_open_calls(result)
        growth: FieldGrowth | None
        if shown is not result:
            # while the open nodes are inside a call not shown, the message stays as it is
            inside = spine is not None and any(result.ast.nodes[i].tag == TOOL for i in spine)
            message, dropped = map_accounted(shown, self._fmt)
            growth = FieldGrowth("") if inside else None
        elif spine is None:
            (message, dropped), growth = map_accounted(result, self._fmt), None
        else:
            message, growth, dropped = map_growing_accounted(result, spine, self._fmt)
        if message.tool_calls:  # (as the partial parse reads them: `with_repairs`)
            repairs = repair_diagnostics(shown, self._offset)
            if len(message.tool_calls) > 1:
                message = without_restarted_calls(message, repairs, shown, self._offset)
            held = without_revisable_calls(message, repairs, shown, self._offset)
            if held is not message:  # (what shows of the calls depends on what follows)
                message, growth = held, None
        if dropped:  # text a closed structure dropped is content, where it stands, as the whole parse has it
            # (what follows the parse is not this reading's: it waits, or is the rest `_parsed` keeps)
            rest = (result.end - self._offset, len(self.text))
            covered = (*covered_by(shown, self._offset, dropped, True), rest)
            message = guaranteed(Reading(message, covered, shown, self._offset), self.text, True)
            growth = None
        marker = self._reader.plan.reasoning_start
        if marker and message.reasoning_content:
            if growth is not None and growth.field == "reasoning_content" \
                    and may_become_marker(message.reasoning_content, marker):
                growth = None  # what shows depends on whether the marker completes
            message = drop_repeated_start(message, marker, self.text, True)
        if growth is not None and growth.plain:  # (the whitespace `_publish` holds back waits for what follows)
            text = message.content if growth.field == "content" else message.reasoning_content
            growth = FieldGrowth(growth.field, trailing_space=text[len(text) - held_tail(text):], hold_space=True)
        late = self._reader.with_late_reasoning(message, self.text, True)
        if late is not message:
            return late, None  # (what shows depends on whether the block closes)
        plan = self._reader.plan
        if growth is not None and growth.field == "content" and plan.reasoning_end:
            growth.stop_marker = plan.reasoning_start  # (where a reasoning block may begin)
        return message, growth

    def _publish(self, new: ChatMessage, *, settled: bool = False) -> list[MessageDelta]:
        # while more may come, the whitespace the text ends with waits (as the default parse of a partial output
        # holds it back: `pending_space_held`)
        if not self._finished:
            new = pending_space_held(self._reader.with_late_reasoning(new, self.text, True))
        sent, published = self._message, self._published
        if not self._finished and _shrinks(sent, new):
            return self._wait(new, sent, published)
        try:
            deltas = super()._publish(new, settled=settled)
        except ParseError:  # (the strict stream's refusal of a reading that is no append)
            return self._wait(new, sent, published)
        if self._finished and new.empty():
            self._message = new  # (an empty message sends nothing, but its diagnostics are the parse's)
        return deltas

    def _wait(self, new: ChatMessage, sent: ChatMessage, published: bool) -> list[MessageDelta]:
        """A reading that takes back what was sent (a gap of the recovery's, which tests report): the stream
        never raises on an output; it waits (what was `sent` stands), and its final message is the parse's."""
        self.last_deltas = []
        self._message, self._published = (new, True) if self._finished else (sent, published)
        return self.last_deltas

    def _settled(self, message: ChatMessage) -> ChatMessage:
        return drop_repeated_start(message, self._reader.plan.reasoning_start, self.text, True)

    def _final(self) -> ChatMessage:
        return self._reader.read(self.text)


def _shrinks(sent: ChatMessage, new: ChatMessage) -> bool:
    """Whether `new` holds less of a text field than `sent` (a message's text only grows in a stream)."""
    if new.empty():
        return False  # (an empty message sends nothing and replaces nothing)
    if len(new.content) < len(sent.content) or len(new.reasoning_content) < len(sent.reasoning_content):
        return True
    return any(len(b.arguments) < len(a.arguments) for a, b in zip(sent.tool_calls, new.tool_calls))
