"""The contributor API as contributors use it: the `peg_tester` fixture from the installed pytest plugin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from autoparser.corpus import Corpus
from autoparser.testing.peg_tester import PegTestFailure

TOOLS = [{"type": "function", "function": {"name": "special_function", "description": "I'm special",
                                           "parameters": {"type": "object",
                                                          "properties": {"arg1": {"type": "integer"}},
                                                          "required": ["arg1"]}}}]


@pytest.fixture
def qwen3(peg_tester: Callable[..., Any]) -> Any:
    return peg_tester(Corpus.load().by_origin("seed:templates/Qwen-Qwen3-0.6B.jinja").path)


def test_fluent_api_passes_on_a_real_call(qwen3: Any) -> None:
    out = '<think>\nI\'m\nthinking\n</think>\n\n<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'
    msg = qwen3.test(out).tools(TOOLS).reasoning_format("auto").enable_thinking(True).expect(
        {"reasoning_content": "I'm\nthinking", "content": "",
         "tool_calls": [{"name": "special_function", "arguments": '{"arg1": 1}'}]})
    assert msg.tool_calls[0].name == "special_function"


def test_a_wrong_expectation_reports_the_fields_that_differ(qwen3: Any) -> None:
    with pytest.raises(PegTestFailure) as err:
        qwen3.test("Hello, world!").reasoning_format("auto").expect({"content": "Goodbye"})
    text = str(err.value)
    assert "content: expected 'Goodbye', got 'Hello, world!'" in text
    assert "whole parse" in text and "streamed" in text


def test_grammar_is_checked_by_llama_cpp(qwen3: Any, gbnf_oracle: Any) -> None:
    # the argument violates the tool's schema (a string for an integer): the parser still maps it,
    # but llama.cpp's engine rejects the constrained part of the output
    out = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": "x"}}\n</tool_call>'
    with pytest.raises(PegTestFailure, match="grammar: the constrained output"):
        qwen3.test(out).tools(TOOLS).expect({"tool_calls": [{"name": "special_function", "arguments": '{"arg1": "x"}'}]})
