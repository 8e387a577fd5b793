"""A call id the C++ record leaves in the function name's prefix (analysis/tools.py `call_id_in_name_prefix`, beyond
the C++).

Solar Open writes a call as `<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}<|tool_call:end|>`,
and its system prompt tells the model to make the id up (ten letters or digits). The C++ finds ids from a diff of
two renders that differ in the id; that diff begins before the tools the system prompt lists, which name the
function too, so the C++ finds no id and keeps the first call's, `call00001`, in the name's prefix: its grammar
makes every call carry that id, and its parse of a call with another id fails. Each case checks through
`peg_tester` that the strict parse reads the output and that the lazy grammar, as llama.cpp's engine runs it,
accepts it.
"""

from __future__ import annotations

import pytest

from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
SOLAR = CORPUS.by_name("upstage__Solar-Open-100B")
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_the_id_before_the_names_marker() -> None:
    analysis = cached_analysis(SOLAR.read_text())
    assert analysis.tools.function.name_prefix == "call00001<|tool_call:name|>"  # (the C++ record)
    assert analysis.call_id_in_name_prefix == ("", "<|tool_call:name|>")


def test_an_id_the_model_makes_up() -> None:
    output = ('<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>get_weather<|tool_call:args|>'
              '{"city": "Paris"}<|tool_call:end|><|calls|>')
    peg_tester(SOLAR.path).test(output).tools(WEATHER).strict().expect({
        "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "a1b2c3d4e5"}]})


@pytest.mark.parametrize("scenario", ["c_one_tool_call", "d_parallel_tool_calls"])
def test_the_templates_own_calls(scenario: str) -> None:
    """Two calls carry two ids (`call00001`, `call00002`): the grammar takes each."""
    built = build_output(SOLAR.read_text(), scenario)
    calls = [{"name": c["name"], "arguments": c["arguments"], "id": f"call{n:05d}"}
             for n, c in enumerate(built.intended["tool_calls"], 1)]
    test = peg_tester(SOLAR.path).test(built.output).tools(built.request["tools"])
    test = test.parallel_tool_calls(len(calls) > 1).enable_thinking(built.request["enable_thinking"])
    test.reasoning_format("auto").strict().expect({"tool_calls": calls})
