"""DeepSeek V4 behaviour the conformance cases do not exercise: tool results are rendered in the order of the
calls that produced them (matched by id), within each run of user/tool messages."""

from __future__ import annotations

from typing import Any

from autoparser.chat.handlers.deepseek import sort_tool_results


def _calls(*ids: str) -> list[dict[str, Any]]:
    return [{"type": "function", "id": i, "function": {"name": "f", "arguments": "{}"}} for i in ids]


def test_results_follow_call_order() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": _calls("a", "b", "c")},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
        {"role": "user", "content": "interjection"},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    out = sort_tool_results(messages)
    assert [m.get("tool_call_id") for m in out] == [None, None, "a", None, "b", "c", None]
    assert out[3] == messages[3]  # user messages keep their place in the run


def test_unknown_ids_sort_first_and_single_results_stay() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "tool_calls": _calls("x", "y")},
        {"role": "tool", "tool_call_id": "y", "content": "Y"},
        {"role": "tool", "tool_call_id": "zzz", "content": "?"},
    ]
    assert [m["tool_call_id"] for m in sort_tool_results(messages)[1:]] == ["zzz", "y"]
    lone: list[dict[str, Any]] = [{"role": "assistant", "tool_calls": _calls("x")}, {"role": "tool", "tool_call_id": "x", "content": ""}]
    assert sort_tool_results(lone) == lone
