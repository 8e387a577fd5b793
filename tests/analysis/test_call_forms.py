"""Python-call tool forms, derived from how a template renders an assistant's tool calls (analysis/forms.py).

The C++ analyzer reads such a render as tags and records a format whose markers hold its own needles; it parses
none of these outputs. Each test names the template behaviour the form is derived from. Every parse runs
through `peg_tester`: whole, every prefix, the incremental stream, and the lazy grammar checked by llama.cpp's
grammar engine (trigger and acceptance).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autoparser import generate
from autoparser.analysis.analyzer import analyze_template
from autoparser.analysis.model import CallForm, CallSyntax, StringValues, TemplateAnalysis
from autoparser.corpus import Corpus
from autoparser.errors import TemplateError
from autoparser.testing.peg_tester import PegTestCase, peg_tester

CORPUS = Corpus.load()

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "units": {"type": "object"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER, TIME]

# A ChatML template that renders each call as `name(key="value", ...)`, around which each case puts its markers.
_CALL = ("{{- tc.function.name }}({% for k, v in tc.function.arguments.items() %}{{ k }}={{ v | tojson }}"
         "{% if not loop.last %}, {% endif %}{% endfor %})")


def _template(open_: str, between: str, close: str) -> str:
    return ("{%- for m in messages %}<|im_start|>{{ m.role }}\n"
            "{%- if m.tool_calls %}" + open_
            + "{%- for call in m.tool_calls %}{% set tc = call %}" + _CALL
            + "{% if not loop.last %}{{ " + repr(between) + " }}{% endif %}{% endfor %}" + close
            + "{%- else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


# (template behaviour, template source, the form it implies)
TEMPLATES = {
    "a list between markers": (_template("<|tool_call_start|>[", ", ", "]<|tool_call_end|>"),
                               CallForm(CallSyntax.PYTHONIC, "<|tool_call_start|>", "<|tool_call_end|>", True, ", ")),
    "a bare list": (_template("[", ", ", "]"), CallForm(CallSyntax.PYTHONIC, "", "", True, ", ")),
    "one call per line in a section": (_template("<function_calls>", "\n", "</function_calls>"),
                                       CallForm(CallSyntax.PYTHONIC, "<function_calls>", "</function_calls>",
                                                False, "\n")),
}


@pytest.mark.parametrize("behaviour", TEMPLATES)
def test_the_form_is_read_from_the_rendered_calls(behaviour: str) -> None:
    source, form = TEMPLATES[behaviour]
    analysis = analyze_template(source)
    assert analysis.call_form == form
    assert "call_form" not in analysis.to_dict()  # the record stays the C++'s


def test_a_template_rendering_json_calls_has_no_call_form() -> None:
    assert analyze_template(CORPUS.by_name("Qwen__Qwen2.5-7B-Instruct").read_text()).call_form is None


def _case(tmp_path: Path, behaviour: str, output: str) -> PegTestCase:
    path = tmp_path / (behaviour.replace(" ", "_") + ".jinja")
    path.write_text(TEMPLATES[behaviour][0], encoding="utf-8")
    return peg_tester(path).test(output).tools(TOOLS).parallel_tool_calls(True)


CALLS = [{"name": "get_weather", "arguments": '{"city": "Paris", "days": 3, "units": {"temp": "C"}}'},
         {"name": "get_time", "arguments": "{}"}]


@pytest.mark.parametrize(("behaviour", "output"), [
    ("a list between markers",
     "Checking.<|tool_call_start|>[get_weather(city='Paris', days=3, units={'temp': 'C'}), get_time()]"
     "<|tool_call_end|>"),
    ("a bare list", 'Checking.[get_weather(city="Paris", days=3, units={"temp": "C"}), get_time()]'),
    ("one call per line in a section",
     'Checking.<function_calls>get_weather(city="Paris", days=3, units={"temp": "C"})\nget_time()'
     "</function_calls>"),
])
def test_python_calls_parse_whole_streamed_and_through_the_grammar(tmp_path: Path, behaviour: str,
                                                                    output: str) -> None:
    msg = _case(tmp_path, behaviour, output).expect({"content": "Checking.", "tool_calls": CALLS})
    assert msg.diagnostics == ()


def test_python_literals_become_json(tmp_path: Path) -> None:
    """Either quote style with escapes, True/False/None, lists and dicts: the arguments are JSON."""
    out = "[get_weather(city='It\\'s \"here\"', days=None, units={'deep': [True, False, 1.5]})]"
    _case(tmp_path, "a bare list", out).expect({"tool_calls": [
        {"name": "get_weather", "arguments": '{"city": "It\'s \\"here\\"", "days": null, '
                                             '"units": {"deep": [true, false, 1.5]}}'}]})


def test_a_bare_list_wakes_the_lazy_grammar_at_the_calls_only(tmp_path: Path) -> None:
    params = generate(TEMPLATES["a bare list"][0], {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
    assert params.grammar_lazy
    [trigger] = params.grammar_triggers
    text = "See [the docs](x). [get_weather(city='Paris')]"
    m = re.search(trigger.value, text)
    assert m is not None and text[m.start(1):].startswith("[get_weather(")
    # prose in brackets is content, not a call
    _case(tmp_path, "a bare list", "See [the docs] and (this).").expect({"content": "See [the docs] and (this)."})


# Templates that print a string value as it is: unquoted (`{{ k }}={{ v }}`, ToolACE, Llama 3.2 pythonic) or
# between quotes without escaping it (`{{ k }}="{{ v }}"`, Llama 4 pythonic, LFM2.5-VL)
_PRINTED = {
    "unquoted": ("{{ k }}={{ v }}", StringValues.BARE, "days=3"),
    "every value quoted, none escaped": ("{{ k }}=\"{{ v }}\"", StringValues.UNESCAPED, 'days="3"'),
    "strings quoted but not escaped": ("{{ k }}={{ '\"' + v + '\"' if v is string else v }}", StringValues.UNESCAPED,
                                       "days=3"),
}


def _printed_template(arg: str) -> str:
    return ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{%- if m.tool_calls %}["
            "{%- for tc in m.tool_calls %}{{ tc.function.name }}("
            "{%- for k, v in tc.function.arguments.items() %}" + arg + "{% if not loop.last %}, {% endif %}"
            "{%- endfor %}){% if not loop.last %}, {% endif %}{% endfor %}]"
            "{%- else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.mark.parametrize("behaviour", _PRINTED)
def test_string_values_printed_as_they_are_end_where_the_next_argument_or_the_call_does(behaviour: str) -> None:
    """A value the template prints without quoting or escaping it (told by a value holding both quotes) is no
    Python literal: it runs up to `, KEY=` of another argument or to the call's `)` and what follows a call
    (`, ` before the next one, `]`). Quotes and newlines inside it are its own. Other values stay literals,
    between the quotes where the template prints a number there too (`days="3"`, told by a number's render)."""
    arg, strings, days = _PRINTED[behaviour]
    source = _printed_template(arg)
    form = analyze_template(source).call_form
    assert form is not None and form.strings is strings and form.quoted_values == days.endswith('"')
    q = '"' if strings is StringValues.UNESCAPED else ""
    output = f'[get_weather(city={q}Zürich "center"\nline2{q}, {days}), get_time()]'
    peg_tester(behaviour, source=source).test(output).tools(TOOLS).parallel_tool_calls(True).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Zürich \\"center\\"\\nline2", "days": 3}'},
                        {"name": "get_time", "arguments": "{}"}]})


