"""Reasoning the generation prompt opens, where the C++ analysis finds no end to it (analysis/reasoning.py
`prompt_opened_reasoning`, read by the relaxed parser: chat/generic.py `_relaxed_build`).

Such a template ends the generation prompt with an opening tag that the assistant turns of the history do not
write, and renders no reasoning in the history (OLMo 3 Think, Step3, LongCat): the model continues inside the
block, `...</think>answer`, which the C++ reads as content. Each case names the template behaviour the block is
derived from; every parse runs through `peg_tester` (whole, every prefix, the stream).
"""

from __future__ import annotations

import pytest

from autoparser import generate
from autoparser.analysis.analyzer import analyze_template
from autoparser.analysis.model import ReasoningAnalysis, ReasoningMode
from autoparser.testing.peg_tester import peg_tester


def _template(prompt_tail: str, turn_head: str = "", preamble: str = "") -> str:
    """ChatML after `preamble`: an assistant turn of the history is `turn_head` + its content (never its
    reasoning); the generation prompt is the assistant header, then `prompt_tail`."""
    return (preamble + "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
            "{%- if m.role == 'assistant' %}" + turn_head + "{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\n" + prompt_tail + "{% endif %}")


def _tag(start: str, end: str) -> ReasoningAnalysis:
    return ReasoningAnalysis(ReasoningMode.TAG_BASED, start, end)


# (template behaviour, template source, the reasoning block it implies)
OPENED = {
    "the prompt alone writes <think> after the header": (_template("<think>"), _tag("<think>", "</think>")),
    "the prompt writes the tag and a newline": (_template("<think>\n"), _tag("<think>\n", "</think>")),
    "a tag of its own name, closed in a branch of the template": (
        _template("<longcat_think>", preamble="{% if reasoning_content is defined %}</longcat_think>{% endif %}"),
        _tag("<longcat_think>", "</longcat_think>")),
    "a bracketed tag": (_template("[THINK]"), _tag("[THINK]", "[/THINK]")),
    "the closing tag the template's text writes: `start` made `end`": (
        _template("<start_working_out>", preamble="Reason between <start_working_out> and <end_working_out>.\n"),
        _tag("<start_working_out>", "<end_working_out>")),
    "a piped tag, closed likewise": (_template("<|START_THINKING|>", preamble="<|START_THINKING|><|END_THINKING|>"),
                                     _tag("<|START_THINKING|>", "<|END_THINKING|>")),
    "the tag only with enable_thinking (the C++ records a start, no end)": (
        _template("{% if enable_thinking %}<think>{% endif %}"), _tag("<think>", "</think>")),
}

NOT_OPENED = {
    "the prompt ends with the header": _template(""),
    "the prompt closes the block it opens (thinking off)": _template("<think>\n\n</think>\n\n"),
    "the history's turns write the tag too (a header, not a block)": _template("<think>", turn_head="<think>"),
    "the prompt ends with a closing tag": _template("</answer>"),
    "a tag of no known reasoning whose closing form the template never writes": _template("<scratch>"),
    "a tag the history's turns close (a turn's own markup)": _template("<|START_OF_REPLY|>",
                                                                        turn_head="<|END_OF_REPLY|>"),
}


@pytest.mark.parametrize("behaviour", OPENED)
def test_the_block_is_read_from_the_generation_prompt(behaviour: str) -> None:
    source, block = OPENED[behaviour]
    analysis = analyze_template(source)
    assert analysis.prompt_reasoning == block
    assert analysis.to_dict()["reasoning"]["end"] == ""  # the C++ record stays the C++'s
    assert analysis.beyond_cpp()["beyond_cpp"]["prompt_reasoning"] == {"start": block.start, "end": block.end}


@pytest.mark.parametrize("behaviour", NOT_OPENED)
def test_no_block_where_the_prompt_opens_none(behaviour: str) -> None:
    assert analyze_template(NOT_OPENED[behaviour]).prompt_reasoning is None


def test_a_block_the_analysis_closes_is_the_cpp_s() -> None:
    # Qwen3-style: the history renders reasoning_content between the tags: the C++ finds both, nothing is derived
    source = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{%- if m.reasoning_content %}<think>\n"
              "{{ m.reasoning_content }}\n</think>\n\n{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}"
              "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
    analysis = analyze_template(source)
    assert analysis.reasoning.end.strip() == "</think>"
    assert analysis.prompt_reasoning is None


