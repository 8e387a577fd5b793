"""Comparing chat messages as llama.cpp's test harness does (`assert_msg_equals` in tests/test-chat.cpp).

Used by the contributor test API (testing/peg_tester.py) and by the corpus round trips (corpus/roundtrip.py):
both judge a parsed message against an expected one with the same rules, so the rules live below both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autoparser.peg.nodes import C_SPACE
from autoparser.types import ChatMessage, ToolCall

__all__ = ["as_message", "message_differences", "renormalize_json"]



def renormalize_json(text: str) -> str:
    """Arguments as the C++ test compares them: re-serialised JSON, and "" for anything unparsable. Keys are
    sorted, as nlohmann::json (a std::map) serialises them: the order of arguments is not compared."""
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        return ""


def as_message(m: ChatMessage | Mapping[str, Any]) -> ChatMessage:
    """A message from an expected-message record: ours (`to_dict`) or OpenAI's (calls under `function`)."""
    if isinstance(m, ChatMessage):
        return m
    calls = []
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", tc)
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(name=fn.get("name", ""), arguments=args, id=tc.get("id", "") or ""))
    return ChatMessage(role=m.get("role") or "assistant", content=m.get("content") or "",
                       reasoning_content=m.get("reasoning_content") or "", tool_calls=tuple(calls))


def message_differences(expected: ChatMessage, actual: ChatMessage, *, ignore_ws: bool = True,
                        compare_ids: bool = True) -> list[str]:
    """Human-readable differences under the C++ `assert_msg_equals(…, ignore_ws)` rules; [] when equal."""
    out: list[str] = []

    def norm(s: str) -> str:
        return s.strip(C_SPACE) if ignore_ws else s

    if expected.role != actual.role:
        out.append(f"role: expected {expected.role!r}, got {actual.role!r}")
    if norm(expected.content) != norm(actual.content):
        out.append(f"content: expected {expected.content!r}, got {actual.content!r}")
    if norm(expected.reasoning_content) != norm(actual.reasoning_content):
        out.append(f"reasoning_content: expected {expected.reasoning_content!r}, got {actual.reasoning_content!r}")
    if len(expected.tool_calls) != len(actual.tool_calls):
        out.append(f"tool_calls: expected {len(expected.tool_calls)} call(s), got {len(actual.tool_calls)}: "
                   f"{[c.name for c in actual.tool_calls]}")
    for i, (e, a) in enumerate(zip(expected.tool_calls, actual.tool_calls)):
        if e.name != a.name:
            out.append(f"tool_calls[{i}].name: expected {e.name!r}, got {a.name!r}")
        if renormalize_json(e.arguments) != renormalize_json(a.arguments):
            out.append(f"tool_calls[{i}].arguments: expected {e.arguments!r}, got {a.arguments!r}")
        if compare_ids and e.id != a.id:
            out.append(f"tool_calls[{i}].id: expected {e.id!r}, got {a.id!r}")
    return out
