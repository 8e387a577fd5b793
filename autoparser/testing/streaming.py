"""Checks the incremental StreamParser against the definition of streaming: deltas between whole parses.

The reference is what llama.cpp's server does: after every chunk, parse the whole output so far and send
`compute_deltas(previous, current)`. `stream_mismatch` feeds the same chunks to `ChatParams.stream()` and
says where the two differ (None when they agree chunk by chunk, raise at the same step, and end on the same
message). Used by the stream tests, the round-trip suite (every golden output) and `peg_tester`.

    problem = stream_mismatch(params, output, cuts=range(3, len(output.encode()), 3))
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from autoparser.chat.stream import compute_deltas, set_tool_call_ids
from autoparser.errors import ParseError
from autoparser.params import ChatParams
from autoparser.types import ChatMessage

__all__ = ["Step", "chunked", "reference_steps", "stream_mismatch", "streamed_steps"]

Step = tuple[str, Any]  # ("deltas", [MessageDelta...]), ("error", reason) or ("message", ChatMessage)


def _ids() -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"call_{n}"


def chunked(output: str, cuts: Iterable[int]) -> list[bytes]:
    """The UTF-8 bytes of `output` cut at the given byte offsets (cuts inside a character are kept)."""
    data = output.encode("utf-8", "surrogateescape")
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)] or [b""]


def reference_steps(params: ChatParams, chunks: Sequence[bytes], final_partial: bool,
                    strict: bool = False) -> list[Step]:
    """Whole re-parse after every chunk (same decoder, generated ids and empty-result rule as StreamParser)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    gen = _ids()
    ids: list[str] = []
    text = ""
    prev = ChatMessage()
    steps: list[Step] = []
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        piece = decoder.decode(chunk, final=last and not final_partial)
        if not piece and not (last and not final_partial):
            steps.append(("deltas", []))  # the same text parses the same: nothing to send
            continue
        text += piece
        try:
            cur = params.parse(text, is_partial=not last or final_partial, strict=strict)
            if cur.empty():
                steps.append(("deltas", []))
                if last and not final_partial and not strict:
                    prev = cur  # (the default stream ends on the parse's message, its diagnostics too)
                continue
            cur = set_tool_call_ids(cur, ids, lambda: next(gen))
            # raises too when a later parse finds fewer tool calls (llama.cpp's "Invalid diff")
            deltas = compute_deltas(prev, cur)
        except ParseError as e:
            steps.append(("error", e.reason))
            return steps
        steps.append(("deltas", deltas))
        prev = cur
    steps.append(("message", prev))
    return steps


def streamed_steps(params: ChatParams, chunks: Sequence[bytes], final_partial: bool,
                   strict: bool = False) -> tuple[list[Step], int]:
    """The same chunks through `params.stream()`; also returns how often it parsed from the start."""
    gen = _ids()
    stream = params.stream(gen_tool_call_id=lambda: next(gen), strict=strict)
    steps: list[Step] = []
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        try:
            if last and not final_partial:
                stream.finish(chunk)
                steps.append(("deltas", stream.last_deltas))
            else:
                steps.append(("deltas", stream.feed(chunk)))
        except ParseError as e:
            steps.append(("error", e.reason))
            return steps, stream.full_parses
    steps.append(("message", stream.message))
    return steps, stream.full_parses


def stream_mismatch(params: ChatParams, output: str, cuts: Iterable[int], final_partial: bool = False,
                    strict: bool = False) -> str | None:
    """None when streaming `output` cut at `cuts` (byte offsets) gives the reference's steps, else where not
    (`strict`: both with the strict parse)."""
    chunks = chunked(output, cuts)
    want = reference_steps(params, chunks, final_partial, strict)
    got, _ = streamed_steps(params, chunks, final_partial, strict)
    for i, (w, g) in enumerate(zip(want, got)):
        if g != w:
            done = sum(len(c) for c in chunks[:i + 1])
            return (f"streaming step {i} (after {done} of {sum(len(c) for c in chunks)} bytes):"
                    f" StreamParser gave {g!r}, whole re-parses give {w!r}")
    if len(got) != len(want):
        return f"streaming: StreamParser took {len(got)} steps, whole re-parses {len(want)}"
    return None
