"""How a template writes a tagged call's arguments beyond what the C++ record says (analysis/tools.py
`arguments_sorted` and `typed_argument`, beyond the C++).

Google's FunctionGemma template writes `call:search{max_results:3,query:<escape>llama.cpp<escape>}`: the arguments
sorted by name (`| dictsort`), and `<escape>` around a string value only. The C++ record takes `<escape>` into the
argument name's suffix, so llama.cpp's grammar wants the required arguments in the schema's order and every value
quoted: it rejects the template's own parallel calls, and constrained decoding would make the model quote a
number (read back as a string). DeepSeek V4's DSML says a value's type in an attribute, `string="false">3`, where
the C++ record has the string's `string="true">` only. Each case names the template behaviour and checks through `peg_tester` that the
strict parse reads the output and that the lazy grammar, as llama.cpp's engine runs it, accepts it.
"""

from __future__ import annotations

import pytest

from autoparser.analysis.model import TypedArgument
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
FUNCTIONGEMMA = ("unsloth__functiongemma-270m-it", "distil-labs__distil-home-assistant-functiongemma")


@pytest.mark.parametrize("name", FUNCTIONGEMMA)
def test_sorted_arguments_and_bare_numbers(name: str) -> None:
    """The template's own two calls: `search`'s `max_results` (an integer, bare) before `query` (a string, between
    `<escape>` markers), which the schema lists the other way round."""
    entry = CORPUS.by_name(name)
    analysis = cached_analysis(entry.read_text()).effective
    assert analysis.arguments_sorted and analysis.typed_argument == TypedArgument(":", "", "<escape>")
    built = build_output(entry.read_text(), "d_parallel_tool_calls")
    assert "{max_results:3,query:<escape>llama.cpp<escape>}" in built.output
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in built.intended["tool_calls"]]
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"]).parallel_tool_calls(True)
    test.strict().expect({"tool_calls": calls})


def test_booleans_and_numbers_as_the_template_prints_them() -> None:
    """`format_argument` prints a boolean `true`/`false` and a number as it is, no quote around either."""
    entry = CORPUS.by_name(FUNCTIONGEMMA[0])
    tools = [{"type": "function", "function": {"name": "set_timer", "parameters": {"type": "object", "properties": {
        "label": {"type": "string"}, "loud": {"type": "boolean"}, "minutes": {"type": "number"}},
        "required": ["label", "loud", "minutes"]}}}]
    output = "<start_function_call>call:set_timer{label:<escape>tea<escape>,loud:true,minutes:2.5}<end_function_call>"
    peg_tester(entry.path).test(output).tools(tools).strict().expect({"tool_calls": [
        {"name": "set_timer", "arguments": '{"label": "tea", "loud": true, "minutes": 2.5}'}]})


def test_objects_and_lists_in_the_templates_own_syntax() -> None:
    """`format_argument` prints a mapping `{key:value,...}` (keys bare, sorted) and a list `[value,...]`, strings in
    them between `<escape>` markers: read as the JSON they stand for."""
    entry = CORPUS.by_name(FUNCTIONGEMMA[1])
    tools = [{"type": "function", "function": {"name": "configure", "parameters": {"type": "object", "properties": {
        "cfg": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["cfg", "tags"]}}}]
    output = ("<start_function_call>call:configure{cfg:{n:3,name:<escape>a, b<escape>},"
              "tags:[<escape>x<escape>,<escape>y<escape>]}<end_function_call>")
    peg_tester(entry.path).test(output).tools(tools).strict().expect({"tool_calls": [
        {"name": "configure", "arguments": '{"cfg": {"n": 3, "name": "a, b"}, "tags": ["x", "y"]}'}]})


@pytest.mark.parametrize("name", ["crusoeai__DeepSeek-V4-Flash", "crit-core__deepseek-v4"])
def test_the_type_attribute_of_a_number(name: str) -> None:
    """These DSML templates (on the generic path: they write the markup out) write `string="false">` before a
    value that is no string."""
    entry = CORPUS.by_name(name)
    analysis = cached_analysis(entry.read_text()).effective
    assert analysis.typed_argument == TypedArgument('" string="false">', "</｜DSML｜parameter>\n")
    built = build_output(entry.read_text(), "d_parallel_tool_calls")
    assert '<｜DSML｜parameter name="max_results" string="false">3</｜DSML｜parameter>' in built.output
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in built.intended["tool_calls"]]
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"]).parallel_tool_calls(True)
    test = test.reasoning_format("auto").enable_thinking(built.request["enable_thinking"])
    test.strict().expect({"tool_calls": calls})


def test_a_template_that_writes_arguments_as_given() -> None:
    """vLLM's FunctionGemma template loops over the arguments as the call gives them (`args.items()`) and writes
    every value between `<escape>` markers, a number too."""
    analysis = cached_analysis(CORPUS.by_name("vllm__tool_chat_template_functiongemma").read_text()).effective
    assert not analysis.arguments_sorted and analysis.typed_argument is None
