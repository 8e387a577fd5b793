"""What a template writes between two calls of one section (analysis/tools.py `call_separator`, beyond the C++).

llama.cpp's parser and grammar put `, ` between two calls in a section without per-call markers (`,` between JSON
calls); templates that write something else there (nothing, a newline) had their own parallel calls rejected by
the grammar and read only by the recovery (`call_separator` repair). Each case names the template behaviour, and
checks through `peg_tester` that the strict parse reads the template's own two-call output and that the lazy
grammar, as llama.cpp's engine runs it, accepts it.
"""

from __future__ import annotations

import pytest

from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()


@pytest.mark.parametrize(("behaviour", "name", "separator"), [
    ("JSON calls one per line in a section", "MiniMaxAI__MiniMax-M1-80k", "\n"),
    ("JSON calls one after the other, nothing between them", "axolotl__llama4", ""),
    ("a `<tool_call>` block per call inside one `<tool_calls>` section", "stepfun-ai__Step3-VL-10B",
     "\n</tool_call>\n<tool_call>\n"),
])
def test_what_the_template_writes_between_two_calls(behaviour: str, name: str, separator: str) -> None:
    entry = CORPUS.by_name(name)
    assert cached_analysis(entry.read_text()).call_separator == separator, behaviour
    built = build_output(entry.read_text(), "d_parallel_tool_calls")
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in built.intended["tool_calls"]]
    assert len(calls) == 2
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"]).parallel_tool_calls(True)
    test.reasoning_format("auto").enable_thinking(False).strict().expect({"tool_calls": calls})


def test_tagged_calls_whose_closer_ends_the_line() -> None:
    """MiniMax M2 writes two `<invoke>` in one `<minimax:tool_call>` section, nothing between them (each closer
    ends its line). (Its round trip has no parallel scenario: the prompt is no prefix of the rendering with the
    message; the output here is written in the template's form, as its one-call round trip renders it.)"""
    entry = CORPUS.by_name("MiniMaxAI__MiniMax-M2")
    assert cached_analysis(entry.read_text()).call_separator == ""
    output = ("Two calls.\n</think>\n\n\n<minimax:tool_call>\n"
              '<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>\n'
              '<invoke name="get_time">\n</invoke>\n</minimax:tool_call>')
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
    test = peg_tester(entry.path).test(output).tools(tools).parallel_tool_calls(True).reasoning_format("auto")
    test.strict().expect({"reasoning_content": "Two calls.", "tool_calls": [
        {"name": "get_weather", "arguments": '{"city": "Paris"}'}, {"name": "get_time", "arguments": "{}"}]})


@pytest.mark.parametrize(("behaviour", "name"), [
    ("calls each in their own markers (no section to separate them in)", "Qwen__Qwen2.5-7B-Instruct"),
    ("a JSON array of calls (its commas are the array's)", "DeepHat__DeepHat-V1-7B"),
])
def test_no_separator_where_the_calls_have_their_own(behaviour: str, name: str) -> None:
    assert cached_analysis(CORPUS.by_name(name).read_text()).call_separator is None, behaviour