@pytest.mark.parametrize(("name", "strings"), [("vllm__tool_chat_template_toolace", StringValues.BARE),
                                               ("vllm__tool_chat_template_llama3.2_pythonic", StringValues.BARE),
                                               ("vllm__tool_chat_template_llama4_pythonic", StringValues.UNESCAPED),
                                               ("LiquidAI__LFM2.5-VL-450M", StringValues.UNESCAPED)])
def test_corpus_templates_that_print_string_values_as_they_are(name: str, strings: StringValues) -> None:
    form = analyze_template(CORPUS.by_name(name).read_text()).call_form
    assert form is not None and form.strings is strings


@pytest.mark.parametrize(("name", "output", "calls"), [
    # OLMo 3 Instruct: `<function_calls>` around calls written one per line
    ("allenai__Olmo-3-7B-Instruct", '<function_calls>get_weather(city="Paris")\nget_time()</function_calls>',
     [{"name": "get_weather", "arguments": '{"city": "Paris"}'}, {"name": "get_time", "arguments": "{}"}]),
    # Typhoon 2.1 (Gemma 3): a bare `[...]` list (with thinking off: on, the generation prompt opens `<think>`)
    ("typhoon-ai__typhoon2.1-gemma3-4b", '[get_weather(city="Paris", days=2)]',
     [{"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}]),
    # LFM2.5-VL: the list between `<|tool_call_start|>` and `<|tool_call_end|>` (no LFM2 handler detects it)
    ("LiquidAI__LFM2.5-VL-450M", "<|tool_call_start|>[get_weather(city='Paris')]<|tool_call_end|>",
     [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]),
])
def test_corpus_templates_that_render_python_calls(name: str, output: str, calls: list[dict[str, Any]]) -> None:
    entry = CORPUS.by_name(name)
    assert analyze_template(entry.read_text()).call_form is not None
    test = peg_tester(entry.path).test(output).tools(TOOLS).parallel_tool_calls(True).reasoning_format("auto")
    test.enable_thinking(False).expect({"tool_calls": calls})


@pytest.mark.parametrize("name", ["DeepHat__DeepHat-V1-7B"])
def test_a_bare_json_array_of_calls(name: str) -> None:
    """DeepHat renders its calls as a bare JSON array, `[{"name": ..., "arguments": {...}}]`: the C++ record
    says so (`tools_array_wrapped`, no marker), but llama.cpp's content stops at the first `{` (inside the
    array) and never reads a call. The content stops at the array, and a pattern trigger wakes the grammar."""
    entry = CORPUS.by_name(name)
    out = 'See [1]. [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]'
    test = peg_tester(entry.path).test(out).tools(TOOLS).parallel_tool_calls(True).strict()
    test.expect({"content": "See [1]. ", "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'},
                                                         {"name": "get_time", "arguments": "{}"}]})


@pytest.mark.parametrize(("behaviour", "output", "bad"), [
    ("a bare list", "[bad(x=b'z'), get_time()]", "bad(x=b'z')"),
    ("one call per line in a section", "<function_calls>get_time()\ncalc(x=[1, (2, 3)])</function_calls>",
     "calc(x=[1, (2, 3)])"),
])
def test_a_call_that_cannot_be_read_beside_readable_ones_is_content(tmp_path: Path, behaviour: str, output: str,
                                                                      bad: str) -> None:
    """A list with a call the request does not declare, or a value no Python literal reads (`b'z'`): the
    readable calls are kept, the other's text is content, with a diagnostic (vLLM keeps the good calls too)."""
    msg = _case(tmp_path, behaviour, output).expect_diagnostics(["unreadable_call"]).expect(
        {"content": bad, "tool_calls": [{"name": "get_time", "arguments": "{}"}]})
    assert msg.diagnostics[0].raw == bad


@pytest.mark.parametrize(("name", "output"), [
    # prints `"arguments": ` + the arguments `|string`: an object renders as a Python dict
    ("ServiceNow-AI__Apriel-1.6-15b-Thinker",
     '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'),
    # prints the arguments only when they are a string: an object renders as nothing
    ("NightPrince__Muslim-6B-PRO", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
])
def test_a_template_that_prints_string_arguments_is_analysed_with_them(name: str, output: str) -> None:
    """llama.cpp renders the analysis' calls with object arguments; these templates then render no valid JSON
    and it gives up ("rendered tool call is not valid JSON"). Rendered again with the arguments as JSON strings
    (as OpenAI-style requests give them), the calls analyse, and the analysis says which rendering it used."""
    entry = CORPUS.by_name(name)
    analysis = analyze_template(entry.read_text())
    assert analysis.string_arguments and analysis.tools.format.mode.value == "JSON_NATIVE"
    peg_tester(entry.path).test(output).tools(TOOLS).enable_thinking(False).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


def test_the_string_rendering_is_tried_only_where_the_object_one_fails() -> None:
    assert not analyze_template(CORPUS.by_name("Qwen__Qwen2.5-7B-Instruct").read_text()).string_arguments


def test_a_history_call_renders_as_the_template_was_analysed() -> None:
    """Apriel prints its calls' arguments as they come: given as objects (as llama.cpp passes them, its caps
    saying it reads object arguments), they render as a Python dict; the prompt passes them as JSON text."""
    call = {"type": "function", "id": "c1", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    prompt = generate(CORPUS.by_name("ServiceNow-AI__Apriel-1.6-15b-Thinker").read_text(),
                      {"messages": messages, "tools": TOOLS}).prompt
    assert '[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "c1"}]' in prompt


# --- templates that describe a call format but never render a call ----------------------------------------------

_TURNS = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
_DESCRIBES = ("{%- if tools %}<|im_start|>system\nYou may call these tools: {{ tools | tojson }}\nTo call one, write "
              "<tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>.<|im_end|>\n{% endif %}" + _TURNS)
_RENDERS = "{%- if tools %}{{ tools | tojson }}{% endif %}" + TEMPLATES["a bare list"][0]


@pytest.mark.parametrize(("behaviour", "source", "described_only"), [
    ("lists the tools and describes a call; renders an assistant's calls as its (empty) content", _DESCRIBES, True),
    ("knows no tools", _TURNS, False),
    ("lists the tools and renders the calls", _RENDERS, False),
])
def test_a_template_that_only_describes_calls_has_a_status_of_its_own(behaviour: str, source: str,
                                                                      described_only: bool) -> None:
    analysis = analyze_template(source)
    assert analysis.tool_calls_described_only is described_only
    assert (analysis.beyond_cpp().get("beyond_cpp", {}).get("tool_calls") == "described_only") is described_only
    if described_only:  # the C++ record stays as it is: no tool format, as for a template that knows no tools
        assert analysis.tools.to_dict() == analyze_template(_TURNS).tools.to_dict()


def test_corpus_templates_that_only_describe_calls() -> None:
    # Granite 3.1 lists the tools and tells the model to answer with `<|tool_call|>` followed by a JSON list;
    # an assistant message with calls renders as its (empty) content
    analysis = analyze_template(CORPUS.by_name("ibm-granite__granite-3.1-8b-instruct").path.read_text())
    assert analysis.tool_calls_described_only
    assert analysis.beyond_cpp()["beyond_cpp"]["tool_calls"] == "described_only"


# --- templates llama.cpp's jinja cannot render at all ---------------------------------------------------------------

# Roles checked for alternation over the messages that are neither tool results nor calls: jinja2 reads
# `selectattr("tool_calls", "undefined")` as attribute `tool_calls`, test `undefined`; llama.cpp's jinja as the
# test `tool_calls` (unknown), and fails every conversation.
_CPP_UNRENDERABLE = (
    '{%- for m in messages | rejectattr("role", "equalto", "tool") | selectattr("tool_calls", "undefined") %}'
    '{%- if (m.role == "user") != (loop.index0 % 2 == 0) %}{{ raise_exception("roles must alternate") }}{% endif %}'
    "{%- endfor %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}[INST]{% if tools %}[TOOLS]{{ tools | tojson }}[/TOOLS]"
    "{% endif %}{{ m.content }}[/INST]{%- elif m.tool_calls %}[TOOL_CALLS]"
    "{{ m.tool_calls | map(attribute='function') | list | tojson }}</s>"
    "{%- elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]"
    "{%- else %}{{ m.content }}</s>{%- endif %}{%- endfor %}"
)


def test_a_template_only_transformers_renders_is_analysed_as_transformers_renders_it() -> None:
    """The C++ records an empty analysis and refuses every request; rendered as transformers renders it, the
    template shows its calls (`[TOOL_CALLS]` + a JSON list): that reading is the analysis' beyond the C++ one,
    and the parser's, while the record stays the C++'s."""
    analysis = analyze_template(_CPP_UNRENDERABLE, strict=True)
    # the C++'s record: empty but for what its probes found
    assert analysis.to_dict() == TemplateAnalysis(caps=analysis.caps).to_dict()
    assert not analysis.caps.supports_tool_calls
    reading = analysis.transformers_reading
    assert reading is not None and analysis.effective is reading
    assert reading.caps.supports_tool_calls and reading.tools.format.section_start.strip() == "[TOOL_CALLS]"
    shown = analysis.beyond_cpp()["beyond_cpp"]["transformers_reading"]
    assert shown["tools"]["format"]["mode"] == "JSON_NATIVE" and shown["caps"]["supports_tool_calls"]
    peg_tester("cpp-unrenderable", source=_CPP_UNRENDERABLE).test(
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]').tools(TOOLS).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


def test_the_transformers_rendering_is_tried_only_where_the_cpp_one_renders_nothing() -> None:
    assert analyze_template(CORPUS.by_name("Qwen__Qwen2.5-7B-Instruct").read_text()).transformers_reading is None
    # no calls in either reading: nothing beyond
    assert analyze_template(CORPUS.by_name("ibm-granite__granite-3.1-8b-instruct").read_text()).transformers_reading \
        is None
    # a template that fails in both readings keeps the C++'s empty analysis (strict: the C++'s error)
    broken = "{{ raise_exception('no') }}"
    assert analyze_template(broken).transformers_reading is None
    with pytest.raises(TemplateError, match="fails on every analysis conversation"):
        analyze_template(broken, strict=True)


def test_corpus_templates_only_transformers_renders() -> None:
    # vLLM's Mistral template (`selectattr("tool_calls", "undefined")`, no conversation renders in the C++):
    # `[TOOL_CALLS] [{"name", "arguments", "id"}]`, ids of 9 characters
    entry = CORPUS.by_name("vllm__tool_chat_template_mistral")
    assert analyze_template(entry.read_text()).transformers_reading is not None
    peg_tester(entry.path).test(
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}]').tools(
        TOOLS).expect({"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "abcdefghi"}]})


@pytest.mark.parametrize("name", ["vllm__tool_chat_template_llama3.2_json", "axolotl__llama3_2_vision"])
def test_a_template_whose_calls_only_transformers_renders(name: str) -> None:
    """Llama 3.2's templates loop over each message's content to find images (`for content in
    message['content']`), which llama.cpp's jinja refuses for a string: every probe with string content fails,
    so the C++ finds no calls (its record keeps it so). Rendered as transformers renders them, they write a call
    as a bare JSON object, `{"name": ..., "parameters": {...}}`."""
    entry = CORPUS.by_name(name)
    analysis = analyze_template(entry.read_text())
    assert not analysis.caps.supports_tool_calls and analysis.tools.format.mode.value == "NONE"
    reading = analysis.transformers_reading
    assert reading is not None and reading.tools.format.args_field == "parameters"
    peg_tester(entry.path).test('{"name": "get_weather", "parameters": {"city": "Paris"}}').tools(TOOLS).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


# Concatenates a call's arguments as they come (as DeepSeek R1's template does): llama.cpp passes objects (its
# probe sees them read), which `+` turns into a Python dict; requests give the JSON text, printed as it is.
_ARGS_AS_THEY_COME = (
    "{%- for m in messages %}{%- if m.role == 'user' %}<|user|>{{ m.content }}{%- elif m.tool_calls %}<|calls|>"
    "{%- for tc in m.tool_calls %}{{ '<|call|>' + tc.function.name + '\\n```json\\n' + tc.function.arguments"
    " + '\\n```<|end_call|>' }}{%- endfor %}<|end_calls|>{%- elif m.role == 'tool' %}<|result|>{{ m.content }}"
    "{%- else %}<|assistant|>{{ m.content }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_arguments_printed_as_they_come_are_read_as_requests_give_them() -> None:
    """The C++ record keeps the tags its Python-dict rendering gives (markers holding its own argument names:
    no parser reads a call); the transformers reading renders the arguments' JSON text and reads a marked name
    before JSON arguments, which is what the parser is made from."""
    analysis = analyze_template(_ARGS_AS_THEY_COME)
    assert "AA_ARG_FST_AA" in json.dumps(analysis.tools.to_dict())  # the C++'s reading
    reading = analysis.transformers_reading
    assert reading is not None and reading.string_arguments
    assert reading.tools.format.mode.value == "TAG_WITH_JSON" and "<|call|>" in (
        reading.tools.format.per_call_start + reading.tools.function.name_prefix)
    peg_tester("args-as-they-come", source=_ARGS_AS_THEY_COME).test(
        '<|calls|><|call|>get_weather\n```json\n{"city": "Paris"}\n```<|end_call|><|end_calls|>').tools(TOOLS).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


def test_deepseek_r1_calls_are_read_as_requests_give_them() -> None:
    # DeepSeek R1's template prints `tool['function']['arguments']` as it comes, inside ```json fences
    entry = CORPUS.by_name("unsloth__r1-1776")
    assert analyze_template(entry.read_text()).transformers_reading is not None
    output = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
              '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    peg_tester(entry.path).test(output).tools(TOOLS).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})


def test_calls_the_tag_reading_takes_apart_wrongly_are_read_from_where_the_needles_sit() -> None:
    """vLLM's FunctionGemma template writes `<start_function_call>call:NAME{KEY:<escape>VALUE<escape>,...}
    <end_function_call>`, one call after another. llama.cpp's tag reading leaves its own names in the markers
    (`{AA_ARG_FST_AA:` as the name's suffix) and parses no call; read again from where the name, the keys and
    the values sit in one rendered call, the markers are the template's, and the arguments are joined by `,`."""
    entry = CORPUS.by_name("vllm__tool_chat_template_functiongemma")
    analysis = analyze_template(entry.read_text())
    assert "AA_ARG_FST_AA" in analysis.tools.function.name_suffix  # the C++'s record
    reading = analysis.transformers_reading
    assert reading is not None and reading.argument_separator == ","
    assert (reading.tools.format.per_call_start, reading.tools.function.name_suffix, reading.tools.arguments.name_suffix,
            reading.tools.arguments.value_suffix, reading.tools.function.close) == (
        "<start_function_call>call:", "{", ":<escape>", "<escape>", "}<end_function_call>")
    search = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}}, "required": ["query"]}}}
    output = ("<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
              "<start_function_call>call:search{query:<escape>llama.cpp<escape>,max_results:<escape>3<escape>}"
              "<end_function_call>")
    peg_tester(entry.path).test(output).tools([WEATHER, search]).parallel_tool_calls(True).expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        {"name": "search", "arguments": '{"query": "llama.cpp", "max_results": 3}'}]})


@pytest.mark.parametrize("name", ["unsloth__functiongemma-270m-it", "distil-labs__distil-home-assistant-functiongemma"])
def test_a_template_refusing_a_tool_result_without_name_is_probed_with_one(name: str) -> None:
    """These FunctionGemma templates raise on a tool result without `name` ("Invalid tool response: 'name' must
    be provided."), which llama.cpp's probe conversation has: the C++ finds no tool support. transformers
    requests carry the name, and so does the probe of the transformers reading. The template also writes
    `<start_function_response>` after the last call (the model hands over to the tool there): it ends the
    calls, and a server that stopped on it leaves it out."""
    entry = CORPUS.by_name(name)
    analysis = analyze_template(entry.read_text())
    assert not analysis.caps.supports_tool_calls  # the C++'s record
    reading = analysis.transformers_reading
    assert reading is not None and reading.caps.supports_tool_calls
    assert (reading.tools.format.per_call_start, reading.tools.format.section_end) == (
        "<start_function_call>call:", "<start_function_response>")
    call = "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
    for output in (call + "<start_function_response>", call):
        peg_tester(entry.path).test(output).tools(TOOLS).expect(
            {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})
