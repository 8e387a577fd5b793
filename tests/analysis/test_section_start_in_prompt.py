"""A call section's opener the generation prompt has written already (analysis/tools.py `section_start_in_prompt`,
beyond the C++).

vLLM's Llama 4 JSON template writes a message with calls as a fresh assistant header (a newline before it) and
bare JSON calls, and its generation prompt ends with that header. The C++ analysis takes the header as the calls'
section opener; after the prompt the model writes the calls alone, so llama.cpp reads them as content and its lazy
grammar's trigger (the header) never fires. Each case names the template behaviour and checks through
`peg_tester` that the strict parse reads the template's own output and that the lazy grammar, as llama.cpp's
engine runs it, accepts it.
"""

from __future__ import annotations

import pytest

from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import build_output
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
LLAMA4_JSON = "vllm__tool_chat_template_llama4_json"


@pytest.mark.parametrize("scenario", ["c_one_tool_call", "d_parallel_tool_calls", "h_empty_arguments"])
def test_calls_written_after_the_prompts_header(scenario: str) -> None:
    """The generation prompt ends with `<|header_start|>assistant<|header_end|>\\n\\n`, the opener the analysis
    finds: the calls the template renders after the prompt are read, and the grammar accepts them."""
    entry = CORPUS.by_name(LLAMA4_JSON)
    analysis = cached_analysis(entry.read_text())
    assert analysis.section_start_in_prompt
    assert analysis.tools.format.section_start == "<|header_start|>assistant<|header_end|>\n\n"  # the C++ record
    built = build_output(entry.read_text(), scenario)
    assert "<|header_start|>" not in built.output
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in built.intended["tool_calls"]]
    test = peg_tester(entry.path).test(built.output).tools(built.request["tools"])
    test = test.parallel_tool_calls(len(calls) > 1)
    test.reasoning_format("auto").strict().expect({"tool_calls": calls})


def test_content_before_a_bare_call_ends_at_the_call() -> None:
    """With the opener written by the prompt, a reply's text ends where a bare call begins (as for Llama 3.x's bare
    JSON calls)."""
    entry = CORPUS.by_name(LLAMA4_JSON)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    output = 'Let me look.{"name": "get_weather", "parameters": {"city": "Paris"}}'
    peg_tester(entry.path).test(output).tools(tools).strict().expect({
        "content": "Let me look.", "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


@pytest.mark.parametrize(("behaviour", "name"), [
    ("the prompt ends with the assistant header; the calls have their own markers", "Qwen__Qwen2.5-7B-Instruct"),
    ("the prompt ends with `</think>`, the opener the C++ finds, but a section end closes the calls (their own"
     " markers read them)", "vllm__tool_chat_template_deepseekv31"),
])
def test_openers_the_model_writes(behaviour: str, name: str) -> None:
    assert not cached_analysis(CORPUS.by_name(name).read_text()).section_start_in_prompt, behaviour
