"""Streaming: the deltas between two successive parses of a growing output (`common_chat_msg_diff`).

A streaming server re-parses the whole output on every chunk and sends what changed. The parsers are built so
that every field only grows (`atomic` markers, scans that wait for more input); `compute_deltas` turns two messages into
OpenAI-style delta records and raises ParseError when that promise is broken. `apply_deltas` folds deltas back into a
message, as a client does (and as the C++ test harness checks).
"""

from __future__ import annotations

import dataclasses
from codecs import utf_8_decode
from collections.abc import Callable, Iterable

from autoparser.chat.growth import FieldGrowth, feeds_no_field, map_growing
from autoparser.chat.mapper import message_of, output_parser, parse_effective
from autoparser.errors import ParseError
from autoparser.peg import Arena, ParseResult
from autoparser.peg.ast import AstId
from autoparser.peg.resume import Resumption, Stops, ends_inside_marker, resumption
from autoparser.template.render import common_prefix_len
from autoparser.types import ChatFormat, ChatMessage, MessageDelta, ToolCall

__all__ = ["StreamParser", "apply_deltas", "compute_deltas", "set_tool_call_ids", "string_diff"]


def string_diff(last: str, current: str) -> str:
    """What `current` adds to `last`.

    A shrink to a prefix gives "" (the previous chunk ended on a partial stop word that is now erased);
    any other change is an error, since already-sent text cannot be taken back.
    """
    if not last:
        return current
    if current.startswith(last):
        return current[len(last):]
    if last.startswith(current):
        return ""
    raise ParseError(f"Invalid diff: '{last}' not found at start of '{current}'", text=current,
                     position=common_prefix_len(last, current))


def _calls_listing(calls: tuple[ToolCall, ...]) -> str:
    return "".join(f"    - name: '{tc.name}', args: '{tc.arguments}'\n" for tc in calls)


def compute_deltas(prev: ChatMessage, cur: ChatMessage) -> list[MessageDelta]:
    """Delta records turning `prev` into `cur`: reasoning, content, then tool calls (last one, then new ones)."""
    deltas: list[MessageDelta] = []
    if prev.reasoning_content != cur.reasoning_content:
        deltas.append(MessageDelta(reasoning_content_delta=string_diff(prev.reasoning_content,
                                                                       cur.reasoning_content)))
    if prev.content != cur.content:
        deltas.append(MessageDelta(content_delta=string_diff(prev.content, cur.content)))

    n_prev, n_cur = len(prev.tool_calls), len(cur.tool_calls)
    if n_cur < n_prev:
        raise ParseError("Invalid diff: now finding less tool calls!\n"
                         f"  Previous ({n_prev}):\n{_calls_listing(prev.tool_calls)}"
                         f"  Current ({n_cur}):\n{_calls_listing(cur.tool_calls)}"
                         f"  Current msg text content:\n{cur.content}\n")

    if prev.tool_calls:
        # Only the last call of the previous message can still be growing; earlier ones are final.
        idx = n_prev - 1
        pref, newf = prev.tool_calls[idx], cur.tool_calls[idx]
        if pref.name != newf.name and pref.name and newf.name and not newf.name.startswith(pref.name):
            raise ParseError(f"Invalid diff: tool call mismatch! (previous name '{pref.name}', now '{newf.name}')",
                             text=newf.name, position=common_prefix_len(pref.name, newf.name))
        args_delta = string_diff(pref.arguments, newf.arguments)
        changed = pref.id != newf.id or pref.name != newf.name
        if args_delta or changed:
            deltas.append(MessageDelta(tool_call_index=idx, tool_call_delta=ToolCall(
                name=newf.name if changed else "", arguments=args_delta, id=newf.id if changed else "")))
    for idx in range(n_prev, n_cur):
        deltas.append(MessageDelta(tool_call_index=idx, tool_call_delta=cur.tool_calls[idx]))
    return deltas