OLMO_LIKE = _template("<think>")


@pytest.mark.parametrize(("output", "reasoning", "content"), [
    ("I should greet.</think>Hello!", "I should greet.", "Hello!"),
    (" Look!\n\nthinking...</think>\nThe rest", " Look!\n\nthinking...", "\nThe rest"),
    ("</think>No thoughts.", "", "No thoughts."),  # an empty block
    ("Still thinking", "Still thinking", ""),  # never closed: reasoning, as a stream shows it while it is open
    ("", "", ""),
])
def test_the_output_continues_inside_the_block(output: str, reasoning: str, content: str) -> None:
    # (llama.cpp reads it all as content: a diagnostic says that this reading is not its)
    peg_tester("olmo-like", source=OLMO_LIKE).test(output).reasoning_format("auto") \
        .expect_diagnostics(["prompt_reasoning"] if output else []).expect_reasoning(reasoning, content)


def test_a_repeated_opening_tag_is_dropped_with_its_diagnostic() -> None:
    peg_tester("olmo-like", source=OLMO_LIKE).test("<think>Hm.</think>Hi").reasoning_format("auto") \
        .expect_diagnostics(["prompt_reasoning", "repeated_reasoning_start"]).expect_reasoning("Hm.", "Hi")


def test_llama_cpp_s_reading_is_the_strict_one() -> None:
    # the C++ finds no reasoning: the strict parse (llama.cpp's) keeps the whole output as content
    peg_tester("olmo-like", source=OLMO_LIKE).test("I should greet.</think>Hello!").reasoning_format("auto") \
        .strict().expect_content("I should greet.</think>Hello!")


def test_not_read_where_the_request_keeps_reasoning_in_the_content() -> None:
    peg_tester("olmo-like", source=OLMO_LIKE).test("Hm.</think>Hi").reasoning_format("none") \
        .expect_content("Hm.</think>Hi")


def test_not_read_where_this_request_s_prompt_does_not_open_it() -> None:
    source = _template("{% if enable_thinking %}<think>{% endif %}")
    peg_tester("switch", source=source).test("Hm.</think>Hi").reasoning_format("auto").enable_thinking(True) \
        .expect_diagnostics(["prompt_reasoning"]).expect_reasoning("Hm.", "Hi")
    params = generate(source, {"messages": [{"role": "user", "content": "Hi"}], "reasoning_format": "auto",
                               "enable_thinking": False})
    assert not params.generation_prompt.endswith("<think>")
    assert params.parse("Hm.</think>Hi").content == "Hm.</think>Hi"


# ERNIE 4.5's test: llama.cpp leaves `add_generation_prompt` undefined when it is off, so the assistant header and
# `<think>` are in both renders: the generation prompt is empty, the prompt ends inside the block the history's
# reasoning shows (the C++ finds it, and reads `abc</think>def` as content: the opener is not in what it parses).
ALWAYS_PROMPTED = ("{%- for m in messages %}{{ m.role }}: {% if m.reasoning_content %}<think>{{ m.reasoning_content }}"
                   "</think>{% endif %}{{ m.content }}\n{% endfor %}"
                   "{%- if add_generation_prompt is not defined or add_generation_prompt is true %}assistant: "
                   "{% if enable_thinking is false %}<think></think>{% else %}<think>{% endif %}{% endif %}")


def test_a_block_the_prompt_opens_before_the_generation_prompt() -> None:
    params = generate(ALWAYS_PROMPTED, {"messages": [{"role": "user", "content": "Hi"}], "reasoning_format": "auto"})
    assert params.generation_prompt == "" and params.prompt.endswith("assistant: <think>")
    assert params.parse("abc</think>def", strict=True).content == "abc</think>def"  # llama.cpp's reading
    tester = peg_tester("always-prompted", source=ALWAYS_PROMPTED)
    opened = ["prompt_reasoning"]
    tester.test("abc</think>def").reasoning_format("auto").expect_diagnostics(opened).expect_reasoning("abc", "def")
    tester.test("abc").reasoning_format("auto").expect_diagnostics(opened).expect_reasoning("abc")
    tester.test("<think>abc</think>def").reasoning_format("auto") \
        .expect_diagnostics([*opened, "repeated_reasoning_start"]).expect_reasoning("abc", "def")
    # thinking off: the prompt closes the block
    tester.test("abc</think>def").reasoning_format("auto").enable_thinking(False).expect_content("abc</think>def")
