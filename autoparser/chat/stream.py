"""Streaming: the deltas between two successive parses of a growing output (`common_chat_msg_diff`).

A streaming server re-parses the whole output on every chunk and sends what changed. The parsers are built so
that every field only grows (see SPEC section 7); `compute_deltas` turns two messages into OpenAI-style
delta records and raises ParseError when that promise is broken. `apply_deltas` folds deltas back into a
message, as a client does (and as the C++ test harness checks).
"""

from __future__ import annotations

import codecs
import dataclasses
from collections.abc import Callable, Iterable

from autoparser.errors import ParseError
from autoparser.types import ChatMessage, MessageDelta, ToolCall

__all__ = ["StreamParser", "apply_deltas", "compute_deltas", "set_tool_call_ids", "string_diff"]


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


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
                     position=_common_prefix_len(last, current))


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
                             text=newf.name, position=_common_prefix_len(pref.name, newf.name))
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


class StreamParser:
    """Turns a stream of output chunks into deltas, as the llama.cpp server does.

    `parse(text, is_partial)` parses the whole output so far (e.g. `ChatParams.parse`); each `feed` re-parses
    and returns the deltas against the previous message. Byte chunks are decoded incrementally: a UTF-8
    sequence cut by a chunk boundary waits for its continuation, and undecodable bytes reach the parser as
    surrogate escapes. With `gen_tool_call_id`, calls the model gave no id get a generated one, stable
    across chunks. An empty parse result leaves the previous message in place (nothing is sent).
    """

    def __init__(self, parse: Callable[[str, bool], ChatMessage], *,
                 gen_tool_call_id: Callable[[], str] | None = None) -> None:
        self._parse = parse
        self._gen_id = gen_tool_call_id
        self._ids: list[str] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.text = ""
        self.message = ChatMessage()

    def feed(self, chunk: str | bytes) -> list[MessageDelta]:
        return self._update(chunk, is_partial=True)

    def finish(self, chunk: str | bytes = "") -> list[MessageDelta]:
        """The last chunk: parsed as complete output (`is_partial=False`)."""
        return self._update(chunk, is_partial=False)

    def _update(self, chunk: str | bytes, is_partial: bool) -> list[MessageDelta]:
        if isinstance(chunk, bytes):
            self.text += self._decoder.decode(chunk, final=not is_partial)
        else:
            if not is_partial:
                self.text += self._decoder.decode(b"", final=True)
            self.text += chunk
        new = self._parse(self.text, is_partial)
        if new.empty():
            return []
        if self._gen_id is not None:
            new = set_tool_call_ids(new, self._ids, self._gen_id)
        prev, self.message = self.message, new
        return compute_deltas(prev, new)