def apply_deltas(acc: ChatMessage, deltas: Iterable[MessageDelta]) -> ChatMessage:
    """Fold deltas into a message as a streaming client does: text appended, calls grown to the index,
    name and id replaced when the delta carries them, arguments appended."""
    reasoning = acc.reasoning_content
    content = acc.content
    calls = [tc.to_dict() for tc in acc.tool_calls]
    for d in deltas:
        reasoning += d.reasoning_content_delta
        content += d.content_delta
        if d.tool_call_index is not None:
            while len(calls) <= d.tool_call_index:
                calls.append({"name": "", "arguments": "", "id": ""})
            call = calls[d.tool_call_index]
            tc = d.tool_call_delta
            if tc.name:
                call["name"] = tc.name
            if tc.id:
                call["id"] = tc.id
            call["arguments"] += tc.arguments
    return ChatMessage(acc.role, content, reasoning,
                       tuple(ToolCall(c["name"], c["arguments"], c["id"]) for c in calls))


def set_tool_call_ids(msg: ChatMessage, ids_cache: list[str], gen_id: Callable[[], str]) -> ChatMessage:
    """Give every call a stable id: the first id seen at an index (the model's, or a generated one) sticks."""
    calls = list(msg.tool_calls)
    for i, tc in enumerate(calls):
        if len(ids_cache) <= i:
            ids_cache.append(tc.id or gen_id())
        if tc.id != ids_cache[i]:
            calls[i] = dataclasses.replace(tc, id=ids_cache[i])
    return dataclasses.replace(msg, tool_calls=tuple(calls))


# The fields whose growth is the piece itself, by the position of their text in MessageDelta (see feed)
_PLAIN = {"content": 1, "reasoning_content": 2}

# How much text may wait for the last resumable parse to extend over it (bounds the work of a retry).
_MAX_UNCHECKED = 64


