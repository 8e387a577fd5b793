"""GPT-OSS handler behaviour the C++ conformance cases do not exercise (parsers/gpt-oss.cpp)."""

from __future__ import annotations

from functools import cache

import pytest

from autoparser.chat.handlers import find_handler
from autoparser.corpus import Corpus
from autoparser.errors import ParseError
from autoparser.params import generate

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


@cache
def _source() -> str:
    return Corpus.load().by_origin("seed:templates/openai-gpt-oss-120b.jinja").read_text()


def test_claims_the_template() -> None:
    handler = find_handler(_source())
    assert handler is not None and handler.name == "gpt_oss"


def test_history_ends_with_end_not_return() -> None:
    # llama.cpp issue 15417: without a generation prompt the last <|return|> becomes <|end|>.
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    prompt = generate(_source(), {"messages": msgs, "add_generation_prompt": False, "now": "2026-01-01"}).prompt
    assert prompt.endswith("<|channel|>final<|message|>Hello<|end|>")
    assert "<|return|>" not in prompt


def test_reasoning_rendered_as_thinking_and_content_dropped_with_calls() -> None:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    msgs = [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "SHOULD-NOT-RENDER", "reasoning_content": "Let me look", "tool_calls": [call]}]
    prompt = generate(_source(), {"messages": msgs, "tools": [TOOL], "add_generation_prompt": False,
                                  "now": "2026-01-01"}).prompt
    assert "<|channel|>analysis<|message|>Let me look<|end|>" in prompt
    assert "SHOULD-NOT-RENDER" not in prompt


def test_required_tool_choice_is_eager_and_demands_a_call() -> None:
    params = generate(_source(), {"messages": [{"role": "user", "content": "Weather?"}], "tools": [TOOL],
                                  "tool_choice": "required", "reasoning_format": "auto", "now": "2026-01-01"})
    assert params.grammar and not params.grammar_lazy
    msg = params.parse('<|channel|>analysis<|message|>Need weather<|end|><|start|>assistant<|channel|>commentary'
                       ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}')
    assert msg.reasoning_content == "Need weather"
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Paris"}')]
    with pytest.raises(ParseError):
        params.parse("<|channel|>final<|message|>It is sunny.", strict=True)
    # the default parse keeps the text the format cannot place, and says so
    recovered = params.parse("<|channel|>final<|message|>It is sunny.")
    assert "It is sunny." in recovered.content and not recovered.tool_calls
    assert [d.kind for d in recovered.diagnostics] == ["unparsed_text"]


def test_an_empty_schema_asks_for_json_here_but_not_on_the_generic_path() -> None:
    # llama.cpp's gpt-oss takes any JSON object as a response format (`is_object()`), `{}` included: the answer
    # is constrained to JSON from the first token; the generic path wants a non-empty one (`!empty()`) and
    # builds no grammar. Both checked against the live oracle (b11434).
    request = {"messages": [{"role": "user", "content": "JSON please"}], "json_schema": "{}",
               "reasoning_format": "auto", "now": "2026-01-01"}
    params = generate(_source(), request)
    assert params.grammar and not params.grammar_lazy and "response-format" in params.grammar
    msg = params.parse('<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final<|message|>{"a": 1}')
    assert (msg.reasoning_content, msg.content) == ("ok", '{"a": 1}')
    generic = generate(Corpus.load().by_origin("seed:templates/Qwen3.5-4B.jinja").read_text(), request)
    assert generic.format == "peg-native" and not generic.grammar
