"""A call opener the template's tool instructions spell otherwise than its calls render it (analysis/tools.py
`instructed_opener`, beyond the C++), and markers models write on one line where the template breaks them.

Step3's system prompt teaches the model `<｜tool_calls_begin｜>\\n<｜tool_call_begin｜>\\nfunction<｜tool_sep｜>...`,
the opener its vocabulary has as one token; the history rendering spells it `<｜tool_call_begin>｜>` (sic), and that
is the spelling the C++'s diff derives (per_call_start `<｜tool_call_begin>`, name prefix `｜>\\nfunction...`). A
model writes what it was trained on, as SGLang's and vLLM's Step3 tests show: the relaxed parser reads the
instructed spelling too, and says so (`call_opener_spelling`). llama.cpp's strict parse and its grammar keep the
rendered one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoparser.corpus import Corpus
from autoparser.params.generator import cached_analysis
from autoparser.testing.peg_tester import peg_tester

CORPUS = Corpus.load()
STEP3 = CORPUS.by_name("stepfun-ai__step3")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"user_id": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["user_id"]}}}]
INVOKE = ('<steptml:invoke name="lookup"><steptml:parameter name="user_id">abc</steptml:parameter>'
          '<steptml:parameter name="count">42</steptml:parameter></steptml:invoke>')
LOOKUP = {"name": "lookup", "arguments": {"user_id": "abc", "count": 42}}


def test_step3s_instructions_spell_the_opener_as_its_vocabulary_does() -> None:
    analysis = cached_analysis(STEP3.read_text())
    assert (analysis.tools.format.per_call_start, analysis.tools.function.name_prefix[:3]) \
        == ("<｜tool_call_begin>", "｜>\n")
    assert analysis.instructed_opener == ("<｜tool_call_begin>", "<｜tool_call_begin")
    assert analysis.beyond_cpp()["beyond_cpp"]["instructed_opener"] == ["<｜tool_call_begin>", "<｜tool_call_begin"]


def test_a_template_whose_instructions_show_its_own_opener_has_none() -> None:
    # (Hermes's instructions show `<tool_call>` as its calls render it)
    assert cached_analysis(CORPUS.by_name("NousResearch__Hermes-3-Llama-3.1-8B").read_text()).instructed_opener \
        is None


@pytest.mark.parametrize("newline", ["\n", ""], ids=["as-instructed", "on-one-line"])
def test_the_vocabularys_opener_is_read_with_a_diagnostic(newline: str) -> None:
    # SGLang's step3 detector tests write the calls on one line (test_step3_detector.py, sgl-project/sglang)
    output = (f"</think><｜tool_calls_begin｜>{newline}<｜tool_call_begin｜>{newline}function<｜tool_sep｜>{INVOKE}"
              f"<｜tool_call_end｜>{newline}<｜tool_calls_end｜>")
    kinds = ["prompt_reasoning", *(["call_opener_spelling"] * (2 if not newline else 1))]
    peg_tester(STEP3.path).test(output).tools(TOOLS).grammar_check(False).expect_diagnostics(kinds).expect(
        {"tool_calls": [LOOKUP]})


def test_the_rendered_opener_on_one_line_is_read_without_a_spelling_repair() -> None:
    output = (f"</think><｜tool_calls_begin｜>\n<｜tool_call_begin>｜>function<｜tool_sep｜>{INVOKE}"
              "<｜tool_call_end｜>\n<｜tool_calls_end｜>")
    peg_tester(STEP3.path).test(output).tools(TOOLS).grammar_check(False).expect_diagnostics(
        ["prompt_reasoning"]).expect({"tool_calls": [LOOKUP]})


def test_the_strict_parse_keeps_the_rendered_spelling() -> None:
    output = (f"</think><｜tool_calls_begin｜>\n<｜tool_call_begin｜>\nfunction<｜tool_sep｜>{INVOKE}"
              "<｜tool_call_end｜>\n<｜tool_calls_end｜>")
    with pytest.raises(AssertionError, match="whole parse"):
        peg_tester(STEP3.path).test(output).tools(TOOLS).grammar_check(False).strict().expect({"tool_calls": [LOOKUP]})


# A template of our own (JSON arguments after a marked name): its instructions teach `<|call_open|>`, its history
# writes `<|call-open|>`.
OWN = """{%- if tools %}<|system|>You can call tools. Write each call as
<|calls|>
<|call_open|>fn<|name|>TOOL_NAME
{"arg": "value"}<|call_close|>
<|calls_end|>
Tools: {{ tools | tojson }}<|end|>
{% endif %}
{%- for m in messages %}<|{{ m.role }}|>
{%- if m.content %}{{ m.content }}{% endif %}
{%- if m.tool_calls %}<|calls|>
{% for c in m.tool_calls %}<|call-open|>fn<|name|>{{ c.function.name }}
{{ c.function.arguments | tojson }}<|call_close|>
{% endfor %}<|calls_end|>{% endif %}<|end|>
{% endfor %}
{%- if add_generation_prompt %}<|assistant|>{% endif %}
"""
WEATHER_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
WEATHER = {"name": "get_weather", "arguments": {"city": "Paris"}}


@pytest.fixture
def own(tmp_path: Path) -> Path:
    path = tmp_path / "own.jinja"
    path.write_text(OWN)
    return path


def test_another_templates_instructed_opener(own: Path) -> None:
    assert cached_analysis(OWN).instructed_opener == ("<|call-open|>", "<|call_open|>")
    rendered = '<|calls|>\n<|call-open|>fn<|name|>get_weather\n{"city": "Paris"}<|call_close|>\n<|calls_end|>'
    peg_tester(own).test(rendered).tools(WEATHER_TOOLS).strict().expect({"tool_calls": [WEATHER]})
    instructed = rendered.replace("call-open", "call_open")
    peg_tester(own).test(instructed).tools(WEATHER_TOOLS).grammar_check(False).expect_diagnostics(
        ["call_opener_spelling"]).expect({"tool_calls": [WEATHER]})
