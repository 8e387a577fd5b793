"""A JSON call object that nests the name and the arguments under one member (analysis/tools.py `nested_call`,
beyond the C++).

A template that writes a message's calls with `tool_calls | tojson` writes OpenAI's own call object:
`{"id": ..., "type": "function", "function": {"name": ..., "arguments": {...}}}`. The C++ analysis takes the
`function` member for the arguments, so llama.cpp's grammar wants `{"id": ..., "function": ARGUMENTS, "name": ...}`
and its parse of the template's own calls fails (the live oracle shows both). Each case names the template
behaviour and checks through `peg_tester` that the strict parse reads the template's own output and that the lazy
grammar, as llama.cpp's engine runs it, accepts it.
"""

from __future__ import annotations

import pytest

from autoparser.analysis.model import NestedCall
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
OPENAI_CALL = NestedCall("function", "name", "arguments", (("type", '"function"'),))
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.mark.parametrize(("behaviour", "name", "scenario", "content"), [
    ("`tool_calls | tojson` after `<|tool_call|>`, on one line", "kerzgrr__Monostich-2-base", "c_one_tool_call", ""),
    ("the same, two calls in the list", "kerzgrr__Monostich-2-base", "d_parallel_tool_calls", ""),
    # (this template closes the content's turn, `<|im_end|>`, before the call: text of the message to us)
    ("`tool_calls | tojson(indent=2)` in `<tool_call>`, after the content", "tiiuae__Falcon-H1-Tiny-Tool-Calling-90M",
     "g_tool_call_with_content", "Let me check the weather for you.\n<|im_end|>"),
])
def test_the_templates_own_calls(behaviour: str, name: str, scenario: str, content: str) -> None:
    entry = CORPUS.by_name(name)
    analysis = cached_analysis(entry.read_text())
    assert analysis.nested_call == OPENAI_CALL, behaviour
    assert analysis.tools.format.args_field == "function"  # (the C++ record, which takes the member for them)
    built = build_output(entry.read_text(), scenario)
    # (the ids the round trip's calls carry, which the template writes: `"id": "call00001"`)
    calls = [{"name": c["name"], "arguments": c["arguments"], "id": f"call{n:05d}"}
             for n, c in enumerate(built.intended["tool_calls"], 1)]
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"])
    test.parallel_tool_calls(len(calls) > 1).strict().expect({"content": content, "tool_calls": calls})


def test_a_call_without_its_id_and_type() -> None:
    """The id and the `"type": "function"` member are optional, as the OpenAI object's own are in a model's output."""
    entry = CORPUS.by_name("kerzgrr__Monostich-2-base")
    output = '<|tool_call|>\n[{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]'
    peg_tester(entry.path).test(output).tools(WEATHER).strict().expect({
        "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


@pytest.mark.parametrize(("behaviour", "name"), [
    ("a flat `{\"name\": ..., \"arguments\": ...}` call", "Qwen__Qwen2.5-7B-Instruct"),
    ("the name as the object's key", "DeepHat__DeepHat-V1-7B"),
])
def test_calls_the_record_reads(behaviour: str, name: str) -> None:
    assert cached_analysis(CORPUS.by_name(name).read_text()).nested_call is None, behaviour
