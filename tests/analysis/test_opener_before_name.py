"""JSON arguments printed as they come after a name that only plain text introduces (analysis/forms.py
`arguments_unrendered` and `opener_before_name`, beyond the C++).

llama-cpp-python's function-calling template writes each call as `functions.NAME:\n{{ arguments }}`, the calls one
after another. The C++ passes a call's arguments as an object, which llama.cpp's jinja prints as nothing, so it
reads tagged arguments with no markers at all: no parser made from that reads a call, and no trigger wakes a
grammar. The arguments as requests give them, JSON text, show the form: JSON after the name's suffix `:\n`, and
before every name the same text, `functions.`, which is each call's opener. Each case checks through
`peg_tester` that the strict parse reads the output, the stream, and that the lazy grammar, as llama.cpp's engine
runs it, accepts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoparser.analysis.model import ToolFormat
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
FUNCTIONS = CORPUS.by_name("llama-cpp-python__function_calling_template")
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
]
WEATHER = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
TIME = {"name": "get_time", "arguments": '{"tz": "UTC"}'}


def test_the_record_reads_no_call_and_the_requests_arguments_show_the_form() -> None:
    analysis = cached_analysis(FUNCTIONS.read_text())
    record = analysis.tools  # (as the C++ writes it: no marker but the name's suffix)
    assert record.format.mode is ToolFormat.TAG_WITH_TAGGED and record.function.name_suffix == ":\n"
    assert not (record.format.section_start + record.format.per_call_start + record.function.name_prefix)
    reading = analysis.transformers_reading
    assert reading is not None
    assert reading.tools.format.mode is ToolFormat.TAG_WITH_JSON
    assert reading.tools.format.per_call_start == "functions."
    assert reading.tools.function.name_suffix == ":\n"


@pytest.mark.parametrize("scenario", ["c_one_tool_call", "d_parallel_tool_calls", "h_empty_arguments"])
def test_the_templates_own_calls(scenario: str) -> None:
    built = build_output(FUNCTIONS.read_text(), scenario)
    calls = built.intended["tool_calls"]
    test = peg_tester(FUNCTIONS.path).test(built.output).tools(built.request["tools"])
    test.parallel_tool_calls(len(calls) > 1).strict().expect({"tool_calls": calls})


def test_calls_a_line_apart_as_llama_cpp_pythons_handler_writes_them() -> None:
    # llama-cpp-python's chatml-function-calling handler (llama_chat_format.py, 0.3.36) appends a newline after
    # each call's arguments before the next `functions.NAME:`
    output = 'functions.get_weather:\n{"city": "Paris"}\nfunctions.get_time:\n{"tz": "UTC"}'
    peg_tester(FUNCTIONS.path).test(output).tools(TOOLS).parallel_tool_calls().strict().expect(
        {"tool_calls": [WEATHER, TIME]})


def test_text_before_the_first_opener_is_content() -> None:
    output = 'Let me look that up.\nfunctions.get_weather:\n{"city": "Paris"}'
    peg_tester(FUNCTIONS.path).test(output).tools(TOOLS).strict().expect(
        {"content": "Let me look that up.\n", "tool_calls": [WEATHER]})


def test_a_reply_without_a_call_is_content() -> None:
    peg_tester(FUNCTIONS.path).test("It is sunny in Paris.").tools(TOOLS).strict().expect(
        {"content": "It is sunny in Paris."})


# Another template that prints the arguments as they come, after its own plain-text opener and suffix.
PLAIN = """{%- for message in messages -%}
{{- '### ' + message.role + '\\n' -}}
{%- if message.content -%}{{- message.content -}}{%- endif -%}
{%- for call in message.tool_calls or [] -%}
{{- 'CALL ' + call.function.name + ' WITH ' -}}{{- call.function.arguments -}}{{- '\\n' -}}
{%- endfor -%}
{{- '\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '### assistant\\n' -}}{%- endif -%}"""


def test_another_opener_and_suffix_are_derived(tmp_path: Path) -> None:
    template = tmp_path / "plain.jinja"
    template.write_text(PLAIN)
    reading = cached_analysis(PLAIN).transformers_reading
    assert reading is not None
    assert (reading.tools.format.per_call_start, reading.tools.function.name_suffix) == ("CALL ", " WITH ")
    output = 'CALL get_weather WITH {"city": "Paris"}\nCALL get_time WITH {"tz": "UTC"}\n'
    peg_tester(template).test(output).tools(TOOLS).parallel_tool_calls().strict().expect(
        {"tool_calls": [WEATHER, TIME]})