class StreamParser:
    """Turns a stream of output chunks into deltas, as the llama.cpp server does, in time linear in the output.

    The deltas after every `feed` are exactly `compute_deltas` between the whole parses of the output before and
    after the chunk (what llama.cpp computes by re-parsing everything per token). Instead of re-parsing, a
    chunk that only lengthens the scan the last parse stopped in (reasoning or content text, a JSON string
    body) extends that parse (see peg/resume.py); when that scan feeds one message field through a
    text-local rule (content, reasoning, JSON arguments, a string argument value: `mapper.map_growing`), the
    chunk is appended to the field without even mapping the tree again (up to a JSON escape the chunk cuts,
    which waits for the next chunk). A marker starting (`<`) parses from the start; while the following chunks
    only lengthen it (`<tool_ca`), that parse is extended and mapped again; once it turns out to be no marker,
    the scan before it extends over it. Anything else (a marker completed, a number cut by the chunk boundary)
    parses from the start, as before.

    Byte chunks are decoded incrementally: a UTF-8 sequence cut by a chunk boundary waits for its continuation,
    and undecodable bytes reach the parser as surrogate escapes. With `gen_tool_call_id`, calls the model gave
    no id get a generated one, stable across chunks. An empty parse result leaves the previous message in
    place (nothing is sent). `finish` parses the whole output as complete and returns the final message; the
    deltas it produced are in `last_deltas`.

    This is llama.cpp's stream (its parse, errors and all). The default stream of `ChatParams.stream()` reads
    as the default parse does (recovery/stream.py); it differs through the hooks `_parsed`, `_mapped`,
    `_settled` and `_final`, and the parser it is given.
    """

    def __init__(self, parser: Arena | None = None, *, generation_prompt: str = "",
                 format: ChatFormat | str = ChatFormat.PEG_NATIVE,
                 gen_tool_call_id: Callable[[], str] | None = None) -> None:
        self._parser = output_parser(parser)
        self._offset = len(generation_prompt)
        self._fmt = ChatFormat.of(format)
        self._gen_id = gen_tool_call_id
        self._ids: list[str] = []
        # The bytes of a UTF-8 sequence cut by the end of the last chunk (what an incremental decoder holds;
        # utf_8_decode is called directly because the codecs wrapper costs more than the decoding itself)
        self._held = b""
        # The text (generation prompt + output) as pieces, joined only when a parse needs it: appending to
        # one growing str would copy it at every step.
        self._parts: list[str] = [generation_prompt]
        self._resume: Resumption | None = None
        # While the text ends inside a marker (`<tool_ca`): the resumption of the parse that ends there. It
        # lasts only as long as the marker; `_resume` waits behind it, in case the marker turns out to be none.
        self._marker: Resumption | None = None
        self._marker_static = False  # whether the marker's open nodes feed no message field
        # The last parse from the start, when it ended inside a marker: made a resumption only if the next
        # piece neither extends `_resume` (no marker after all) nor completes the marker (most do one or the other)
        self._marker_parse: ParseResult | None = None
        # Pieces fed since `_resume` last extended, while the parses of them were not resumable themselves
        # (typically: the text ended with the start of a marker). If the next piece shows it was no marker,
        # `_resume` extends over all of them at once, and no parse from the start is needed.
        self._unchecked: list[str] = []
        self._unchecked_len = 0
        # How the message grows while `_resume` extends (one field appended to), when that is known
        self._growth: FieldGrowth | None = None
        self._appended: list[str] = []  # direct appends not yet folded into the messages (folded on demand)
        self._published = False  # whether `_message` is the last mapped message (with ids)
        self._message = ChatMessage()
        # The message of `_resume`'s parse while `_unchecked` pieces were parsed from the start (and their
        # messages published); None when unknown (then extending over them maps the tree again)
        self._resume_message: ChatMessage | None = None
        # The common step's scan (Resumption.stops), while the last piece only grew one field of a published
        # message through `_resume`: a piece it finds nothing in does the same (see feed). `_fast_pieces`: how
        # many of the last `_parts` `_resume` has not been extended over yet.
        self._fast: Stops | None = None
        self._fast_plain = 0  # with `_fast`: 1 when the field is the content, 2 the reasoning, else 0
        self._fast_pieces = 0
        self._finished = False
        self.last_deltas: list[MessageDelta] = []
        self.full_parses = 0  # how often the output was parsed from the start (for benchmarks and tests)

    def _text(self) -> str:
        if self._fast_pieces:  # before the pieces are joined
            self._catch_up()
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0]

    @property
    def text(self) -> str:
        """The decoded output so far."""
        return self._text()[self._offset:]

    @property
    def message(self) -> ChatMessage:
        """The message so far (what the deltas sent so far add up to)."""
        self._fold()
        return self._message

    def _fold(self) -> None:
        if not self._appended:
            return
        extra = "".join(self._appended)
        self._appended = []
        assert self._growth is not None
        self._message = self._growth.grown(self._message, extra)

    def _decoded(self, chunk: str | bytes) -> str:
        """The text of a chunk (a UTF-8 sequence it ends inside of waits for the next one)."""
        if self._finished:
            raise ParseError("the stream is finished: feed() after finish()")
        if isinstance(chunk, str):
            return chunk
        if self._held:
            chunk = self._held + chunk
        piece, used = utf_8_decode(chunk, "surrogateescape", False)
        self._held = chunk[used:]
        return piece

    def feed(self, chunk: str | bytes) -> list[MessageDelta]:
        """Add a chunk of output; returns the deltas it causes (often one, possibly none)."""
        piece = self._decoded(chunk)
        if not piece:
            self.last_deltas = []
            return self.last_deltas
        fast = self._fast
        if fast is not None:
            growth = self._growth
            if fast(piece) is None and not (growth is not None and growth.stop_marker and growth.stopped_by(piece)):
                # The common step: `_resume` surely extends over the piece and only `_growth`'s field grows by
                # it, as in the branch below (`_resume` is extended over such pieces when next needed).
                self._parts.append(piece)
                self._fast_pieces += 1
                plain = self._fast_plain
                if plain:  # content or reasoning: the piece itself, the delta built here (the cost of a call)
                    self._appended.append(piece)
                    self.last_deltas = [MessageDelta("", piece) if plain == 1 else MessageDelta(piece)]
                    return self.last_deltas
                assert growth is not None  # set with `_fast`
                added = growth.added(piece)
                if added:
                    self._appended.append(added)
                    self.last_deltas = [growth.delta(added)]
                else:
                    self.last_deltas = []
                return self.last_deltas
            self._fast = None
            self._catch_up()
        self._parts.append(piece)
        marker = marker_parse = None
        if self._marker is not None or self._marker_parse is not None:
            marker, marker_parse = self._marker, self._marker_parse
            self._marker = self._marker_parse = None
            if marker is not None and marker.extend(piece):
                return self._inside_marker(marker, piece)
        resume = self._resume
        if resume is not None:
            unchecked = self._unchecked
            extension = "".join(unchecked) + piece if unchecked else piece
            if resume.extend(extension):
                growth = self._growth
                if growth is not None and growth.stop_marker and growth.stopped_by(extension):
                    self._fold()
                    growth = self._growth = None  # (the message is mapped again)
                if growth is not None and not unchecked and self._published:
                    # Only one field grows, by `added`: the deltas are known without building the message.
                    added = growth.added(piece)
                    if not added:
                        self.last_deltas = []
                    else:
                        self._appended.append(added)
                        self.last_deltas = [growth.delta(added)]
                    self._fast = resume.stops
                    self._fast_plain = _PLAIN.get(growth.field, 0) if growth.plain else 0
                    return self.last_deltas
                self._unchecked, self._unchecked_len = [], 0
                base, self._resume_message = self._resume_message, None
                if growth is not None and base is not None:
                    # The pieces parsed from the start turned out to extend the open nodes after all: the
                    # resumed parse's message is the one before them with the field grown by all of them.
                    return self._publish(growth.grown(base, growth.added(extension)))
                self._fold()
                # Mapped once more; the growth is found again (reasoning may just have begun to show).
                result = resume.result(self._text())
                message, self._growth = self._mapped(result, resume.spine)
                return self._publish(message, settled=True)
            if self._growth is not None:
                deltas = self._before_cut_escape(resume, extension)
                if deltas is not None:
                    return deltas
        if marker_parse is not None:
            marker = resumption(self._parser, marker_parse)
            if marker is not None and marker.extend(piece):
                self._marker_static = feeds_no_field(marker_parse, marker.spine, self._fmt)
                return self._inside_marker(marker, piece)
        self._fold()
        result = parse_effective(self._parser, self._text(), self._offset)
        self.full_parses += 1
        read_on = self._parsed(result)
        if read_on is not None:
            self._resume = self._marker = self._marker_parse = self._growth = None
            self._unchecked, self._unchecked_len = [], 0
            return read_on
        # A parse ending inside a marker is resumed only if the next piece calls for it (see `_marker_parse`).
        inside_marker = not result.fail and ends_inside_marker(result)
        fresh = resumption(self._parser, result) if not (result.fail or inside_marker) else None
        message, growth = self._mapped(result, fresh.spine if fresh is not None else None)
        if inside_marker:
            self._marker_parse = result
        if fresh is not None or resume is None or self._unchecked_len + len(piece) > _MAX_UNCHECKED:
            self._resume, self._growth, self._resume_message = fresh, growth, None
            self._unchecked, self._unchecked_len = [], 0
        else:
            self._hold(piece)
        return self._publish(message, settled=True)

    def _catch_up(self) -> None:
        """Extend `_resume` over the pieces the fast path took (a check that passes: see Resumption.stops)."""
        if self._fast_pieces:
            taken = "".join(self._parts[-self._fast_pieces:])
            self._fast_pieces = 0
            extended = self._resume is not None and self._resume.extend(taken)
            assert extended, "a piece without a stop character ended the resumed scan"

    def _before_cut_escape(self, resume: Resumption, extension: str) -> list[MessageDelta] | None:
        """`extension` (the unchecked pieces and the new one) ends inside a JSON escape (`\\`, `\\u00`) of the
        string `_resume` scans; the parse stops before it (Resumption.extend_before_cut_escape). The field grows by
        the text before the escape, which waits in `_unchecked` for the rest of it. None when this is not the
        case, or when the message of `_resume`'s parse is unknown (then the text is parsed from the start)."""
        self._fold()
        if self._unchecked:
            base = self._resume_message
        else:
            base = self._message if self._published else None
        if base is None:
            return None
        cut = resume.extend_before_cut_escape(extension)
        if not cut:
            return None
        growth = self._growth
        assert growth is not None
        message = growth.grown(base, growth.added(extension[:-cut]))
        self._unchecked, self._unchecked_len = [extension[-cut:]], cut
        self._resume_message = message
        return self._publish(message)

    def _inside_marker(self, marker: Resumption, piece: str) -> list[MessageDelta]:
        """`piece` only lengthened the marker the text ends in: the same parse with its open nodes longer.
        Unless they feed no field of the message, it is mapped again (a marker is short)."""
        self._marker = marker
        self._hold(piece)  # `_resume` may still extend over it, should the marker turn out to be none
        if self._marker_static:
            self.last_deltas = []
            return self.last_deltas
        result = marker.result(self._text())
        return self._publish(self._mapped(result, None)[0], settled=True)

    def _hold(self, piece: str) -> None:
        """`piece` was parsed from the start (or as part of a marker), not by extending `_resume`."""
        if not self._unchecked:
            # `_message` is about to be replaced by other parses' messages: keep the resumed parse's message
            self._resume_message = self._message if self._published else None
        self._unchecked.append(piece)
        self._unchecked_len += len(piece)

    def finish(self, chunk: str | bytes = "") -> ChatMessage:
        """The end of the output: parse it as complete and return the final message."""
        if self._finished:
            return self.message
        self._fast = None
        self._catch_up()  # before the last piece joins `_parts`
        held, self._held = self._held, b""
        if isinstance(chunk, str):
            piece = utf_8_decode(held, "surrogateescape", True)[0] + chunk
        else:
            piece = utf_8_decode(held + chunk, "surrogateescape", True)[0]
        self._parts.append(piece)
        self._finished = True
        self._fold()
        self.full_parses += 1
        self._publish(self._final(), settled=True)
        return self._message

    # --- hooks: llama.cpp's stream here; the recovering stream reads on (recovery/stream.py) ------------------

    def _parsed(self, result: ParseResult) -> list[MessageDelta] | None:
        """After a parse from the start: the deltas, where the stream reads the output otherwise than by
        mapping the parse; None: it maps it (`_mapped`)."""
        return None

    def _mapped(self, result: ParseResult, spine: tuple[AstId, ...] | None) -> tuple[ChatMessage,
                                                                                     FieldGrowth | None]:
        """The message of a partial parse, and how it grows while its open nodes `spine` do (`map_growing`;
        None when not resumable): llama.cpp maps whatever a failed parse left past the first character."""
        if spine is None:
            return message_of(result, self._offset, partial=True, fmt=self._fmt), None
        return map_growing(result, spine, self._fmt)

    def _settled(self, message: ChatMessage) -> ChatMessage:
        """A message grown without mapping a parse (by appending to a field), as it is sent."""
        return message

    def _final(self) -> ChatMessage:
        """The message of the whole output, complete."""
        result = parse_effective(self._parser, self._text(), self._offset)
        return message_of(result, self._offset, partial=False, fmt=self._fmt)

    def _publish(self, new: ChatMessage, *, settled: bool = False) -> list[MessageDelta]:
        if not settled:
            new = self._settled(new)
        if new.empty():
            self._published = False
            self.last_deltas = []
            return self.last_deltas
        if self._gen_id is not None:
            new = set_tool_call_ids(new, self._ids, self._gen_id)
        prev, self._message = self._message, new
        self._published = True
        self.last_deltas = compute_deltas(prev, new)
        return self.last_deltas
