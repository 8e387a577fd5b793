"""An output its end cuts off inside a call, after whole calls, while the reasoning block the generation prompt
opened is still open (recovery/reading.py `_waits_in_draft`, `_before_last_call`, `_before_marker_cut_off`).

Read as a prefix, such an output waits on a draft call (a call in reasoning the end marker may yet follow); read as
complete, a template whose calls stand in one section (`<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>`) fails the
whole section at the cut call. The whole calls before the cut one are read, the reasoning ends at the first call,
and the cut call's text stays content with a diagnostic, as after a closed reasoning block. The case comes from
SGLang's Step3 detector tests (test_truncated_tool_block_is_markup_not_content, sgl-project/sglang); checked on
DeepSeek V3.1's and R1-Distill's templates too, whose generation prompts open `<think>` the same way.
"""

from __future__ import annotations

import pytest

from autoparser.corpus import Corpus
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}} for name in ("get_weather", "get_time")]
WEATHER = {"name": "get_weather", "arguments": {"city": "SF"}}

STEP3 = ('<｜tool_calls_begin｜>\n<｜tool_call_begin>｜>\nfunction<｜tool_sep｜><steptml:invoke name="get_weather">'
         '<steptml:parameter name="city">SF</steptml:parameter></steptml:invoke><｜tool_call_end｜>\n')
STEP3_CUT = '<｜tool_call_begin>｜>\nfunction<｜tool_sep｜><steptml:invoke name="get_ti'
DEEPSEEK_CALL = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "SF"}<｜tool▁call▁end｜>'
DEEPSEEK_CUT = "\n<｜tool▁call▁begin｜>get_ti"


@pytest.mark.parametrize("template, calls, cut", [
    ("stepfun-ai__step3", STEP3, STEP3_CUT),
    ("deepseek-ai__DeepSeek-V3.1", "<｜tool▁calls▁begin｜>" + DEEPSEEK_CALL, DEEPSEEK_CUT),
], ids=["step3", "deepseek-v3.1"])
def test_the_whole_calls_before_a_cut_one_are_read(template: str, calls: str, cut: str) -> None:
    tester = peg_tester(CORPUS.by_name(template).path)
    before = ["prompt_reasoning"] if template == "stepfun-ai__step3" else []
    tester.test("Let me check.\n" + calls + cut).tools(TOOLS).parallel_tool_calls().enable_thinking() \
        .grammar_check(False).expect_diagnostics([*before, "reasoning_ended_by_call", "missing_closer", "unparsed_text"]) \
        .expect({"reasoning_content": "Let me check.\n", "content": cut.lstrip("\n"), "tool_calls": [WEATHER]})


def test_with_no_reasoning_before_the_calls() -> None:
    tester = peg_tester(CORPUS.by_name("stepfun-ai__step3").path)
    tester.test(STEP3 + STEP3_CUT).tools(TOOLS).parallel_tool_calls().grammar_check(False).expect_diagnostics(
        ["prompt_reasoning", "reasoning_ended_by_call", "missing_closer", "unparsed_text"]).expect(
        {"content": STEP3_CUT, "tool_calls": [WEATHER]})


def test_a_call_in_reasoning_the_end_marker_follows_is_still_reasoning() -> None:
    # (a draft call: the reasoning's end marker comes later, so the call was thought, not made)
    output = "Maybe " + STEP3 + "no, not yet.</think>It is sunny."
    peg_tester(CORPUS.by_name("stepfun-ai__step3").path).test(output).tools(TOOLS).parallel_tool_calls() \
        .grammar_check(False).expect_diagnostics(["prompt_reasoning"]).expect(
        {"reasoning_content": "Maybe " + STEP3 + "no, not yet.", "content": "It is sunny."})


@pytest.mark.parametrize("template, output, cut, repairs", [
    # GLM-4.7's generation prompt opens `<think>` with thinking on; a key's marker cut off after a whole argument
    ("zai-org__GLM-4.7-Flash", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>SF</arg_value>", "<arg_k",
     ["reasoning_ended_by_call", "missing_closer", "unparsed_text"]),
    # MiniMax M2's opens it whatever the request says; a parameter's marker cut off
    ("MiniMaxAI__MiniMax-M2", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">SF'
     "</parameter>\n", "<para", ["reasoning_ended_by_call", "missing_call_closer", "missing_closer", "unparsed_text"]),
], ids=["glm-4.7", "minimax-m2"])
def test_a_whole_call_before_a_marker_the_end_cuts_off(template: str, output: str, cut: str,
                                                       repairs: list[str]) -> None:
    """The one call is whole but for its closers, and the end cuts off the marker of a further argument: the call is
    read (its closers missing), the cut marker is content, as where the prompt opened no reasoning. Read as a
    prefix, the output waited on a draft call; read as complete, the cut marker broke the call."""
    tester = peg_tester(CORPUS.by_name(template).path)
    tester.test(output + cut).tools(TOOLS).parallel_tool_calls().enable_thinking().grammar_check(False) \
        .expect_diagnostics(repairs).expect({"content": cut, "tool_calls": [WEATHER]})
