"""Gemma 4 handler behaviour the conformance cases do not exercise: the tool-response folding applied to
older Gemma 4 templates (`workaround::convert_tool_responses_gemma4`) and detection of both template variants."""

from __future__ import annotations

from typing import Any

from autoparser.chat.handlers.gemma4 import convert_tool_responses, detect
from autoparser.corpus import Corpus


def _call(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": {}}}


def test_detects_both_template_variants() -> None:
    corpus = Corpus.load()
    for name in ("google-gemma-4-31B-it.jinja", "google-gemma-4-31B-it-interleaved.jinja"):
        assert detect(corpus.by_origin(f"seed:templates/{name}").read_text())


def test_tool_results_fold_into_the_calling_turn() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "need tools",
         "tool_calls": [_call("get_weather"), _call("get_time")]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 20}'},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
        {"role": "tool", "tool_call_id": "c3", "content": "extra"},
        {"role": "assistant", "content": "Warm, at noon."},
        {"role": "user", "content": "thanks"},
    ]
    out = convert_tool_responses(messages)
    assert out[0] == messages[0]
    assert out[1] == {
        "role": "assistant",
        "tool_calls": [_call("get_weather"), _call("get_time")],
        "tool_responses": [{"name": "get_weather", "response": {"temp": 20}},
                           {"name": "get_time", "response": "noon"},
                           {"name": "c3", "response": "extra"}],  # no matching call: named by its id
        "content": "Warm, at noon.",
        "reasoning_content": "need tools",
    }
    assert out[2:] == [messages[6]]


def test_a_following_call_turn_is_not_merged_as_content() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "tool_calls": [_call("a")]},
        {"role": "assistant", "content": "more", "tool_calls": [_call("b")]},
    ]
    out = convert_tool_responses(messages)
    # each call turn starts its own merged message; as in the C++, only a following content-only turn supplies
    # the content, the call turn's own text is not carried over
    assert out == [{"role": "assistant", "tool_calls": [_call("a")]},
                   {"role": "assistant", "tool_calls": [_call("b")]}]
