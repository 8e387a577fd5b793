"""Each recovery kind on a realistic malformed output, in each tool format it applies to.

Every case runs through `peg_tester`: the whole parse gives the intended message and exactly the listed
repairs, every prefix re-parsed and the incremental stream give the same message through append-only deltas.
Each also checks that no word of the output is lost (testing/recovery.py `unaccounted`), and that the strict parse
(llama.cpp's) still rejects or misreads the output, so that the case tests recovery and not the format.

The templates, and the template behaviour each relies on:
- JSON calls: Qwen2.5 renders each call as `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>` and
  shows no reasoning; Mellum2 renders the same calls and a `<think>...</think>` block (the analyzer derives
  both, chat/generic.py).
- tagged calls, analyzer-derived: Seed-OSS renders `<seed:tool_call>\\n<function=NAME>\\n<parameter=K>V</parameter>`,
  GLM-4.7 `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.
- tagged calls, hand-written format: Qwen3.5 (chat/handlers/qwen3_coder.py) renders
  `<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n</function>` with `\\n` around every value.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoparser import generate
from autoparser.chat.stream import apply_deltas
from autoparser.corpus import Corpus
from autoparser.errors import ParseError
from autoparser.peg.nodes import C_SPACE
from autoparser.template.render import ChatTemplate
from autoparser.testing.peg_tester import PegTestCase, peg_tester
from autoparser.testing.recovery import markup_spans, unaccounted
from autoparser.types import ChatMessage

CORPUS = Corpus.load()

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}
BASH = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
SET_MODE = {"type": "function", "function": {"name": "set_mode", "parameters": {
    "type": "object", "properties": {"settings": {"type": "object"}}, "required": ["settings"]}}}
TOOLS = [WEATHER, BASH, SET_MODE]

QWEN25 = "Qwen__Qwen2.5-7B-Instruct"
MELLUM = "JetBrains__Mellum2-12B-A2.5B-Instruct"
SEED = "ByteDance-Seed__Seed-OSS-36B-Instruct"
GLM = "zai-org__GLM-4.7-Flash"
QWEN35 = "llama.cpp__Qwen3.5-4B"
LLAMA32 = "meta-llama__Llama-3.2-3B-Instruct"


def case(template: str, output: str, **request: Any) -> PegTestCase:
    tester = peg_tester(CORPUS.by_name(template).path)
    test = tester.test(output).tools(request.pop("tools", TOOLS)).parallel_tool_calls(True).reasoning_format("auto")
    for key, value in request.items():
        test = getattr(test, key)(value)
    return test


# Whitespace after an output (a newline, a blank line, spaces), which no repair should notice.
TRAILING_SPACE = ("\n", "\n\n", "  \n")


def check(test: PegTestCase, message: dict[str, Any], repairs: list[str], *, space_after: bool = True) -> None:
    """The intended message with exactly `repairs`, whole and streamed, and with whitespace after the output;
    no text lost; the strict parse fails or reads something else. (`space_after=False`: the output ends inside a
    value, where whitespace after it would be the value's.)"""
    got = test.expect_diagnostics(repairs).expect(message)
    for d in got.diagnostics:  # each message says where it applies, as its position does
        assert f" at {d.position}" in d.message, d
    request = dict(test.request, messages=[{"role": "user", "content": "Hey there!"}], now=test.tester.now)
    params = generate(test.tester.source, request)
    assert params.recovery is not None
    lost = unaccounted(test.input, got, markup_spans(params, test.input, got))
    assert not lost, f"text lost: {dict(lost)}"
    for space in TRAILING_SPACE if space_after else ():  # (a model may end its output with whitespace: the same repairs, no others)
        spaced = params.parse(test.input + space)
        assert sorted(d.kind for d in spaced.diagnostics) == sorted(repairs), (space, spaced.diagnostics)
        assert (spaced.reasoning_content, spaced.tool_calls) == (got.reasoning_content, got.tool_calls), space
        assert spaced.content.rstrip(C_SPACE) == got.content.rstrip(C_SPACE), space
    try:
        strict = params.parse(test.input, strict=True)
    except ParseError:
        return
    assert strict.to_dict() != got.to_dict(), "the strict parse reads this output already"


def call(name: str, arguments: str) -> dict[str, str]:
    return {"name": name, "arguments": arguments}


PARIS = call("get_weather", '{"city": "Paris"}')


# --- calls ---------------------------------------------------------------------------------------------------

def test_last_closers_missing_json() -> None:
    check(case(QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'),
          {"tool_calls": [PARIS]}, ["missing_closer"])


def test_last_argument_closer_missing_tagged_is_no_longer_an_empty_message() -> None:
    # the issue's example: the last `</parameter>` missing before `</function>`
    out = '<tool_call>\n<function=set_mode>\n<parameter=settings>\n{"mode": "cool"}\n</function>\n</tool_call>'
    check(case(QWEN35, out), {"tool_calls": [call("set_mode", '{"settings": {"mode": "cool"}}')]},
          ["missing_argument_closer"])


@pytest.mark.parametrize(("template", "output", "request_"), [
    # Seed-OSS writes `<parameter=K>V</parameter>` (no newlines around the value)
    (SEED, "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris\n<parameter=days>3</parameter>\n"
           "</function>\n</seed:tool_call>", {"enable_thinking": False}),
    # GLM-4.7 writes `<arg_key>K</arg_key><arg_value>V</arg_value>`
    (GLM, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris<arg_key>days</arg_key><arg_value>3"
          "</arg_value></tool_call>", {"enable_thinking": False}),
    # Qwen3.5 writes `<parameter=K>\nV\n</parameter>`
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n</parameter>\n"
             "</function>\n</tool_call>", {}),
])
def test_argument_closer_missing_before_the_next_argument(template: str, output: str, request_: dict[str, Any]) -> None:
    # (found by vLLM's Qwen3-Coder test `test_extract_tool_calls_missing_closing_parameter_tag`: the value ran on
    # into the next argument, which was lost)
    check(case(template, output, **request_), {"tool_calls": [call("get_weather", '{"city": "Paris", "days": 3}')]},
          ["missing_argument_closer"])


@pytest.mark.parametrize(("template", "output", "request_", "repair"), [
    # a GLM-5.2 output quoted in vLLM issue #49248 (sampled tokens): the value's `<arg_value>` left out
    ("zai-org__GLM-5.2", "<tool_call>get_weather<arg_key>city</arg_key>Paris</arg_value></tool_call>",
     {"enable_thinking": False}, "missing_value_opener"),
    # GLM-4.6 writes the markers on lines of their own: `</arg_key>\n<arg_value>`
    ("zai-org__GLM-4.6", "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis</arg_value>\n</tool_call>",
     {"enable_thinking": False}, "missing_value_opener"),
    # a GLM-4.7 output quoted in vLLM PR #47190: the first key's `<arg_key>` left out, the name and key joined
    (GLM, "<tool_call>get_weathercity</arg_key><arg_value>Paris</arg_value></tool_call>",
     {"enable_thinking": False}, "missing_argument_opener"),
])
def test_a_key_or_value_opener_left_out_between_two_markers(template: str, output: str, request_: dict[str, Any],
                                                              repair: str) -> None:
    """A template that writes a key between its own markers, then the value's opener (`<arg_key>K</arg_key>
    <arg_value>V</arg_value>`): where the model leaves out the key's opener or the value's, the key's closer still
    says where the key ends."""
    check(case(template, output, **request_), {"tool_calls": [PARIS]}, [repair])


@pytest.mark.parametrize(("template", "output"), [
    (GLM, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>days</arg_key><arg_value>3"
          "</arg_value></tool_call>"),
    # (GLM-4.6 and Ling 3, whose handler is its own, write the markers on lines of their own)
    ("zai-org__GLM-4.6", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\ndays"
                         "</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"),
    ("llama.cpp__inclusionai-ling-3.0-flash", "<tool_call>get_weather<arg_key>city</arg_key>\n<arg_value>Paris"
                                              "</arg_value>\ndays</arg_key>\n<arg_value>3</arg_value></tool_call>"),
])
def test_a_later_keys_opener_left_out(template: str, output: str) -> None:
    """The key's opener left out before a later argument (`Paris</arg_value>days</arg_key>`): the first value ends
    at its closer, where a declared argument's name and the key's closer follow, and does not hold the next
    argument (a value may hold its closer's text only where no argument follows it); both arguments read."""
    check(case(template, output, enable_thinking=False),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "days": 3}')]}, ["missing_argument_opener"])


WRITE_FILE = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}


@pytest.mark.parametrize("template", [QWEN35, "Qwen__Qwen3-Coder-30B-A3B-Instruct"])
def test_a_value_holding_the_calls_closers_before_its_own_closer(template: str) -> None:
    """A file's content holding `</function>` and `</tool_call>` before the value's `</parameter>` (a Qwen3.5
    output quoted in jundot/omlx PR #2588). The whole parse reads the value up to its closer; a stream showed the
    call at the first `</tool_call>` (the value's closer missing there: `missing_argument_closer`) and could not
    take it back. The call waits until the output ends."""
    content = "<function=demo>\n</function>\n</tool_call>"
    out = (f"<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.xml\n</parameter>\n<parameter=content>\n"
           f"{content}\n</parameter>\n</function>\n</tool_call>")
    args = json.dumps({"path": "notes.xml", "content": content})
    msg = case(template, out, tools=[WRITE_FILE]).expect({"tool_calls": [call("write_file", args)]})
    assert not msg.diagnostics


def test_output_ending_inside_the_arguments_gives_valid_json() -> None:
    check(case(QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'),
          {"tool_calls": [PARIS | {"arguments": '{"city": "Pa"}'}]}, ["missing_closer"], space_after=False)


def test_first_opener_missing_json() -> None:
    check(case(QWEN25, 'Sure.\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
          {"content": "Sure.\n", "tool_calls": [PARIS]}, ["missing_call_opener"])


@pytest.mark.parametrize(("template", "output", "content"), [
    # Qwen2.5 writes `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`
    (QWEN25, 'Sure.\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n</tool_call>', "Sure.\n"),
    # Mistral Nemo writes `[TOOL_CALLS][{"name": ..., "arguments": ...}]`
    ("mistralai__Mistral-Nemo-Instruct-2407",
     'Sure. [\n  {\n    "name": "get_weather",\n    "arguments": {"city": "Paris"}\n  }\n]', "Sure. "),
])
def test_first_opener_missing_json_pretty_printed(template: str, output: str, content: str) -> None:
    # a call without its opener, its JSON pretty-printed: it was read only where it began `{"name"` (found by vLLM's
    # Granite tests, `<tool_call> [{\n  "name": ...`), and was content with no diagnostic
    check(case(template, output), {"content": content, "tool_calls": [PARIS]}, ["missing_call_opener"])


def test_first_opener_missing_tagged() -> None:
    # Qwen3.5's generation prompt opens `<think>\n`: the call without its `<tool_call>` line also ends it
    out = 'Checking.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>'
    check(case(QWEN35, out), {"reasoning_content": "Checking.\n",
                              "tool_calls": [call("get_weather", '{"city": "Paris"}')]},
          ["reasoning_ended_by_call", "missing_call_opener"])
    out = 'Checking.\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>'
    check(case(SEED, out, enable_thinking=False),
          {"content": "Checking.\n", "tool_calls": [call("get_weather", '{"city": "Paris"}')]},
          ["missing_call_opener"])


@pytest.mark.parametrize(("template", "output", "message", "request_"), [
    # Gemma 4 writes `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`: without `<|tool_call>` a call begins
    # `call:NAME{`
    ("google__gemma-4-31B-it", 'Sure.call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
     {"content": "Sure.", "tool_calls": [PARIS]}, {"enable_thinking": False}),
    # Kimi K2 writes `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}`, the call id
    # holding the name
    ("moonshotai__Kimi-K2-Instruct", 'Sure.functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}'
     '<|tool_call_end|>', {"content": "Sure.", "tool_calls": [PARIS | {"id": "functions.get_weather:0"}]}, {}),
    # DeepSeek V3.2 opens its calls with `<｜DSML｜function_calls>`; its thinking, open in the generation
    # prompt, ends where the calls begin
    ("deepseek-ai__DeepSeek-V3.2", 'Let me look.\n\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter '
     'name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
     {"reasoning_content": "Let me look.", "tool_calls": [PARIS]}, {"enable_thinking": True}),
    # LFM2.5 writes `<|tool_call_start|>[NAME(k="v")]<|tool_call_end|>`
    ("llama.cpp__LFM2.5-8B-A1B", 'Sure.[get_weather(city="Paris")]<|tool_call_end|>',
     {"content": "Sure.", "tool_calls": [PARIS]}, {"enable_thinking": False}),
    # Ling 3 writes `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`
    ("llama.cpp__inclusionai-ling-3.0-flash", 'Sure.\nget_weather\n<arg_key>city</arg_key>\n<arg_value>Paris'
     '</arg_value>\n</tool_call>', {"content": "Sure.\n", "tool_calls": [PARIS]}, {"enable_thinking": False}),
])
def test_first_opener_missing_in_hand_written_formats(template: str, output: str, message: dict[str, Any],
                                                      request_: dict[str, Any]) -> None:
    # each format's relaxed parser lets the first call's opener be left out (recovery/relax.py `calls_opened`,
    # `content_until_calls`): content stops where the rest of a call follows
    check(case(template, output, **request_), message, ["missing_call_opener"])


@pytest.mark.parametrize(("template", "output", "request_"), [
    # Qwen 3.6 (a derived tagged format), as ggml-org/llama.cpp#24807 and mostlygeek/llama-swap#856 quote it
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</parameter>\n"
             "</function>\n</tool_call>", {}),
    # the hand-written formats: DeepSeek V3.2's DSML, Ling 3's, Muse Glimmer's ATEM XML
    ("deepseek-ai__DeepSeek-V3.2", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter '
     'name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
     '</｜DSML｜function_calls>', {"enable_thinking": False}),
    ("llama.cpp__inclusionai-ling-3.0-flash", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
     "</arg_value>\n</arg_value>\n</tool_call>", {"enable_thinking": False}),
    ("llama.cpp__muse-glimmer", ' to=get_weather<|message|><atem:function_calls><atem:invoke name="get_weather">'
     '<atem:parameter name="city">Paris</atem:parameter>\n</atem:parameter></atem:invoke></atem:function_calls>',
     {}),
])
def test_a_values_closer_written_twice(template: str, output: str, request_: dict[str, Any]) -> None:
    """The second closer closes nothing: markup, reported (`stray_closer`), the call read."""
    check(case(template, output, **request_), {"tool_calls": [PARIS]}, ["stray_closer"])


def test_call_opener_spelled_without_equals() -> None:
    # the issue's `<function bash>`: the template's name prefix `<function=` written with a space
    out = '<tool_call>\n<function bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>'
    check(case(QWEN35, out), {"tool_calls": [call("bash", '{"command": "ls"}')]}, ["call_opener_spelling"])


def test_tagged_values_without_the_templates_newlines() -> None:
    # Qwen3.5 writes `>\nVALUE\n</parameter>`; Seed-OSS writes `>VALUE</parameter>`
    out = '<tool_call>\n<function=bash>\n<parameter=command>/tmp/x y</parameter>\n</function>\n</tool_call>'
    check(case(QWEN35, out), {"tool_calls": [call("bash", '{"command": "/tmp/x y"}')]}, ["argument_whitespace"])
    # whitespace beyond the template's stays in the value, as the strict parse keeps it
    out = ('<seed:tool_call>\n<function=bash>\n<parameter=command>\n/tmp/x y\n</parameter>\n</function>\n'
           '</seed:tool_call>')
    msg = case(SEED, out, enable_thinking=False).expect({"tool_calls": [call("bash", '{"command": "\\n/tmp/x y\\n"}')]})
    assert not msg.diagnostics


def test_last_argument_closer_missing_tagged_analyzer_derived() -> None:
    out = ('<seed:tool_call>\n<function=bash>\n<parameter=command>ls -la\n</function>\n</seed:tool_call>')
    check(case(SEED, out, enable_thinking=False), {"tool_calls": [call("bash", '{"command": "ls -la"}')]},
          ["missing_argument_closer"])


def test_tagged_arguments_in_any_order() -> None:
    tools = [{"type": "function", "function": {"name": "copy", "parameters": {
        "type": "object", "properties": {"src": {"type": "string"}, "dst": {"type": "string"},
                                         "force": {"type": "boolean"}}, "required": ["src", "dst"]}}}]
    out = ('<tool_call>copy<arg_key>force</arg_key><arg_value>true</arg_value><arg_key>dst</arg_key>'
           '<arg_value>b</arg_value><arg_key>src</arg_key><arg_value>a</arg_value></tool_call>')
    test = case(GLM, out, tools=tools, enable_thinking=False)
    test.grammar_check(False)  # the grammar keeps the template's order: only an unconstrained model writes this
    check(test, {"tool_calls": [call("copy", '{"force": true, "dst": "b", "src": "a"}')]}, [])


def test_missing_required_argument_is_reported() -> None:
    out = '<tool_call>\n<function=set_mode>\n</function>\n</tool_call>'
    check(case(QWEN35, out), {"tool_calls": [call("set_mode", "{}")]}, ["missing_argument"])


def test_value_of_another_type_is_kept_as_a_string_and_a_fitting_one_is_typed() -> None:
    out = ('<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\nthree'
           '\n</parameter>\n</function>\n</tool_call>')
    check(case(QWEN35, out), {"tool_calls": [call("get_weather", '{"city": "Paris", "days": "three"}')]},
          ["argument_type"])
    typed = case(QWEN35, out.replace("three", "3")).expect({"tool_calls": [call("get_weather",
                                                                                  '{"city": "Paris", "days": 3}')]})
    assert not typed.diagnostics


def test_a_json_string_for_an_integer_stays_a_string() -> None:
    # Not coerced: the strict parse (llama.cpp's) reads `"3"` as the string it is, and the default parse gives
    # the strict message wherever that is well-formed; a stream could not take back the `"3` it sent either.
    # In a recovered output the mismatch is reported.
    well_formed = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call>'
    as_string = {"tool_calls": [call("get_weather", '{"city": "Paris", "days": "3"}')]}
    accepted, recovered = case(QWEN25, well_formed), case(QWEN25, well_formed.removesuffix("\n</tool_call>"))
    for test in (accepted, recovered):
        test.grammar_check(False)  # the grammar types `days`: only an unconstrained model writes this
    assert not accepted.expect(as_string).diagnostics
    check(recovered, as_string, ["argument_type", "missing_closer"])


def test_parameters_for_arguments() -> None:
    check(case(QWEN25, '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>'),
          {"tool_calls": [PARIS]}, ["arguments_key"])


def test_arguments_given_as_a_json_string() -> None:
    out = '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>'
    check(case(QWEN25, out), {"tool_calls": [PARIS]}, ["arguments_as_string"])


def test_openai_wrapper_around_the_call() -> None:
    out = ('<tool_call>\n{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}'
           '\n</tool_call>')
    check(case(QWEN25, out), {"tool_calls": [PARIS]}, ["call_wrapper"])


def test_a_json_calls_id_is_read_and_a_member_without_a_field_is_kept_in_its_diagnostic() -> None:
    """Templates that render the whole OpenAI call (`message.tool_calls | tojson`) write each call's `id` and
    `type` beside its `function`: a model that writes that shape where the template writes `{"name": ...,
    "arguments": ...}` (Qwen2.5) gives the call's id; a member a call has no field for is dropped, its text kept
    in the diagnostic, never lost silently."""
    out = ('<tool_call>\n{"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '
           '{"city": "Paris"}}, "confidence": "high"}\n</tool_call>')
    got = case(QWEN25, out).expect_diagnostics(["call_wrapper", "extra_member"]).expect(
        {"tool_calls": [dict(PARIS, id="call_7")]})
    assert [d.raw for d in got.diagnostics if d.kind == "extra_member"] == ['"confidence": "high"']


@pytest.mark.parametrize("template", [QWEN25, QWEN35])
def test_call_to_an_undeclared_tool_is_kept(template: str) -> None:
    out = ('<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>' if template == QWEN25 else
           '<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>')
    check(case(template, out), {"tool_calls": [call("get_time", '{"tz": "UTC"}')]}, ["unknown_tool"])


@pytest.mark.parametrize(("template", "out", "arguments"), [
    # a marker ends the name: `NAME<｜tool▁sep｜>` (analyzer-derived JSON calls)
    ("deepseek-ai__DeepSeek-V3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>"
                                   '{"tz": "UTC"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', '{"tz": "UTC"}'),
    ("axolotl__deepseek_v3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
                             '{"tz": "UTC"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', '{"tz": "UTC"}'),
    # the name in an attribute, `invoke name="NAME"` (hand-written DSML)
    ("deepseek-ai__DeepSeek-V3.2", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="tz" '
                                   'string="true">UTC</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
     '{"tz":"UTC"}'),
    ("llama.cpp__deepseek-ai-DeepSeek-V4", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter '
                                           'name="n" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                                           '</｜DSML｜tool_calls>', '{"n":3}'),
    # `call:NAME{...}` (hand-written Gemma 4)
    ("google__gemma-4-31B-it", '<|tool_call>call:get_time{tz:<|"|>UTC<|"|>}<tool_call|>', '{"tz":"UTC"}'),
])
def test_call_to_an_undeclared_tool_is_kept_where_a_marker_bounds_its_name(template: str, out: str,
                                                                            arguments: str) -> None:
    """The formats whose builders match each declared name (TensorRT-LLM's `test_undefined_tool`, for each
    parser): the call was content. Where a marker bounds the name it is read, as in the formats above; the
    caller validates names. (GLM's name has no marker of its own: there the declared names only are read.)"""
    check(case(template, out, enable_thinking=False), {"tool_calls": [call("get_time", arguments)]}, ["unknown_tool"])


def test_text_after_the_last_call_is_content() -> None:
    out = '<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>\nDone.'
    check(case(QWEN35, out), {"content": "Done.", "tool_calls": [call("bash", '{"command": "ls"}')]},
          ["trailing_text"])


def test_one_malformed_call_among_good_ones() -> None:
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Lyon}}\n</tool_call>\n'
    out = (f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}\n</tool_call>\n{bad}'
           '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Nice"}}\n</tool_call>')
    check(case(QWEN25, out), {"content": bad, "tool_calls": [PARIS, call("get_weather", '{"city": "Nice"}')]},
          ["unparsed_text"])


def test_a_bare_json_call_after_one_it_cannot_read() -> None:
    """Llama 3.2 renders a call as a bare `{"name": ..., "parameters": ...}`, no marker: the reading resumes at
    the next object that begins as the template begins a call (as SGLang's llama32 test expects)."""
    bad = '{"name": "get_weather", "parameters": {'
    out = bad + '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    check(case(LLAMA32, out), {"content": bad, "tool_calls": [PARIS]}, ["unparsed_text"])


LLAMA31 = "meta-llama__Llama-3.1-8B-Instruct"
TOKYO = call("get_weather", '{"city": "Tokyo"}')


@pytest.mark.parametrize("between", ["; ", ";", ";\n", "\n"])
def test_calls_one_after_the_other_as_models_write_them(between: str) -> None:
    """Llama 3.1 renders one bare `{"name": ..., "parameters": ...}` call (its template raises on a second);
    its models write several anyway, `{...}; {...}` or one per line (vLLM's llama3_json parser reads them)."""
    first = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    second = '{"name": "get_weather", "parameters": {"city": "Tokyo"}}'
    check(case(LLAMA31, first + between + second), {"tool_calls": [PARIS, TOKYO]}, ["call_separator"])
    check(case(LLAMA31, first + between + second, parallel_tool_calls=False), {"tool_calls": [PARIS, TOKYO]},
          ["extra_call"])


def test_a_second_call_where_the_request_allows_one() -> None:
    """Ling 3 writes the text after its calls up to the end of the turn as content; with parallel calls off, a
    second call there was that content, with no word said (found beside the matrix's Ling 3 variants). It is
    read and reported, as in the other formats."""
    one = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{}</arg_value>\n</tool_call>"
    out = one.format("Paris") + "\n" + one.format("Tokyo")
    check(case("llama.cpp__inclusionai-ling-3.0-flash", out, enable_thinking=False, parallel_tool_calls=False),
          {"tool_calls": [PARIS, TOKYO]}, ["extra_call"])


def test_repairs_after_skipped_text_say_where_they_are() -> None:
    """After text the reading skips (`<|python_tag|>`, which Llama 3.2's template never writes), the repairs
    found in the rest keep their place in the output, in the position and in the message."""
    call_ = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    out = f"<|python_tag|>{call_}<|python_tag|>{call_}"
    got = case(LLAMA32, out).expect_diagnostics(["unparsed_text", "call_separator"]).expect(
        {"content": "<|python_tag|><|python_tag|>", "tool_calls": [PARIS, PARIS]})
    second = out.rindex("<|python_tag|>") + len("<|python_tag|>")  # (where the second call begins)
    assert [(d.kind, d.position) for d in got.diagnostics] == [("unparsed_text", len(call_) + 14),
                                                               ("call_separator", second)]
    for d in got.diagnostics:
        assert f" at {d.position}" in d.message, d


@pytest.mark.parametrize(("template", "output"), [
    # LFM2.5 (llama.cpp's LFM2 format) and Typhoon 2.1 (an analyzer-derived bare list) write Python calls
    ("llama.cpp__LFM2.5-8B-A1B", "<|tool_call_start|>[bash(command='sed -n '360,450p' f.py')]<|tool_call_end|>"),
    ("typhoon-ai__typhoon2.1-gemma3-4b", '[bash(command="grep -n "def main" f.py")]'),
])
def test_a_quote_left_unescaped_inside_a_python_string(template: str, output: str) -> None:
    """The string ends at the quote an argument's or the call's end follows, not at the first inner one."""
    inner = output[output.index("command=") + 9:output.rindex(")") - 1]
    check(case(template, output, enable_thinking=False),
          {"tool_calls": [call("bash", json.dumps({"command": inner}))]}, ["unescaped_quote"])


def test_a_quote_before_another_arguments_name_is_no_inner_quote() -> None:
    """`city="Paris"days=3`: a comma missing, not a quote inside the value; the call stays unreadable."""
    out = '[get_weather(city="Paris"days=3)]'
    params = generate(CORPUS.by_name("typhoon-ai__typhoon2.1-gemma3-4b").read_text(), {
        "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "enable_thinking": False,
        "reasoning_format": "auto"})
    msg = params.parse(out)
    assert msg.tool_calls == ()
    assert 'get_weather(city="Paris"days=3)' in msg.content
    assert "unescaped_quote" not in {d.kind for d in msg.diagnostics}


def test_nothing_readable_is_content_with_a_diagnostic() -> None:
    out = '<tool_call>\n{"name": get_weather}\n</tool_call>'
    check(case(QWEN25, out), {"content": out}, ["unparsed_text"])


def test_the_beginning_of_a_marker_before_a_call_it_cannot_read_is_text() -> None:
    """`[` is how `[THINK]` (a reasoning block Qwen2.5's template does not show, read as `undeclared_reasoning`)
    begins; before a call the parse cannot read, the text after it cuts it, not the output's end: it is text. It
    was read as that block's cut-off start and went from the message (found by the random outputs of
    tests/recovery/test_no_text_lost.py, Confucius-o1's: the stream sent it, the whole parse did not)."""
    out = '\n\n[<tool_call>\n{"name": get_weather}\n</tool_call>'
    check(case(QWEN25, out), {"content": out.lstrip()}, ["unparsed_text", "unparsed_text"])


# --- reasoning -----------------------------------------------------------------------------------------------

def test_repeated_reasoning_start() -> None:
    # Qwen3.5's generation prompt opens `<think>\n`; the model writes it again
    check(case(QWEN35, "<think>\nHmm.\n</think>\n\nHello.", reasoning_format="auto"),
          {"reasoning_content": "Hmm.\n", "content": "Hello."}, ["repeated_reasoning_start"])


def test_call_while_reasoning_is_open_ends_the_reasoning() -> None:
    out = '<think>\nI need the weather.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    check(case(MELLUM, out, reasoning_format="auto"),
          {"reasoning_content": "I need the weather.\n", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


def test_call_while_reasoning_is_open_ends_the_reasoning_in_an_output_cut_after_it() -> None:
    # a call in reasoning is a draft while the end marker may still come, so its reading waits for one; the
    # output is complete, and leaves out the call's closer too: it was content (found by the round trips of Ring
    # 2.6 once its reasoning ends at a call, with their last closer cut)
    out = '<think>\nI need the weather.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    check(case(MELLUM, out, reasoning_format="auto"), {"reasoning_content": "I need the weather.\n",
                                                        "tool_calls": [PARIS]},
          ["reasoning_ended_by_call", "missing_closer"])


def test_call_inside_reasoning_that_is_closed_later_stays_reasoning() -> None:
    draft = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call> - no, not needed.'
    out = f"<think>\nDraft: {draft}\n</think>\n\nIt is sunny."
    msg = case(MELLUM, out, reasoning_format="auto").expect(
        {"reasoning_content": f"Draft: {draft}", "content": "It is sunny."})
    assert not msg.diagnostics


# Formats written by hand whose reasoning block llama.cpp reads up to its end marker only: the reasoning start
# (written by the model, or opened by the prompt), then a call, and no end marker (ggml-org/llama.cpp#21118).
HAND_WRITTEN_REASONING = [
    # MiniCPM5: the prompt opens `<think>`; calls `<function name="NAME"><param name="K">v</param></function>`
    ("llama.cpp__openbmb-MiniCPM5-1B", "", '<function name="get_weather"><param name="city">Paris</param></function>',
     {"enable_thinking": True}),
    # LFM2.5: `<think>...</think>`, calls `<|tool_call_start|>[NAME(k="v")]<|tool_call_end|>`
    ("llama.cpp__LFM2.5-8B-A1B", "<think>", '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>',
     {"enable_thinking": True}),
    # Ministral 3 Reasoning: `[THINK]...[/THINK]`, calls `[TOOL_CALLS]NAME[ARGS]{json}`
    ("mistralai__Ministral-3-3B-Reasoning-2512", "[THINK]", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', {}),
]


@pytest.mark.parametrize(("template", "start", "call_text", "request_"), HAND_WRITTEN_REASONING)
def test_call_while_reasoning_is_open_ends_the_reasoning_of_a_hand_written_format(
        template: str, start: str, call_text: str, request_: dict[str, Any]) -> None:
    check(case(template, f"{start}I need the weather.\n{call_text}", **request_),
          {"reasoning_content": "I need the weather.\n", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


@pytest.mark.parametrize(("template", "start", "call_text", "request_"), HAND_WRITTEN_REASONING)
def test_a_draft_call_in_closed_reasoning_of_a_hand_written_format_stays_reasoning(
        template: str, start: str, call_text: str, request_: dict[str, Any]) -> None:
    end = {"[THINK]": "[/THINK]"}.get(start, "</think>")
    out = f"{start}Draft: {call_text} - no.{end}It is sunny."
    msg = case(template, out, **request_).expect({"reasoning_content": f"Draft: {call_text} - no.",
                                                  "content": "It is sunny."})
    assert not msg.diagnostics


KIMI_K3 = "llama.cpp__Kimi-K3"
K3_CALL = ('<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" '
           'type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>')


def test_calls_section_while_reasoning_is_open_ends_the_reasoning_of_kimi_k3() -> None:
    # Kimi K3's prompt opens the think section (`<|open|>think<|sep|>`); llama.cpp's parser reads it up to its
    # closer or the response opener, so a tools section the model writes without closing it was reasoning, and
    # the call lost to it (smg's kimi_k3 reasoning tests end the section there)
    check(case(KIMI_K3, f"I need the weather.{K3_CALL}<|close|>message<|sep|>",
               chat_template_kwargs={"thinking": True}),
          {"reasoning_content": "I need the weather.", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


@pytest.mark.parametrize("tools", [[], TOOLS])
def test_a_draft_tools_section_the_think_closer_follows_stays_reasoning_in_a_stream_of_kimi_k3(
        tools: list[dict[str, Any]]) -> None:
    """A tools section inside the think section, which the think closer follows (SGLang's Kimi K3 reasoning
    tests: `thought<|open|>tools<|sep|>...<|close|>tools<|sep|><|close|>think<|sep|>`): llama.cpp's parser reads it
    as reasoning, and so does the whole parse; a stream ended the reasoning at the tools opener and sent the section
    as content (or as a call), which the final message does not have. It is held back until the closer comes."""
    out = f"I need the weather.{K3_CALL}<|close|>think<|sep|>It is sunny.<|close|>message<|sep|>"
    msg = case(KIMI_K3, out, chat_template_kwargs={"thinking": True}, tools=tools).expect(
        {"reasoning_content": f"I need the weather.{K3_CALL}", "content": "It is sunny."})
    assert not msg.diagnostics


# A call while reasoning is open where the request declares no tools: the reasoning ends there as with tools (as
# vLLM's qwen3 and smg's kimi_k3 reasoning parsers end it), and the call's text, which no tool answers, is content
# (a diagnostic says it does not fit). The data that found it was Qwen3's and Kimi K3's; these are other templates
# of the tag + JSON and tagged formats.
@pytest.mark.parametrize(("template", "start", "call_text", "request_"), [
    # Mellum2: `<think>...</think>`, which the model opens; calls `<tool_call>\n{json}\n</tool_call>`
    (MELLUM, "<think>\n", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', {}),
    # GLM-4.7: the prompt opens `<think>`; calls `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>`
    (GLM, "", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
     {"enable_thinking": True}),
])
def test_call_while_reasoning_is_open_ends_the_reasoning_without_tools(
        template: str, start: str, call_text: str, request_: dict[str, Any]) -> None:
    check(case(template, f"{start}I need the weather.\n{call_text}", tools=[], **request_),
          {"reasoning_content": "I need the weather.\n", "content": call_text}, ["unparsed_text"])


# Formats whose prompt opens no reasoning: the model opens the block itself, then calls without closing it. (The
# outputs that found these are the variants of other templates of the same formats, or of other calls.)
REASONING_THE_MODEL_OPENS = [
    # Gemma 4: `<|channel>thought\n...<channel|>`, calls `<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`; where
    # the thought is never closed, llama.cpp's parser scans to the call and its text reaches no field
    ("google__gemma-4-26B-A4B-it", "<|channel>thought\n",
     '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>', {"enable_thinking": True}),
    # MiniMax M3: `<mm:think>...</mm:think>`, every tag behind the namespace prefix `]<]minimax[>[`
    ("llama.cpp__MiniMax-M3", "<mm:think>",
     ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Paris]<]minimax[>['
     '</city>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>', {"enable_thinking": True}),
    # Muse Glimmer: the chain of thought is a message ` to=self<|message|>...<|eom|>`, a call the next message
    ("llama.cpp__muse-glimmer", " to=self<|message|>",
     '<|start|>assistant to=get_weather<|message|><atem:function_calls><atem:invoke name="get_weather">'
     '<atem:parameter name="city">Paris</atem:parameter></atem:invoke></atem:function_calls>', {}),
    # Ling 3's format (Ring 2.6): the prompt opens no `<think>` there; a call ends the block the model opened
    ("inclusionAI__Ring-2.6-1T", "<think>\n",
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>", {}),
]


def test_call_ends_reasoning_whose_start_llama_cpp_reads_as_optional() -> None:
    # Ling 3's format (Ring 2.6, whose prompt opens no `<think>`): llama.cpp's parser reads a block whose start is
    # optional, so an output that writes no `<think>` is reasoning to its end, a call in it too (found by trying
    # a call with no reasoning in each hand-written format)
    call_text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    check(case("inclusionAI__Ring-2.6-1T", f"I need the weather.\n{call_text}"),
          {"reasoning_content": "I need the weather.\n", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


@pytest.mark.parametrize(("template", "start", "call_text", "request_"), REASONING_THE_MODEL_OPENS)
def test_call_while_reasoning_the_model_opened_is_open_ends_the_reasoning(
        template: str, start: str, call_text: str, request_: dict[str, Any]) -> None:
    check(case(template, f"{start}I need the weather.\n{call_text}", **request_),
          {"reasoning_content": "I need the weather.\n", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


def test_text_a_scan_to_the_call_steps_over_is_not_lost() -> None:
    """Gemma 4's parser (llama.cpp's `scan-to-toolcall`) skips to the first call where the text before it fits
    no message: its text reaches no field. With reasoning not extracted, the complete output's reading steps
    over a thought never closed: the text is kept as content, said by a diagnostic. (The whole output only:
    while more may come, the thought may still close, and a stream shows it as content.)"""
    out = '<|channel>thought\nI need the weather.\n<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
    test = case("google__gemma-4-31B-it", out, reasoning_format="none")
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}],
                                               now=test.tester.now))
    got = params.parse(out)
    assert (got.content, got.tool_calls[0].name) == ("<|channel>thought\nI need the weather.", "get_weather")
    assert [(d.kind, d.position) for d in got.diagnostics] == [("unparsed_text", 0)]
    assert not unaccounted(out, got, markup_spans(params, out, got))


def test_stray_reasoning_end() -> None:
    check(case(MELLUM, "<think>\nok\n</think>\n</think>\n\nHello.", reasoning_format="auto"),
          {"reasoning_content": "ok", "content": "Hello."}, ["stray_reasoning_end"])


@pytest.mark.parametrize(("template", "out", "repairs"), [
    # Mellum2: the model opens `<think>`; Qwen3: the prompt opens nothing, the model writes `<think>`
    (MELLUM, "<think>\nok\n</think>\n</think>\n</think>\n\nHello.", ["stray_reasoning_end"] * 2),
    ("Qwen__Qwen3-0.6B", "<think>ok</think></think>\n</think>Hello.", ["stray_reasoning_end"] * 2),
])
def test_the_reasoning_end_written_again_and_again(template: str, out: str, repairs: list[str]) -> None:
    """Each end marker the model repeats before its answer is dropped, not only the first (SGLang's reasoning
    dedupe tests: `</think></think>\n</think>real answer`); the third was the answer's first words. So too where
    the start was left out (`missing_reasoning_start`: a complete output's reading, test below)."""
    check(case(template, out, enable_thinking=True), {"reasoning_content": "ok", "content": "Hello."}, repairs)
    params = generate(CORPUS.by_name(template).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                             "enable_thinking": True, "reasoning_format": "auto"})
    without_start = out[out.index("<think>") + len("<think>"):]
    got = params.parse(without_start)
    assert (got.reasoning_content.strip(), got.content.strip()) == ("ok", "Hello.")
    assert [d.kind for d in got.diagnostics] == ["missing_reasoning_start", *repairs]


def test_reasoning_the_template_never_shows() -> None:
    # Qwen2.5's template renders no reasoning in any variation; the model opens its answer with `<think>`
    check(case(QWEN25, "<think>\nThe user greets me.\n</think>\n\nHello!", reasoning_format="auto"),
          {"reasoning_content": "\nThe user greets me.\n", "content": "Hello!"}, ["undeclared_reasoning"])


@pytest.mark.parametrize(("template", "block", "request_"), [
    # Apertus writes `<|inner_prefix|>...<|inner_suffix|>` from a `thoughts` block of the content's `blocks`
    # (SGLang's apertus2509 reasoning-parser tests)
    ("swiss-ai__Apertus-8B-Instruct-2509", ("<|inner_prefix|>", "<|inner_suffix|>"), {"enable_thinking": True}),
    # Apertus v1.1 writes its own tokens, `<SPECIAL_69>...<SPECIAL_70>`, from the same blocks
    ("swiss-ai__Apertus-v1.1-4B-Instruct", ("<SPECIAL_69>", "<SPECIAL_70>"), {}),
])
def test_reasoning_the_template_writes_only_from_typed_content(template: str, block: tuple[str, str],
                                                               request_: dict[str, Any]) -> None:
    """The template ignores `reasoning_content` (the analysis, as llama.cpp's, finds no reasoning) and writes a
    block from the assistant content's typed reasoning part: the model's block is read as reasoning, at the start
    of the output (`typed_reasoning`), after text (`reasoning_after_content`), or cut off by the end."""
    start, end = block
    check(case(template, f"{start}Plan it.{end}Hello!", **request_),
          {"reasoning_content": "Plan it.", "content": "Hello!"}, ["typed_reasoning"])
    check(case(template, f"Hi. {start}Plan it.{end}Hello!", **request_),
          {"reasoning_content": "Plan it.", "content": "Hi. Hello!"}, ["reasoning_after_content"])
    check(case(template, f"{start}Still planning", **request_),
          {"reasoning_content": "Still planning"}, ["typed_reasoning"], space_after=False)


# A reasoning block after the content: the model thinks again after it began its answer, or between its calls
# (TensorRT-LLM's `test_interleaved_thinking_stream`, LMDeploy's `test_stream_chunk_preserves_order`, smg's GLM-4.5
# reasoning tests: each engine reads it as reasoning). The templates write one block, before the content; the
# block is read as reasoning after the reasoning before it, with its markers in the diagnostic.
ROME = call("get_weather", '{"city": "Rome"}')
LATE_REASONING = [
    # Mellum2 renders `<think>...</think>` before the content, and its prompt opens nothing: the model writes both
    (MELLUM, "<think>\nPlan.\n</think>\n\nFirst part. <think>more thought</think> Second part.", True,
     {"reasoning_content": "Plan.\nmore thought", "content": "First part.  Second part."}),
    (MELLUM, '<think>\nI need the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
     '{"city": "Paris"}}\n</tool_call>\n<think>Now Rome.</think>\n<tool_call>\n{"name": "get_weather", '
     '"arguments": {"city": "Rome"}}\n</tool_call>', True,
     {"reasoning_content": "I need the weather.\nNow Rome.", "tool_calls": [PARIS, ROME]}),
    # Qwen3.5's generation prompt opens `<think>\n`
    (QWEN35, "Plan.\n</think>\n\nFirst part.\n<think>\nmore thought\n</think>\nSecond part.", True,
     {"reasoning_content": "Plan.\n\nmore thought\n", "content": "First part.\n\nSecond part."}),
    # GLM-4.7's prompt opens `<think>` too, and its calls are tagged
    (GLM, "Plan.</think>First.<think>again</think><tool_call>get_weather<arg_key>city</arg_key>"
     "<arg_value>Paris</arg_value></tool_call>", True,
     {"reasoning_content": "Plan.again", "content": "First.", "tool_calls": [PARIS]}),
    # thinking off: Qwen3's prompt closes an empty block (`<think>\n\n</think>\n\n`); the model thinks anyway
    ("Qwen__Qwen3-0.6B", "Answer. <think>second thoughts</think> Done.", False,
     {"reasoning_content": "second thoughts", "content": "Answer.  Done."}),
]


@pytest.mark.parametrize(("template", "out", "thinking", "message"), LATE_REASONING)
def test_a_reasoning_block_after_the_content_is_reasoning(template: str, out: str, thinking: bool,
                                                           message: dict[str, Any]) -> None:
    test = case(template, out, reasoning_format="auto", enable_thinking=thinking)
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}],
                                               now=test.tester.now))
    got = params.parse(out)
    assert (got.reasoning_content.strip(C_SPACE), got.content.strip(C_SPACE)) == \
        (message["reasoning_content"].strip(C_SPACE), message.get("content", ""))
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == \
        [(c["name"], json.loads(c["arguments"])) for c in message.get("tool_calls", [])]
    # (the block is the last `<think>`; text before an end marker the output does not open is reasoning too,
    # `missing_reasoning_start`, where the prompt opens nothing; a block between two calls, where the format reads
    # nothing, was text the reading skipped first, `unparsed_text`)
    assert [(d.kind, d.position) for d in got.diagnostics if d.kind not in ("missing_reasoning_start",
                                                                            "unparsed_text")] == \
        [("reasoning_after_content", out.rindex("<think>"))]
    assert not unaccounted(out, got, markup_spans(params, out, got))
    for step in (1, 3, 7):  # streamed in chunks of any size: the same message, the block never shown as content
        stream, acc = params.stream(), ChatMessage()
        for i in range(0, len(out), step):
            acc = apply_deltas(acc, stream.feed(out[i:i + step]))
            assert "<think>" not in acc.content, (step, acc)
        final = stream.finish()
        acc = apply_deltas(acc, stream.last_deltas)
        assert final == got
        assert (acc.reasoning_content, acc.content) == (got.reasoning_content, got.content), step


@pytest.mark.parametrize("out", ["I write <think> to open a thought.", "Open it with <think>",
                                 "Close it with </think> after."])
def test_a_reasoning_marker_the_content_mentions_stays_content(out: str) -> None:
    """A start marker nothing closes (or an end marker alone, where the reasoning was closed) is prose that
    mentions it: the content keeps it, and a stream holds it back only until the output ends."""
    test = case(MELLUM, "<think>\nok\n</think>\n\n" + out, reasoning_format="auto", enable_thinking=True)
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}],
                                               now=test.tester.now))
    got = params.parse(test.input)
    assert (got.reasoning_content.strip(), got.content.strip(C_SPACE), got.diagnostics) == ("ok", out, ())
    stream, acc = params.stream(), ChatMessage()
    for i in range(0, len(test.input), 4):
        acc = apply_deltas(acc, stream.feed(test.input[i:i + 4]))
    assert stream.finish() == got
    assert apply_deltas(acc, stream.last_deltas).content.strip(C_SPACE) == out


# --- the outputs that lost text silently (issue 34), each read with its repairs named ------------------------

SEARCH_WEB = {"type": "function", "function": {"name": "search_web", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
SET_FLAG = {"type": "function", "function": {"name": "set_flag", "parameters": {
    "type": "object", "properties": {"enabled": {"type": "boolean"}, "verbose": {"type": "boolean"}},
    "required": ["enabled"]}}}


@pytest.mark.parametrize("parallel", [True, False])
def test_several_invokes_in_one_section_without_the_templates_newlines(parallel: bool) -> None:
    """MiniMax-M2 renders `<minimax:tool_call>\\n<invoke name=...>...</invoke>\\n</minimax:tool_call>`, a message's
    invokes in one section with nothing between them (each closer ends its line: `call_separator`); its generation
    prompt opens `<think>\\n` when thinking is on. A model writes two invokes in one section on one line: both
    calls, the second one a repair only where the request allows one call."""
    out = ('<minimax:tool_call><invoke name="search_web"><parameter name="query">OpenAI</parameter></invoke><invoke '
           'name="search_web"><parameter name="query">Gemini</parameter></invoke></minimax:tool_call>')
    test = case("MiniMaxAI__MiniMax-M2", out, tools=[SEARCH_WEB], enable_thinking=True, parallel_tool_calls=parallel)
    check(test, {"tool_calls": [call("search_web", '{"query":"OpenAI"}'), call("search_web", '{"query":"Gemini"}')]},
          ["reasoning_ended_by_call", "call_opener_spelling", *([] if parallel else ["extra_call"])])


@pytest.mark.parametrize("template", ["mistralai__Ministral-3-8B-Instruct-2512",
                                      "mistralai__Devstral-Small-2-24B-Instruct-2512"])
def test_a_call_without_the_arguments_marker(template: str) -> None:
    """Mistral's templates render `[TOOL_CALLS]NAME[ARGS]{...}`; models also write `[TOOL_CALLS]NAME{...}` (as
    vLLM's Mistral tool-parser tests show): the name and the arguments, not the arguments as content."""
    check(case(template, '[TOOL_CALLS]get_weather{"city": "Paris"}'), {"tool_calls": [PARIS]},
          ["missing_arguments_marker"])


@pytest.mark.parametrize(("template", "output"), [
    # DeepSeek V3.1 renders `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`
    ("deepseek-ai__DeepSeek-V3.1", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather{"city": "Paris"}'
                                   '<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    # Kimi K2 renders `functions.NAME:IDX<|tool_call_argument_begin|>{...}`: the index is still written
    ("moonshotai__Kimi-K2-Instruct", '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                                     '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'),
    # Solar Open renders `ID<|tool_call:name|>NAME<|tool_call:args|>{...}`
    ("upstage__Solar-Open-100B", '<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>get_weather'
                                 '{"city": "Paris"}<|tool_call:end|><|calls|>'),
])
def test_a_call_without_the_marker_before_its_json_arguments(template: str, output: str) -> None:
    """The Mistral dialect above in the other formats that write a marker of their own between a call's name (or
    its index) and its JSON arguments: the call, the marker's absence reported. (Kimi's id holds the name; Solar
    Open's stands before it.)"""
    ids = {"moonshotai__Kimi-K2-Instruct": "functions.get_weather:0", "upstage__Solar-Open-100B": "a1b2c3d4e5"}
    want = dict(PARIS, id=ids[template]) if template in ids else PARIS
    check(case(template, output, enable_thinking=False), {"tool_calls": [want]}, ["missing_arguments_marker"])


def test_a_call_id_without_the_arguments_marker_after_it() -> None:
    """Mistral Small 3.2 renders `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}`: written without `[ARGS]`, the id ends
    where the arguments begin."""
    got = case("mistralai__Mistral-Small-3.2-24B-Instruct-2506",
               '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e{"city": "Paris"}')
    check(got, {"tool_calls": [dict(PARIS, id="a1b2c3d4e")]}, ["missing_arguments_marker"])


@pytest.mark.parametrize(("template", "reasoning"), [
    ("deepseek-ai__DeepSeek-R1-Distill-Qwen-32B", "Paris, then."),  # (its prompt opens `<think>`)
    ("axolotl__deepseek_v3", ""),
])
def test_fenced_arguments_written_bare(template: str, reasoning: str) -> None:
    """DeepSeek R1 and V3 render each call's arguments in a fence, `NAME\n```json\n{...}\n```<｜tool▁call▁end｜>`;
    written bare, as DeepSeek V3.1 writes them: the call, the fence's opening and end each reported."""
    out = ((reasoning + "</think>\n\n" if reasoning else "") + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function'
           '<｜tool▁sep｜>get_weather\n{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    check(case(template, out), {"reasoning_content": reasoning, "tool_calls": [PARIS]},
          ["arguments_fence", "arguments_fence"])


@pytest.mark.parametrize(("template", "output"), [
    ("mistralai__Ministral-3-8B-Instruct-2512", '[TOOL_CALLS]get_weather[ARGS]```json\n{"city": "Paris"}\n```'),
    ("deepseek-ai__DeepSeek-V3.1", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>```json\n'
                                   '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    ("moonshotai__Kimi-K2-Instruct", '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                                     '<|tool_call_argument_begin|>```\n{"city": "Paris"}\n```<|tool_call_end|>'
                                     '<|tool_calls_section_end|>'),
])
def test_json_arguments_in_a_fence_the_template_does_not_write(template: str, output: str) -> None:
    """Each template writes a call's JSON arguments bare after a marker; models wrap JSON in a Markdown fence they
    were not asked for (agents-flex/agents-flex#64 strips it from tool arguments): the arguments, reported."""
    want = dict(PARIS, id="functions.get_weather:0") if "Kimi" in template else PARIS
    check(case(template, output, enable_thinking=False), {"tool_calls": [want]}, ["arguments_fence"])


def test_text_before_a_call_while_reasoning_is_open_is_reasoning() -> None:
    """DeepSeek V3.1's generation prompt opens `<think>` when thinking is on; its calls begin
    `<｜tool▁calls▁begin｜>`: the text before the calls is the reasoning the call ends."""
    out = ('normal text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
           '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    check(case("deepseek-ai__DeepSeek-V3.1", out, enable_thinking=True),
          {"reasoning_content": "normal text", "tool_calls": [PARIS]}, ["reasoning_ended_by_call"])


def test_typed_values_without_the_templates_value_delimiters() -> None:
    """vLLM's FunctionGemma template renders `<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>`,
    every value between `<escape>`s; models write booleans and numbers bare (`enabled:true`), as Google's template
    prints them: read by the tool's schema."""
    out = '<start_function_call>call:set_flag{enabled:true,verbose:false}<end_function_call>'
    check(case("vllm__tool_chat_template_functiongemma", out, tools=[SET_FLAG]),
          {"tool_calls": [call("set_flag", '{"enabled":true,"verbose":false}')]}, ["unquoted_value", "unquoted_value"])


def test_typed_values_between_the_quotes_of_strings() -> None:
    """Google's FunctionGemma template writes `<escape>` around a string only (`TemplateAnalysis.typed_argument`) and
    a boolean bare; a model writes them quoted (`enabled:<escape>true<escape>`), as vLLM's FunctionGemma template
    prints every value: read by the tool's schema."""
    out = '<start_function_call>call:set_flag{enabled:<escape>true<escape>,verbose:false}<end_function_call>'
    check(case("distil-labs__distil-home-assistant-functiongemma", out, tools=[SET_FLAG]),
          {"tool_calls": [call("set_flag", '{"enabled":true,"verbose":false}')]}, ["string_markers"])


# --- calls grouped otherwise than the template groups them (issue 35) -------------------------------------------

LONDON = call("get_weather", '{"city": "London"}')


@pytest.mark.parametrize(("template", "first", "second"), [
    # LFM2.5 renders one `<|tool_call_start|>[...]<|tool_call_end|>` list for all calls (LFM2's own format,
    # chat/handlers/lfm2.py); vLLM's and Ollama's LFM2 tests show a list per call
    ("LiquidAI__LFM2.5-350M", '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>',
     '<|tool_call_start|>[get_weather(city="London")]<|tool_call_end|>'),
    # DeepSeek V3.1 renders one `<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>` section for all calls (the analyzer's
    # section markers); Ollama's DeepSeek tests open one per call
    ("deepseek-ai__DeepSeek-V3.1",
     '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
     '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "London"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    # MiniMax M3 renders one `<tool_call>` block for all its invokes (chat/handlers/minimax_m3.py, llama.cpp's
    # call block, as DeepSeek V3.2/V4's DSML block, whose realistic variants found it)
    ("llama.cpp__MiniMax-M3",
     ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Paris]<]minimax[>[</city>'
     ']<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>',
     ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>London]<]minimax[>[</city>'
     ']<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>'),
])
@pytest.mark.parametrize("between", ["", "\n"])
def test_a_section_for_each_call(template: str, first: str, second: str, between: str) -> None:
    """The calls of both sections."""
    check(case(template, "Checking." + first + between + second, enable_thinking=False),
          {"content": "Checking.", "tool_calls": [PARIS, LONDON]}, ["section_repeated"])


def test_text_between_two_sections_is_content_in_its_place() -> None:
    """DeepSeek V3.1 as above, text between the sections: content, after the text before the calls (text the
    format does not hold there: the reading resumes at the next section)."""
    out = ('Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>'
           '<｜tool▁calls▁end｜> Then: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "London"}'
           '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    params = generate(CORPUS.by_name("deepseek-ai__DeepSeek-V3.1").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "enable_thinking": False,
                       "reasoning_format": "auto"})
    got = params.parse(out)
    assert (got.content, [(c.name, json.loads(c.arguments)) for c in got.tool_calls]) == \
        ("Checking. Then: ", [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})])
    assert [d.kind for d in got.diagnostics] == ["unparsed_text", "section_repeated"]
    assert not unaccounted(out, got, markup_spans(params, out, got))


def test_several_calls_in_the_wrapper_of_one() -> None:
    """Qwen3-Coder renders `<tool_call>\\n<function=NAME>...</function>\\n</tool_call>` around each call; a model
    writes both functions in one `<tool_call>` (the reverse of a section per call)."""
    out = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
           "<function=get_weather>\n<parameter=city>\nLondon\n</parameter>\n</function>\n</tool_call>")
    check(case("Qwen__Qwen3-Coder-30B-A3B-Instruct", out),
          {"tool_calls": [call("get_weather", '{"city":"Paris"}'), call("get_weather", '{"city":"London"}')]},
          ["calls_grouped"])


# --- a family's JSON dialect in a tagged format -----------------------------------------------------------------

def test_a_json_call_object_in_a_tagged_format() -> None:
    """GLM-4.7 renders `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`; models of that
    family also write the Hermes JSON object inside `<tool_call>` (Ollama's Laguna tests, same call form)."""
    out = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</tool_call>'
    check(case(GLM, out, enable_thinking=False), {"tool_calls": [call("get_weather", '{"city": "Paris", "days": 3}')]},
          ["json_call"])


def test_the_name_then_json_arguments_in_a_tagged_format() -> None:
    """The same template; the name as the template writes it, then the arguments as one JSON object."""
    out = '<tool_call>get_weather\n{"city": "Paris"}</tool_call>'
    check(case(GLM, out, enable_thinking=False), {"tool_calls": [PARIS]}, ["json_arguments"])


# --- values and names ---------------------------------------------------------------------------------------------

def test_objects_and_lists_in_the_templates_own_value_syntax() -> None:
    """FunctionGemma quotes strings `<escape>...<escape>` and writes keys bare; an object or a list argument is
    written in that syntax (Ollama's FunctionGemma tests), which Google's template prints (a strict reading there:
    tests/analysis/test_tagged_values.py) and vLLM's does not (it quotes every value): read as the JSON it stands
    for, typed by the schema."""
    tool = {"type": "function", "function": {"name": "configure", "parameters": {"type": "object", "properties": {
        "cfg": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}
    out = ('<start_function_call>call:configure{cfg:{name:<escape>a, b<escape>,n:3,on:true,inner:{k:null}},'
           'tags:[<escape>x<escape>,<escape>y<escape>]}<end_function_call>')
    check(case("vllm__tool_chat_template_functiongemma", out, tools=[tool]),
          {"tool_calls": [call("configure", '{"cfg": {"name": "a, b", "n": 3, "on": true, "inner": {"k": null}}, '
                                            '"tags": ["x", "y"]}')]}, ["unquoted_value", "unquoted_value"])


def test_a_json_escaped_tool_name_is_the_name_it_encodes() -> None:
    """Qwen2.5's calls are JSON; a tool whose name holds a quote is written escaped (Ollama's Qwen3-VL tests):
    the call names that tool."""
    tool = {"type": "function", "function": {"name": '"get weather"', "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    out = '<tool_call>\n{"name": "\\"get weather\\"", "arguments": {"city": "Paris"}}\n</tool_call>'
    params = generate(CORPUS.by_name(QWEN25).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                          "tools": [tool]})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [('"get weather"', {"city": "Paris"})]
    assert got.content == "" and not got.diagnostics


def test_a_labelled_marker_without_its_label() -> None:
    """Gemma 4 renders reasoning `<|channel>thought\\n...<channel|>`; Ollama's Gemma 4 tests show the channel
    opened without the `thought` label: reasoning all the same."""
    out = "<|channel>first<channel|><|channel>second<channel|>Final answer."
    check(case("Gryphe__Gemma-4-31B-StyleTune", out, tools=[], enable_thinking=True),
          {"reasoning_content": "firstsecond", "content": "Final answer."}, ["marker_label", "marker_label"])


# --- beyond the template: more seen in other engines' tests (issue 35) -------------------------------------------

def test_calls_of_an_array_written_without_commas() -> None:
    """Command A (Cohere 2 format, chat/handlers/cohere2moe.py) writes its calls as a JSON array in
    `<|START_ACTION|>...<|END_ACTION|>`; a model leaves out the comma between two objects (Ollama's Cohere tests)."""
    out = ('<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}'
           '{"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city": "London"}}]<|END_ACTION|>')
    check(case("CohereLabs__command-a-plus-05-2026-w4a4", out, enable_thinking=False),
          {"tool_calls": [dict(PARIS, id="0"), dict(LONDON, id="1")]}, ["call_separator"])


def test_a_closer_written_twice() -> None:
    """Gemma 4 closes a call `<tool_call|>`; a model writes it twice, then text (Ollama's Gemma 4 tests): the
    second is markup, the text content."""
    out = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|><tool_call|>Done.'
    check(case("google__gemma-4-26B-A4B-it", out), {"content": "Done.", "tool_calls": [PARIS]},
          ["repeated_closer", "trailing_text"])


def test_a_json_string_in_the_templates_value_syntax() -> None:
    """Gemma 4 quotes strings `<|"|>...<|"|>`; a model quotes one as JSON (Ollama's Gemma 4 tests)."""
    out = '<|tool_call>call:get_weather{city:"Par\\"is"}<tool_call|>'
    check(case("google__gemma-4-26B-A4B-it", out), {"tool_calls": [call("get_weather", '{"city": "Par\\"is"}')]},
          ["json_string_value"])


@pytest.mark.parametrize(("template", "out", "args"), [
    ("google__gemma-4-26B-A4B-it", "<|tool_call>call:get_weather{city:'Paris, France',days:3}<tool_call|>",
     '{"city": "Paris, France", "days": 3}'),
    # (quotes inside: the escaped single one, a double one as it is)
    ("google__gemma-4-31B-it", "<|tool_call>call:get_weather{city:'Val d\\'Is\u00e8re \"ski\"'}<tool_call|>",
     '{"city": "Val d\'Is\u00e8re \\"ski\\""}'),
])
def test_a_string_value_in_single_quotes(template: str, out: str, args: str) -> None:
    """Gemma 4 quotes strings `<|"|>...<|"|>`; its models also write them in Python's single quotes
    (`filename:'output.pdf'`, with commas and colons inside, as jundot/omlx PR #1854 reports): the string, as
    Python spells it."""
    check(case(template, out), {"tool_calls": [call("get_weather", args)]}, ["python_value"])


def test_a_string_value_without_its_opening_quote() -> None:
    """Gemma 4 quotes strings `<|"|>...<|"|>`; a value written without the opening one (`query:weather in
    Tokyo<|"|>`, as SGLang's Gemma 4 tests feed its detector) is the text up to the closing one, which never runs
    across the syntax's brackets."""
    out = '<|tool_call>call:get_weather{city:Paris, France<|"|>,days:3}<tool_call|>'
    check(case("google__gemma-4-26B-A4B-it", out),
          {"tool_calls": [call("get_weather", '{"city": "Paris, France", "days": 3}')]}, ["missing_value_opener"])


@pytest.mark.parametrize("out", ['<|tool_call>call:get_weather{city:<|"|>Paris<|"|>days:3}<tool_call|>',
                                 '<|tool_call>call:get_weather{days:3 city:<|"|>Paris<|"|>}<tool_call|>'])
def test_the_comma_between_two_arguments_left_out(out: str) -> None:
    """Gemma 4 separates a call's arguments with `,`; its models leave it out before the next key
    (`command:<|"|>look<|"|>angle:90`, hybridgroup/yzma PR #243): both arguments, the separator's absence
    reported."""
    args = json.dumps(json.loads('{"city": "Paris", "days": 3}'), sort_keys="days:3 " in out)
    check(case("google__gemma-4-26B-A4B-it", out), {"tool_calls": [call("get_weather", args)]},
          ["missing_separator"])


@pytest.mark.parametrize(("template", "out", "repairs"), [
    # the output quoted in vLLM issue #53642 (Gemma 4 26B A4B): Gemma's value syntax inside parentheses
    ("google__gemma-4-26B-A4B-it", '<|tool_call>call:get_weather(city:<|"|>Paris<|"|>)<tool_call|>',
     ["call_parentheses"]),
    # the keyword form oMLX PR #1886 describes (`call:name(key=value, ...)`), with an integer
    ("google__gemma-4-31B-it", '<|tool_call>call:get_weather(city=<|"|>Paris<|"|>, days=3)<tool_call|>',
     ["call_parentheses"]),
    # a JSON string inside the parentheses (the form NousResearch/hermes-agent PR #7449 quotes)
    ("google__gemma-4-31B-it", '<|tool_call>call:get_weather(city: "Paris", days: 3)<tool_call|>',
     ["call_parentheses", "json_string_value"]),
])
def test_a_calls_arguments_in_parentheses(template: str, out: str, repairs: list[str]) -> None:
    """Gemma 4 writes `call:NAME{k:<|"|>v<|"|>}`; its models also write the arguments in parentheses: read as the
    braces' arguments (the parse of a later well-formed call is not taken over)."""
    args = '{"city": "Paris"}' if "days" not in out else '{"city": "Paris", "days": 3}'
    after = '<|tool_call>call:get_weather{city:<|"|>Rome<|"|>}<tool_call|>'
    check(case(template, out + after), {"tool_calls": [call("get_weather", args),
                                                      call("get_weather", '{"city": "Rome"}')]}, repairs)


@pytest.mark.parametrize("template", ["google__gemma-4-26B-A4B-it", "google__gemma-4-31B-it"])
def test_a_call_opener_without_its_label(template: str) -> None:
    """Gemma 4 opens a call `<|tool_call>call:`; Gemma 4 26B A4B also writes `<|tool_call>:NAME{...}` (vLLM issue
    #53431, whose PR #53444 reads it): the label `call` left out, the call read, the text before it content."""
    out = 'Hello: world<|tool_call>:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
    check(case(template, out), {"content": "Hello: world", "tool_calls": [PARIS]}, ["marker_label"])


def test_an_undeclared_keyword_argument_where_the_schema_allows_it() -> None:
    """LFM2.5 writes Python calls; a tool whose schema lists no properties (and does not forbid others) called
    with a keyword (Ollama's LFM2 tests): kept, reported."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
    out = '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>'
    check(case("LiquidAI__LFM2.5-350M", out, tools=[tool]), {"tool_calls": [PARIS]}, ["undeclared_argument"])


@pytest.mark.parametrize("template", ["llama.cpp__muse-glimmer", "vllm__tool_chat_template_muse_glimmer"])
def test_a_message_header_without_its_recipient_then_the_answer(template: str) -> None:
    """Muse Glimmer's calls are messages `<|start|>assistant to=TOOL<|message|><atem:function_calls>...`; a model
    writes the header without ` to=TOOL`, then its answer in another message (Ollama's Glimmer tests)."""
    out = ('<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Paris'
           '</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|start|>assistant to=user<|message|>Done<|eot|>')
    check(case(template, out, enable_thinking=True),
          {"content": "Done", "tool_calls": [call("get_weather", '{"city":"Paris"}')]},
          ["missing_recipient", "message_after_calls"], space_after=False)


MUSE_CALL = ('<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Paris'
             '</atem:parameter>\n</atem:invoke>\n</atem:function_calls>')


@pytest.mark.parametrize("template", ["llama.cpp__muse-glimmer", "vllm__tool_chat_template_muse_glimmer"])
@pytest.mark.parametrize(("output", "message", "repairs"), [
    # SGLang's Muse Glimmer reasoning tests: every header `<|start|>to=RECIPIENT<|message|>`, the first one too,
    # after the generation prompt's `<|start|>assistant`
    ("<|start|>to=self<|message|>thinking it over<|eom|><|start|>to=user<|message|>the answer<|eom|>",
     {"reasoning_content": "thinking it over", "content": "the answer"}, ["repeated_opener", "marker_label"]),
    (f"<|start|>to=self<|message|>checking<|eom|><|start|>to=get_weather<|message|>{MUSE_CALL}",
     {"reasoning_content": "checking", "tool_calls": [call("get_weather", '{"city":"Paris"}')]},
     ["repeated_opener", "marker_label"]),
    # a header with neither the role nor a recipient: the answer, as `<|start|>assistant<|message|>` is
    ("<|start|><|message|>hi<|eom|>", {"content": "hi"}, ["repeated_opener"]),
])
def test_message_headers_without_the_role(template: str, output: str, message: dict[str, Any],
                                          repairs: list[str]) -> None:
    """Muse Glimmer writes every message header `<|start|>assistant to=RECIPIENT<|message|>`, and its generation
    prompt ends `<|start|>assistant`; models also write the header's special token without the role after it, the
    first one again after the prompt's (`labelled_marker`, `opener_again`)."""
    check(case(template, output, enable_thinking=True), message, repairs, space_after=False)


@pytest.mark.parametrize("template", ["llama.cpp__muse-glimmer", "vllm__tool_chat_template_muse_glimmer"])
def test_a_recipient_without_the_space_before_it(template: str) -> None:
    """The template writes ` to=self` after the role (the space a tokenizer puts in its ` to` token); LMDeploy's
    and SGLang's Muse Glimmer tests write `to=self` right after the generation prompt's `<|start|>assistant`:
    formatting (`header_marker`), not reported."""
    out = f"to=self<|message|>checking<|eom|><|start|>assistant to=get_weather<|message|>{MUSE_CALL}"
    check(case(template, out, enable_thinking=True),
          {"reasoning_content": "checking", "tool_calls": [call("get_weather", '{"city":"Paris"}')]}, [],
          space_after=False)


@pytest.mark.parametrize(("output", "message", "repairs"), [
    ("<|start|>to", {"content": "<|start|>to"}, ["unparsed_text"]),
    ("<|start|>to=self<|message|>hmm<|eom|><|start|>to", {"reasoning_content": "hmm", "content": "<|start|>to"},
     ["repeated_opener", "unparsed_text"]),
    # the template's own headers, cut in the recipient or in the `<|message|>` after it
    (" to=self<|message|>hmm<|eom|><|start|>assistant to=us", {"reasoning_content": "hmm", "content": " to=us"},
     ["unparsed_text"]),
    (" to=self<|message|>hmm<|eom|><|start|>assistant to=user<|mess",
     {"reasoning_content": "hmm", "content": " to=user<|mess"}, ["unparsed_text"]),
    (" to=self<|mess", {"content": " to=self<|mess"}, ["unparsed_text"]),
])
def test_a_header_the_end_cuts_off_opens_nothing(output: str, message: dict[str, Any], repairs: list[str]) -> None:
    """A message header the output's end cuts off before its recipient ends (SGLang's Muse Glimmer test
    `test_truncated_header_flushes_as_normal_text`, with the role left out; the same in the template's headers)
    opens no message: its text is content, whole and streamed, as a call's opener cut off is (`hello <tool`);
    the strict parse reads it as markup, and keeps none of its text."""
    _header_cut_off("llama.cpp__muse-glimmer", output, message, repairs)


@pytest.mark.parametrize(("output", "message"), [
    ("<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>fin",
     {"reasoning_content": "hm", "content": "<|channel|>fin"}),
    ("<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|mess",
     {"reasoning_content": "hm", "content": "<|channel|>final<|mess"}),
    ("<|channel|>anal", {"content": "<|channel|>anal"}),
])
def test_a_channel_header_the_end_cuts_off_opens_nothing(output: str, message: dict[str, Any]) -> None:
    """gpt-oss writes each message's channel in its header (`<|start|>assistant<|channel|>final<|message|>`); one
    the output's end cuts off opens no message either."""
    _header_cut_off("openai__gpt-oss-120b", output, message, ["unparsed_text"])


def _header_cut_off(template: str, output: str, message: dict[str, Any], repairs: list[str]) -> None:
    test = case(template, output, enable_thinking=True)
    got = test.expect_diagnostics(repairs).expect(message)
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}]))
    assert not unaccounted(test.input, got, markup_spans(params, test.input, got))


@pytest.mark.parametrize(("template", "output", "content"), [
    ("CohereLabs__command-a-plus-05-2026-w4a4", "<|START_TEXT|>answer<|END_OF_TURN_TOKEN|>", "answer"),
    ("deepseek-ai__DeepSeek-V3.1", "All done.<｜end▁of▁sentence｜>", "All done."),
])
def test_special_tokens_an_output_ends_with_are_formatting(template: str, output: str, content: str) -> None:
    """An end-of-turn token a server did not stop on (smg's DeepSeek and Ollama's Cohere tests): not content,
    whole or streamed, as after the format's end; the strict parse keeps it, as llama.cpp does."""
    test = case(template, output, enable_thinking=False)
    test.expect({"content": content})
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}]))
    assert params.parse(output, strict=True).content.endswith(output[-8:])


@pytest.mark.parametrize(("template", "calls"), [
    # the generation prompt opens `<think>`; calls `<tool_call>\n{json}\n</tool_call>` (unswallow's fixtures)
    ("Qwen__Qwen3-4B-Thinking-2507", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
    # the same, calls `<minimax:tool_call>\n<invoke name=...>` (smg's MiniMax tests)
    ("MiniMaxAI__MiniMax-M2", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris'
                              '</parameter>\n</invoke>\n</minimax:tool_call>'),
])
def test_text_after_calls_that_ended_open_reasoning(template: str, calls: str) -> None:
    """Reasoning the prompt opened, never closed: the call ends it, the text after the calls is content."""
    got = case(template, "Let me check.\n" + calls + "\nThe weather will be...", enable_thinking=True) \
        .expect_diagnostics(["reasoning_ended_by_call", "trailing_text"]).expect(
            {"reasoning_content": "Let me check.", "content": "The weather will be...", "tool_calls": [PARIS]})
    assert [d.kind for d in got.diagnostics] == ["reasoning_ended_by_call", "trailing_text"]


@pytest.mark.parametrize("thinking", [True, False])
def test_reasoning_before_a_stray_end_marker(thinking: bool) -> None:
    """Mellum2 renders reasoning `<think>...</think>` and its generation prompt opens nothing; with thinking on, a
    model leaves out the start (vLLM's Qwen3 reasoning tests, `without_start_token`): the text before the end
    marker is reasoning, in a complete output (a stream, which sent it as content before the marker came, ends
    on the same message). With thinking off, it stays content (Ollama's LFM2 tests)."""
    params = generate(CORPUS.by_name(MELLUM).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                           "enable_thinking": thinking, "reasoning_format": "auto"})
    out = "Let me think.\n</think>\n\nThe answer is 4."
    got = params.parse(out)
    if not thinking:
        assert (got.reasoning_content, got.content) == ("", out)
        return
    assert (got.reasoning_content.strip(), got.content.strip()) == ("Let me think.", "The answer is 4.")
    assert [d.kind for d in got.diagnostics] == ["missing_reasoning_start"]
    assert got.diagnostics[0].position == out.index("</think>")
    stream = params.stream()
    for i in range(0, len(out), 5):
        stream.feed(out[i:i + 5])
    assert stream.finish() == got
    plain = params.parse("The answer is 4.")
    assert (plain.reasoning_content, plain.content, plain.diagnostics) == ("", "The answer is 4.", ())


@pytest.mark.parametrize(("template", "out", "reasoning", "content"), [
    # gpt-oss's harmony, llm-jp's dialect of it: every message has a header; the first one's left out, what
    # follows its `<|end|>` is read as the messages it is
    ("llm-jp__llm-jp-4.1-8b-thinking", "The user asks.<|end|><|start|>assistant<|channel|>final<|message|>Paris.",
     "The user asks.", "Paris."),
    # Gemma 4: its parser reads a stray `<channel|>` as markup, so the text before it is content there
    ("google__gemma-4-26B-A4B-it", "The user asks.<channel|>Paris.", "The user asks.", "Paris."),
])
def test_reasoning_before_a_stray_end_marker_where_the_parse_reads_on_after_a_start(
        template: str, out: str, reasoning: str, content: str) -> None:
    """The start of the reasoning left out: the text before the end marker is reasoning, and the rest is read
    as it reads after a start (vLLM's and SGLang's reading of `reasoning</think>answer`)."""
    params = generate(CORPUS.by_name(template).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                            "enable_thinking": True, "reasoning_format": "auto"})
    got = params.parse(out)
    assert (got.reasoning_content, got.content) == (reasoning, content)
    end = params.thinking_end_tags[0]
    assert [(d.kind, d.position) for d in got.diagnostics] == [("missing_reasoning_start", out.index(end))]
    assert not unaccounted(out, got, markup_spans(params, out, got))
    stream = params.stream()
    for i in range(0, len(out), 5):
        stream.feed(out[i:i + 5])
    assert stream.finish() == got
    # a lone end marker that ends the message is the format's own ending, not a reasoning's
    if template.startswith("google"):
        assert params.parse("Paris.<channel|>").content == "Paris."


@pytest.mark.parametrize("header", ["<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json",
                                    "<|start|>assistant to=functions.get_weather<|channel|>commentary json"])
def test_a_call_after_a_message_whose_header_cannot_be_read(header: str) -> None:
    """gpt-oss's harmony writes a call as a message to `functions.NAME`, named after the role or after the channel;
    gpt-oss writes a first header it cannot be read by (`<|channel|>commentary 2? ...`, quoted in
    ggml-org/llama.cpp#27720) and then the call. With thinking off, nothing reads that message as reasoning: it is
    content, and the reading resumes at the call's header (its triggers are patterns, which name no text to resume
    at: the call's own headers do)."""
    lead = "<|channel|>commentary 2? The user wants the weather in Paris.<|end|>"
    out = f'{lead}{header}<|message|>{{"city": "Paris"}}'
    check(case("openai__gpt-oss-120b", out, enable_thinking=False),
          {"content": lead + "<|start|>assistant", "tool_calls": [PARIS]}, ["unparsed_text"])


@pytest.mark.parametrize("parallel", [True, False])
def test_several_calls_each_in_a_message_of_its_own(parallel: bool) -> None:
    """gpt-oss's template renders one call per assistant message, `<|start|>assistant to=functions.NAME...`, and
    llama.cpp's parser reads one; a model that calls two tools writes two such messages: both calls, each further
    message reported (as a section written again)."""
    call = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "%s"}'
    out = call % "Paris" + "<|call|><|start|>assistant" + call % "Rome"
    check(case("openai__gpt-oss-120b", out, enable_thinking=False, parallel_tool_calls=parallel),
          {"tool_calls": [PARIS, ROME]}, ["section_repeated"])


MINICPM5 = "llama.cpp__openbmb-MiniCPM5-1B"


def test_reasoning_block_left_out_where_the_format_writes_one() -> None:
    """MiniCPM5's format writes `<think>...</think>` in every answer, and llama.cpp's parser requires it; the
    MiniCPM-SALA template's prompt does not open it (the only one of the format's templates whose prompt does
    not), so the model writes it: an answer without it is content (and the text before an end marker
    reasoning), the repair named."""
    call_text = '<function name="get_weather"><param name="city">Paris</param></function>'
    check(case("openbmb__MiniCPM-SALA", "It is sunny.", enable_thinking=True), {"content": "It is sunny."},
          ["missing_reasoning_block"])
    # (a stream, which sent the text as content before the end marker came, ends on the same message)
    test = case("openbmb__MiniCPM-SALA", f"I need the weather.\n</think>\n\n{call_text}", enable_thinking=True)
    params = generate(test.tester.source, dict(test.request, messages=[{"role": "user", "content": "Hey there!"}],
                                               now=test.tester.now))
    got = params.parse(test.input)
    assert (got.reasoning_content, got.content.strip(C_SPACE), [c.name for c in got.tool_calls]) == \
        ("I need the weather.\n", "", ["get_weather"])
    assert [d.kind for d in got.diagnostics] == ["missing_reasoning_block", "missing_reasoning_start"]
    assert not unaccounted(test.input, got, markup_spans(params, test.input, got))
    stream = params.stream()
    for i in range(0, len(test.input), 5):
        stream.feed(test.input[i:i + 5])
    assert stream.finish() == got


def test_cdata_value_with_whitespace_around_it() -> None:
    """MiniCPM5 writes a value holding markup as `<param name="K"><![CDATA[v]]></param>`; a model puts newlines
    and indentation around the CDATA section: the value is what it holds (llama.cpp's parser reads the raw
    text, markers and all)."""
    out = ('<function name="get_weather">\n  <param name="city">\n    <![CDATA[Zürich "center"]]>\n  </param>\n'
           '</function>')
    check(case(MINICPM5, out, enable_thinking=False),
          {"tool_calls": [call("get_weather", '{"city": "Zürich \\"center\\""}')]}, [])


def test_marker_leaked_into_content_before_a_call_section() -> None:
    """Kimi K2 writes calls in `<|tool_calls_section_begin|>...`, each `<|tool_call_begin|>...`: a call opener
    mentioned in the content cannot be read; the reading resumes at the section's opener, so that opener is
    no content."""
    out = ("Use <|tool_call_begin|> to call.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
           '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
    got = case("moonshotai__Kimi-K2-Instruct", out).expect_diagnostics(["unparsed_text"]).expect(
        {"content": "Use <|tool_call_begin|> to call.", "tool_calls": [PARIS | {"id": "functions.get_weather:0"}]})
    assert got.diagnostics[0].position == out.index("<|tool_call_begin|>")


@pytest.mark.parametrize(("template", "out", "calls"), [
    # Mistral's `[TOOL_CALLS]NAME[ARGS]{json}`: whitespace before the arguments and before the next call
    ("mistralai__Ministral-3-8B-Instruct-2512",
     '[TOOL_CALLS]get_weather[ARGS]\n  {"city": "Paris"}\n\n[TOOL_CALLS]get_weather[ARGS] {"city": "Rome"}',
     [PARIS, call("get_weather", '{"city": "Rome"}')]),
    # Muse Glimmer: whitespace before the `<|eom|>` that ends a call, and between `<|message|>` and the call's
    # `<atem:function_calls>`
    ("llama.cpp__muse-glimmer",
     ' to=get_weather<|message|>\n<atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">'
     'Paris</atem:parameter></atem:invoke></atem:function_calls>\n<|eom|><|start|>assistant to=get_weather'
     '<|message|><atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">Rome'
     '</atem:parameter></atem:invoke></atem:function_calls>', [PARIS, call("get_weather", '{"city": "Rome"}')]),
])
def test_whitespace_between_the_markers_of_a_hand_written_format(template: str, out: str,
                                                                  calls: list[dict[str, str]]) -> None:
    # (formatting, not a repair; the grammar constrains to the template's own whitespace and rejects it)
    check(case(template, out, grammar_check=False), {"tool_calls": calls}, [])


# --- sibling dialects and values the peers' tests show (issue 35, second pass) -------------------------------

COMMAND_A = "CohereLabs__command-a-plus-05-2026-w4a4"


def test_a_lone_call_object_where_the_template_writes_an_array() -> None:
    """Command A writes its calls as a JSON array in `<|START_ACTION|>...<|END_ACTION|>`; a model writes the one
    call as an object without the brackets (smg's Command R7B tests)."""
    out = '<|START_ACTION|>{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}<|END_ACTION|>'
    check(case(COMMAND_A, out, enable_thinking=False), {"tool_calls": [dict(PARIS, id="0")]}, ["call_array"])


def test_the_name_under_the_key_most_json_dialects_use() -> None:
    """The same template names a call's tool `tool_name`; a model writes the `name`/`arguments` keys of the
    Hermes dialect (smg's Command R7B tests, `test_cohere_alternative_field_names`)."""
    out = '<|START_ACTION|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|END_ACTION|>'
    check(case(COMMAND_A, out, enable_thinking=False), {"tool_calls": [PARIS]}, ["name_key", "arguments_key"])


def test_json_arguments_inside_a_markup_invoke() -> None:
    """DeepSeek V4 (chat/handlers/deepseek.py) writes each argument as `<DSML parameter name=... string=...>`; a
    model writes the invoke's body as one JSON object (smg's DeepSeek V3.2 tests)."""
    out = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n{"city": "Paris", "days": 3}\n</｜DSML｜invoke>\n'
           '</｜DSML｜tool_calls>')
    check(case("llama.cpp__deepseek-ai-DeepSeek-V4", out, enable_thinking=False),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "days": 3}')]}, ["json_arguments"])


SUBMIT = {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(("template", "section"), [("deepseek-ai__DeepSeek-V3.2", "function_calls"),
                                                   ("llama.cpp__deepseek-ai-DeepSeek-V4", "tool_calls")])
def test_a_call_without_arguments_as_one_self_closing_element(template: str, section: str) -> None:
    """DeepSeek V3.2 and V4 (chat/handlers/deepseek.py) write a call without arguments as
    `<DSML invoke name="submit">\n</DSML invoke>`; DeepSeek-V4 writes `<DSML invoke name="submit"/>` for such a
    tool in about 5% of SWE-bench trials (sgl-project/sglang PR #23915; SGLang's DSML tests): a call with no
    arguments, also beside a call in the template's form."""
    out = (f'<｜DSML｜{section}>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">'
           f'Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name="submit"/>\n</｜DSML｜{section}>')
    check(case(template, out, enable_thinking=False, tools=[WEATHER, SUBMIT]),
          {"tool_calls": [PARIS, call("submit", "{}")]}, ["self_closing_call"])


def test_a_call_with_arguments_it_requires_is_no_self_closing_element() -> None:
    """A self-closing invoke of a tool whose schema requires an argument is no call the tool can take: content."""
    out = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather"/>\n</｜DSML｜tool_calls>'
    params = generate(CORPUS.by_name("llama.cpp__deepseek-ai-DeepSeek-V4").read_text(), {
        "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "enable_thinking": False,
        "reasoning_format": "auto"})
    got = params.parse(out)
    assert (got.content, got.tool_calls, [d.kind for d in got.diagnostics]) == (out, (), ["unparsed_text"])


def test_python_values_where_the_schema_allows_them() -> None:
    """Seed-OSS writes a value raw between `<parameter=K>` and `</parameter>`; a model spells a boolean, a null and
    an object as Python does (smg's GLM, MiniMax and Qwen3-Coder tests, mlx-lm's MiniCPM5 tests): the JSON
    value, where the schema allows it; where the schema wants a string, `None` is the string it spells."""
    tool = {"type": "function", "function": {"name": "set_flag", "parameters": {"type": "object", "properties": {
        "on": {"type": "boolean"}, "limit": {"type": ["integer", "null"]}, "note": {"type": "string"},
        "opts": {"type": "object"}}}}}
    out = ('<seed:tool_call>\n<function=set_flag>\n<parameter=on>True</parameter>\n<parameter=limit>None</parameter>\n'
           "<parameter=note>None</parameter>\n<parameter=opts>{'unit': 'c', 'deep': [True]}</parameter>\n"
           "</function>\n</seed:tool_call>")
    check(case(SEED, out, tools=[tool], enable_thinking=False),
          {"tool_calls": [call("set_flag", '{"on":true,"limit":null,"note":"None","opts":{"unit": "c", "deep": [true]}}')]},
          ["python_value", "python_value", "python_value"])


def test_an_indented_call_and_an_indented_json_value() -> None:
    """Seed-OSS writes `<seed:tool_call>\\n<function=NAME>` with no indentation; a model indents the call and a
    JSON value (SGLang's and smg's Qwen3-Coder tests): whitespace, the call as written."""
    out = ('<seed:tool_call>\n  <function=get_weather>\n  <parameter=city>Paris</parameter>\n  <parameter=days>\n'
           '    3\n  </parameter>\n  </function>\n</seed:tool_call>')
    # (the grammar is llama.cpp's, which writes no indentation: it rejects the output, as it should)
    got = case(SEED, out, enable_thinking=False).grammar_check(False).expect(
        {"tool_calls": [call("get_weather", '{"city":"Paris","days":3}')]})
    assert not got.diagnostics
    with pytest.raises(ParseError):  # (llama.cpp's reading)
        generate(CORPUS.by_name(SEED).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                    "tools": TOOLS}).parse(out, strict=True)


@pytest.mark.parametrize("template", [QWEN25, SEED])
def test_text_between_two_calls_is_content_and_both_calls_are_read(template: str) -> None:
    """Qwen2.5 (JSON) and Seed-OSS (tagged) write calls one after the other; a model writes text between two
    calls (SGLang's Qwen3-Coder tests): the text is content, the reading resumes at the next call."""
    if template == QWEN25:
        first, second = (f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{c}"}}}}\n</tool_call>'
                         for c in ("Paris", "London"))
    else:
        first, second = (f"<seed:tool_call>\n<function=get_weather>\n<parameter=city>{c}</parameter>\n</function>\n"
                         "</seed:tool_call>" for c in ("Paris", "London"))
    out = first + "\nAnd then:\n" + second
    params = generate(CORPUS.by_name(template).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                           "tools": [WEATHER], "enable_thinking": False,
                                                           "parallel_tool_calls": True})
    got = params.parse(out)
    assert (got.content, [json.loads(c.arguments)["city"] for c in got.tool_calls]) == ("And then:\n",
                                                                                      ["Paris", "London"])
    assert [d.kind for d in got.diagnostics] == ["unparsed_text"]
    assert not unaccounted(out, got, markup_spans(params, out, got))
    stream = params.stream()
    for i in range(0, len(out), 7):
        stream.feed(out[i:i + 7])
    assert stream.finish() == got


def test_two_calls_in_one_call_block() -> None:
    """Gemma 4 (31B) gives each call its own `<|tool_call>...<tool_call|>`; a model writes two calls in one
    (mlx-lm's Gemma 4 tests, found with the 26B template)."""
    out = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}call:get_weather{city:<|"|>London<|"|>}<tool_call|>'
    check(case("google__gemma-4-31B-it", out, enable_thinking=False),
          {"tool_calls": [call("get_weather", '{"city":"Paris"}'), call("get_weather", '{"city":"London"}')]},
          ["calls_grouped"])


def test_an_unreadable_call_before_a_good_one() -> None:
    """Kimi K2 opens each call with `<|tool_call_begin|>`; the first call's arguments are no JSON, the output goes
    on (smg's DeepSeek tests): that call is content, not a call cut off with `{}`; the next call is read."""
    out = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>'
           '{city: Paris}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>'
           '{"city": "London"}<|tool_call_end|><|tool_calls_section_end|>')
    params = generate(CORPUS.by_name("moonshotai__Kimi-K2-Instruct-0905").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER]})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "London"})]
    assert "{city: Paris}" in got.content and "truncated_arguments" not in [d.kind for d in got.diagnostics]
    assert not unaccounted(out, got, markup_spans(params, out, got))


@pytest.mark.parametrize(("template", "output"), [
    # Seed-OSS renders `<function=NAME>\n`: the name's `>` left out
    (SEED, "<seed:tool_call>\n<function=get_weather\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>"),
    # Qwen3.5 renders `<parameter=K>\nV\n</parameter>`: the parameter's `>` left out
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city\nParis\n</parameter>\n</function>\n</tool_call>"),
])
def test_a_marker_without_its_closing_text(template: str, output: str) -> None:
    """A name's marker whose `>` the model left out, where the template writes a newline after it (mlx-lm's
    Qwen3-Coder tests): the line holds the name."""
    check(case(template, output, enable_thinking=False), {"tool_calls": [PARIS | {"arguments": '{"city":"Paris"}'}]},
          ["unclosed_marker"])


@pytest.mark.parametrize(("template", "output"), [
    # Seed-OSS renders `<parameter=K>V</parameter>` (analyzer-derived): the closer written again after a value
    (SEED, "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</parameter>\n</function>"
           "\n</seed:tool_call>"),
    # Qwen3.5 renders `<parameter=K>\nV\n</parameter>` (hand-written format): a closer before the first value
    (QWEN35, "<tool_call>\n<function=get_weather>\n</parameter>\n<parameter=city>\nParis\n</parameter>\n</function>"
             "\n</tool_call>"),
])
def test_a_value_closer_where_no_value_is_open(template: str, output: str) -> None:
    """A value's closer where no value is open (mlx-lm's Qwen3-Coder test writes one after a name whose `>` is
    left out, in a call with no arguments): markup, said by a diagnostic; the call's values are read."""
    check(case(template, output, enable_thinking=False), {"tool_calls": [PARIS | {"arguments": '{"city":"Paris"}'}]},
          ["stray_closer"])


@pytest.mark.parametrize(("template", "output", "value"), [
    # GLM-4.6 renders `<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n` with V as it is (analyzer-derived): the
    # closer and its newline inside the value
    ("zai-org__GLM-4.6", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a </arg_value>\nb</arg_value>\n"
                         "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", "a </arg_value>\nb"),
    # Qwen3.5 renders `<parameter=K>\nV\n</parameter>` with V as it is (hand-written format): the closer on a line
    # of its own inside the value, twice
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\ny\n</parameter>\nz\n"
             "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     "x\n</parameter>\ny\n</parameter>\nz"),
])
def test_a_value_holding_its_closer(template: str, output: str, value: str) -> None:
    """A string value holding its closer's text, as the template renders such a value (it writes values as they
    are; smg's GLM-4.7 test `use </arg_value> in docs`): the closer that text and another closer follow is the
    value's, the one the next argument follows ends it. No repair: the template writes this; llama.cpp's parse
    ends the value at the first closer and fails, and llama.cpp's grammar, which ends it there too, is not
    asked: a model it constrains does not write this."""
    check(case(template, output, enable_thinking=False).grammar_check(False),
          {"tool_calls": [call("get_weather", json.dumps({"city": value, "days": 3}))]}, [])


@pytest.mark.parametrize(("template", "output"), [
    ("zai-org__GLM-4.7-Flash", "get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>\n</user>"),
    (QWEN35, "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</junk>"),
])
def test_a_completion_never_makes_a_value_hold_the_closer_it_appends(template: str, output: str) -> None:
    """A call without its opener whose closer is another tag (Ollama's Laguna tests write `</user>`): the
    completion appended the value's closer after the tag, so the closer the output wrote became the value's own
    (a value holds its closer where another one follows: `test_a_value_holding_its_closer`) and the value
    `Paris</arg_value>\n</user>`. A closer appended at the end is never a field's text: the output stays
    content, said so (it was content with no diagnostic before values could hold closers)."""
    params = generate(CORPUS.by_name(template).read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "enable_thinking": False,
                       "reasoning_format": "auto"})
    got = params.parse(output)
    assert not any("</" in c.arguments for c in got.tool_calls), got
    assert "unparsed_text" in [d.kind for d in got.diagnostics]
    assert not unaccounted(output, got, markup_spans(params, output, got))


# MiniMax M3's call as its template renders it, every tag behind the namespace prefix `]<]minimax[>[`
M3_CALL = (']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="get_weather">]<]minimax[>[<city>Paris]<]minimax[>['
           '</city>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>')


@pytest.mark.parametrize(("after", "message"), [
    ("The answer is sunny.", {"content": "The answer is sunny."}),
    (M3_CALL, {"tool_calls": [PARIS]}),
])
def test_a_reasoning_block_the_request_turned_off(after: str, message: dict[str, Any]) -> None:
    """MiniMax M3 with thinking off: llama.cpp's parser reads a `<mm:think>...</mm:think>` block the model writes
    anyway and drops it, text and all, and the default parse let that stand with no diagnostic (found by reading
    every handler's unmapped scans). The block is reasoning, said by a diagnostic; before an answer, and before a
    call."""
    out = "<mm:think>The user asks about Paris.</mm:think>" + after
    params = generate(CORPUS.by_name("llama.cpp__MiniMax-M3").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "enable_thinking": False,
                       "reasoning_format": "auto", "parallel_tool_calls": True})
    strict = params.parse(out, strict=True)
    assert "Paris" not in strict.reasoning_content + strict.content  # (llama.cpp's reading drops it)
    check(case("llama.cpp__MiniMax-M3", out, enable_thinking=False),
          {"reasoning_content": "The user asks about Paris.", **message}, ["unrequested_reasoning"])


def test_an_object_argument_the_schema_gives_no_properties_as_the_template_writes_it() -> None:
    """MiniMax M3's template writes every mapping as nested elements (its `to_xml`: `NS<k>v NS</k>`, a list as
    `NS<item>` elements, numbers and booleans as their text), whatever the schema says; llama.cpp's parser reads an
    object whose schema lists no properties only as JSON text, so the call was content (found by vLLM's MiniMax M3
    tests; the corpus has no other template of this format). Its own rendering of such a call is read, and the
    JSON text still is. A value that is not of its type (`018956` for an integer: no JSON value) is its text,
    where the call was content."""
    ns = "]<]minimax[>["
    settings = {"mode": "cool", "zones": [1, "attic"], "eco": True}
    rendered = ChatTemplate(CORPUS.by_name("llama.cpp__MiniMax-M3").read_text()).render(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "set_mode", "arguments": {"settings": settings}}}]}],
        add_generation_prompt=False, tools=TOOLS)
    start = rendered.rindex(ns + "<tool_call>")  # (the last: the system prompt shows the format too)
    out = rendered[start:rendered.index(ns + "</tool_call>", start) + len(ns + "</tool_call>")]
    assert ns + "<mode>cool" + ns + "</mode>" in out  # (the template's own form)
    message = {"tool_calls": [call("set_mode", json.dumps({"settings": settings}))]}
    # (the grammar is llama.cpp's, which constrains such an argument to JSON text: it rejects the elements)
    got = case("llama.cpp__MiniMax-M3", out, enable_thinking=False).grammar_check(False).expect(message)
    assert not got.diagnostics
    as_json = out.replace(out[out.index(ns + "<settings>"):out.index(ns + "</invoke>")],
                          f"{ns}<settings>{json.dumps(settings)}{ns}</settings>")
    case("llama.cpp__MiniMax-M3", as_json, enable_thinking=False).expect(message)
    typed = out.replace(ns + '<invoke name="set_mode">', ns + '<invoke name="get_weather">' + ns + "<city>Paris" + ns + "</city>"
        + ns + "<days>018956" + ns + "</days>" + ns + "</invoke>\n" + ns + '<invoke name="set_mode">')
    check(case("llama.cpp__MiniMax-M3", typed, enable_thinking=False).grammar_check(False),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "days": "018956"}'), *message["tool_calls"]]},
          ["argument_type"])


@pytest.mark.parametrize(("template", "output", "request_"), [
    # Ling 3 writes `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>`, a value its schema does not
    # let be a string as JSON: the call was content, with no diagnostic
    ("llama.cpp__inclusionai-ling-3.0-flash", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
     "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>three</arg_value>\n</tool_call>", {}),
    # Kimi K3 writes `<|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>`; llama.cpp's mapper writes
    # a value its schema does not let be a string into the arguments as it is: they were no JSON (`"days":three`)
    (KIMI_K3, K3_CALL.replace('<|close|>call', '<|open|>argument key="days" type="integer"<|sep|>three'
                                               '<|close|>argument<|sep|><|close|>call'),
     {"chat_template_kwargs": {"thinking": False}}),
])
def test_a_value_that_is_not_of_its_type_is_its_text(template: str, output: str, request_: dict[str, Any]) -> None:
    # (found by trying a mistyped value in each hand-written format; the loose tagged readings keep one so)
    check(case(template, output, **request_),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "days": "three"}')]}, ["argument_type"])


def test_a_section_whose_call_cannot_be_read_keeps_its_opener() -> None:
    """Kimi K2 writes `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0...`; a call whose id has no
    `functions.` prefix cannot be read, and its text is content, the section's opener too: the reading cut back
    only to the call's own opener, so the section's went as markup (found by vLLM's Kimi K2 test
    `no_functions_prefix`, on Kimi K2 Instruct; here Kimi K2 Thinking)."""
    out = ('A. <|tool_calls_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>{"city": "T"}'
           '<|tool_call_end|><|tool_calls_section_end|> and more')
    check(case("moonshotai__Kimi-K2-Thinking", out, enable_thinking=False), {"content": out},
          ["unparsed_text", "unparsed_text"])


def test_whitespace_between_markers_the_template_writes_together() -> None:
    """Kimi K2 Thinking writes `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|>`
    with nothing between the markers; a model puts spaces and newlines there (smg's Kimi K2 tests): formatting."""
    out = ('<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.get_weather:0 <|tool_call_argument_begin|> '
           '{"city": "Paris"} <|tool_call_end|>\n<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>'
           '{"city": "London"}<|tool_call_end|>\n<|tool_calls_section_end|>')
    # (the grammar is llama.cpp's, which writes the markers together: it rejects the output, as it should)
    got = case("moonshotai__Kimi-K2-Thinking", out, enable_thinking=False).grammar_check(False).expect(
        {"tool_calls": [dict(PARIS, id="functions.get_weather:0"), dict(LONDON, id="functions.get_weather:1")]})
    assert not got.diagnostics
    params = generate(CORPUS.by_name("moonshotai__Kimi-K2-Thinking").read_text(), {
        "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS, "enable_thinking": False,
        "reasoning_format": "auto"})
    with pytest.raises(ParseError):
        params.parse(out, strict=True)


def test_an_unreadable_invoke_before_a_good_one() -> None:
    """DeepSeek V4 writes `<DSML invoke name=...>` elements in one block; the first holds neither parameters nor
    JSON (smg's DeepSeek V3.2 tests): it is content, the next invoke is read."""
    out = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\nnot valid at all\n</｜DSML｜invoke>\n'
           '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">London</｜DSML｜parameter>\n'
           '</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    params = generate(CORPUS.by_name("llama.cpp__deepseek-ai-DeepSeek-V4").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "enable_thinking": False,
                       "parallel_tool_calls": True})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "London"})]
    assert "not valid at all" in got.content and "truncated_arguments" not in [d.kind for d in got.diagnostics]


def test_arguments_as_the_json_block_the_template_writes_for_a_string() -> None:
    """Kimi K3's template writes a call's arguments given as a JSON string (or its `_xtml_json_block`) as one
    `<|open|>json type="object"<|sep|>...<|close|>json<|sep|>` section, where llama.cpp reads only argument
    sections (mlx-lm's Kimi K3 tests); and a call without its tool attribute before a good one is content."""
    out = ('<|close|>response<|sep|><|open|>tools<|sep|><|open|>call index="1"<|sep|><|close|>call<|sep|>'
           '<|open|>call tool="get_weather" index="2"<|sep|><|open|>json type="object"<|sep|>{"city": "Paris"}'
           '<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>')
    params = generate(CORPUS.by_name("llama.cpp__Kimi-K3").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "enable_thinking": False,
                       "chat_template_kwargs": {"thinking": False}})  # (the prompt then opens the response)
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert '<|open|>call index="1"<|sep|>' in got.content
    assert {"json_arguments", "unparsed_text"} <= {d.kind for d in got.diagnostics}


def test_a_tool_name_the_template_escapes_in_its_attribute() -> None:
    """Kimi K3's template escapes an attribute's value (`escape_attr`: `&` as `&amp;`, `"` as `&quot;`), so it
    writes a call to `find&replace` as `tool="find&amp;replace"`; llama.cpp's parser matches the name as declared
    and keeps the call as content (mlx-lm's Kimi K3 test found it with a call without arguments). The output
    here is the template's own rendering of two calls, the escaped one with an argument, parsed whole and
    streamed: both are read, with no repair (the template writes them so)."""
    source = CORPUS.by_name("llama.cpp__Kimi-K3").read_text()
    tools = [WEATHER, {"type": "function", "function": {"name": "find&replace", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}}}}]
    calls = [{"type": "function", "function": {"name": n, "arguments": a}}
             for n, a in (("find&replace", {"text": "a & b"}), ("get_weather", {"city": "Paris"}))]
    request = {"messages": [{"role": "user", "content": "Hi"}], "tools": tools, "parallel_tool_calls": True}
    tmpl = ChatTemplate(source)
    prompt = tmpl.render(request["messages"], tools=tools, add_generation_prompt=True)
    whole = tmpl.render([*request["messages"], {"role": "assistant", "content": "", "tool_calls": calls}],
                        tools=tools, add_generation_prompt=False)
    assert whole.startswith(prompt) and 'tool="find&amp;replace"' in whole
    out = whole[len(prompt):]
    params = generate(source, request)
    want = [("find&replace", {"text": "a & b"}), ("get_weather", {"city": "Paris"})]
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == want
    assert not got.diagnostics and not got.content.strip(C_SPACE)
    folded = ChatMessage()
    stream = params.stream()
    for i in range(0, len(out), 5):
        folded = apply_deltas(folded, stream.feed(out[i:i + 5]))
    final = stream.finish()
    folded = apply_deltas(folded, stream.last_deltas)
    assert folded.tool_calls == final.tool_calls == got.tool_calls
    with pytest.raises(ParseError):
        params.parse(out, strict=True)


def test_tools_whose_names_differ_only_by_dash_and_underscore() -> None:
    """llama.cpp names a tool's rule with `_` made `-`: `get-weather` and `get_weather` share one rule, the later
    tool's, and a call to the earlier one is refused (checked against the live oracle; mlx-lm's Mistral tests
    found it). The strict parse keeps the C++'s verdict; the default parse reads both calls, here in Qwen2.5's
    own form."""
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}} for name in ("get-weather", "get_weather")]
    out = ('<tool_call>\n{"name": "get-weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
           '<tool_call>\n{"name": "get_weather", "arguments": {"city": "London"}}\n</tool_call>')
    params = generate(CORPUS.by_name(QWEN25).read_text(), {"messages": [{"role": "user", "content": "Hi"}],
                                                          "tools": tools, "parallel_tool_calls": True})
    with pytest.raises(ParseError):
        params.parse(out, strict=True)
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get-weather", {"city": "Paris"}),
                                                                           ("get_weather", {"city": "London"})]
    assert got.content == "" and not got.diagnostics


@pytest.mark.parametrize("space", ["", "\n\n  ", " "])
def test_a_markers_whitespace_is_formatting(space: str) -> None:
    """Hy3 renders `</arg_key:opensource>\\n<arg_value:opensource>` and a newline after each marker of the call
    (the analyzer's tagged form); models write those markers on one line or with blank lines and indentation
    (the realistic variants `markers_without_space`/`markers_with_extra_space` found it on GLM-4.7's
    `</arg_key><arg_value>`): the same call. Nothing is reported but the section opener written without the
    newline the template puts after it, a `call_opener_spelling` as for every call opener."""
    out = (f"<tool_calls:opensource>{space}<tool_call:opensource>get_weather<tool_sep:opensource>{space}"
           f"<arg_key:opensource>city</arg_key:opensource>{space}<arg_value:opensource>Paris</arg_value:opensource>"
           f"{space}</tool_call:opensource>{space}</tool_calls:opensource>")
    params = generate(CORPUS.by_name("llama.cpp__tencent-Hy3").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "reasoning_format": "auto"})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert got.content == ""
    assert [d.kind for d in got.diagnostics] == ([] if space.startswith("\n") else ["call_opener_spelling"])
    assert not unaccounted(out, got, markup_spans(params, out, got))


@pytest.mark.parametrize("space", ["", "\n\n  "])
def test_the_whitespace_around_a_fenced_json_block_is_formatting(space: str) -> None:
    """axolotl's DeepSeek V3 template renders `NAME\\n```json\\n{...}\\n```` inside its call markers (the
    analyzer's name suffix and call close); the block without those newlines, or with more, is the same call."""
    out = (f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather{space}```json{space}"
           f'{{"city": "Paris"}}{space}```{space}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    params = generate(CORPUS.by_name("axolotl__deepseek_v3").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER]})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert got.content == "" and not got.diagnostics


# --- a name attribute spelled otherwise (issue 35: mlx-lm's MiniCPM5 and Muse Spark tests) --------------------
# Each form is checked on the other template than the one whose peer test showed it.

@pytest.mark.parametrize(("template", "out", "enable_thinking"), [
    # single quotes (mlx-lm's MiniCPM5 test), on Muse Glimmer's ATEM markup
    ("llama.cpp__muse-glimmer",
     " to=get_weather<|message|><atem:function_calls><atem:invoke name='get_weather'><atem:parameter name='city'>"
     "Paris</atem:parameter></atem:invoke></atem:function_calls>", True),
    # another attribute before the name, and one after it (mlx-lm's Muse Spark test), on MiniCPM5
    ("llama.cpp__openbmb-MiniCPM5-1B",
     '<function type="tool" name="get_weather">\n<param name="city" type="string">Paris</param>\n</function>', False),
    # no whitespace before the name at all, as a tokenizer that drops a space writes it (vLLM's MiniCPM5 tests,
    # `<functionname="get_weather"><paramname="city">`), on Muse Glimmer
    ("llama.cpp__muse-glimmer",
     ' to=get_weather<|message|><atem:function_calls><atem:invokename="get_weather"><atem:parametername="city">'
     "Paris</atem:parameter></atem:invoke></atem:function_calls>", True),
])
def test_a_name_attribute_in_single_quotes_or_beside_other_attributes(template: str, out: str,
                                                                      enable_thinking: bool) -> None:
    check(case(template, out, enable_thinking=enable_thinking), {"tool_calls": [PARIS]},
          ["attribute_spelling", "attribute_spelling"])


def test_several_invokes_in_the_block_the_template_writes_around_one() -> None:
    """Muse Glimmer writes each call as its own message, `<atem:function_calls>` around one `<atem:invoke>`; a model
    puts several in one block (mlx-lm's Muse Spark test; the corpus has no other template of this format): each
    is a call. Three here, the last with an object value, on lines of their own."""
    out = (' to=get_weather<|message|><atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">'
           'Paris</atem:parameter></atem:invoke>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">Rome'
           '</atem:parameter>\n</atem:invoke><atem:invoke name="set_mode"><atem:parameter name="settings">{"a": 1}'
           '</atem:parameter></atem:invoke>\n</atem:function_calls>')
    check(case("llama.cpp__muse-glimmer", out),
          {"tool_calls": [PARIS, call("get_weather", '{"city": "Rome"}'), call("set_mode", '{"settings": {"a": 1}}')]},
          ["calls_grouped", "calls_grouped"])


def test_an_argument_the_tool_does_not_declare_in_a_name_attribute_format() -> None:
    """MiniCPM5 and Muse Glimmer name each argument in an attribute; a model passes one the tool's schema does not
    list (mlx-lm's MiniCPM5 test): kept, its value as text, as for Python keyword arguments. Checked on Muse."""
    out = (' to=get_weather<|message|><atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">'
           'Paris</atem:parameter><atem:parameter name="units">metric</atem:parameter></atem:invoke>'
           '</atem:function_calls>')
    check(case("llama.cpp__muse-glimmer", out),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "units": "metric"}')]}, ["undeclared_argument"])


def test_a_call_opener_mentioned_in_the_text_before_the_call() -> None:
    """A `<tool_call>` the model mentions in its text before its real call (the realistic variant
    `leaked_marker`, which the matrix found unread for Ling 3: its end-of-turn tail took the call as content,
    silently). The text keeps the mentions; the call after them is read. Mentions the variant does not make: one
    at the start of a line, one with the closer too."""
    out = ("Calls look like <tool_call> NAME ... </tool_call>.\n<tool_call> comes next:\n"
           "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>")
    # (the lazy grammar starts at the first `<tool_call>`: only an unconstrained model writes this)
    check(case("llama.cpp__inclusionai-ling-3.0-flash", out, enable_thinking=False, grammar_check=False),
          {"content": "Calls look like <tool_call> NAME ... </tool_call>.\n<tool_call> comes next:",
           "tool_calls": [PARIS]}, [])


@pytest.mark.parametrize("space", ["\n", "\n\n  "])
def test_whitespace_before_the_message_closer_after_the_calls(space: str) -> None:
    """Kimi K3 closes the message (`<|close|>message<|sep|>`) right after its tools section; a model that puts
    a line break or an indented blank line before it (the realistic variant `markers_with_extra_space`, which
    the matrix found kept as content) still closes its message there. Here after two calls, with arguments as
    argument sections."""
    out = ('<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
           '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>'
           '<|open|>call tool="get_weather" index="2"<|sep|><|open|>argument key="city" type="string"<|sep|>'
           f'Rome<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>{space}<|close|>message<|sep|>'
           '<|end_of_msg|>')
    params = generate(CORPUS.by_name("llama.cpp__Kimi-K3").read_text(),
                      {"messages": [{"role": "user", "content": "Hi"}], "tools": [WEATHER], "enable_thinking": False,
                       "chat_template_kwargs": {"thinking": False}, "parallel_tool_calls": True})
    got = params.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [("get_weather", {"city": "Paris"}),
                                                                             ("get_weather", {"city": "Rome"})]
    assert got.content == "" and got.diagnostics == ()


PARIS_ROME = ("Paris", "Rome")


@pytest.mark.parametrize(("template", "first", "second", "spaced"), [
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n',
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>', True),
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>", False),
    (GLM, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>",
     "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>", False),
    ("deepseek-ai__DeepSeek-V3.1", '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}',
     '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Rome"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', True),
])
def test_a_call_closer_left_out_before_the_next_call(template: str, first: str, second: str, spaced: bool) -> None:
    """A call whose closer never comes (JustVugg/colibri#505), here before the next call: a template that
    renders a wrapper around each call (`<tool_call>` ... `</tool_call>`; DeepSeek V3.1's `<｜tool▁call▁begin｜>` ...
    `<｜tool▁call▁end｜>` inside its section) has the call end where the next call's opener begins. One of the two
    calls was lost to the content (Qwen2.5, GLM, DeepSeek: the second; Qwen3.5: the first)."""
    args = '{{"city": "{}"}}' if spaced else '{{"city":"{}"}}'
    check(case(template, first + second, enable_thinking=False),
          {"tool_calls": [call("get_weather", args.format(c)) for c in PARIS_ROME]}, ["missing_call_closer"])


@pytest.mark.parametrize(("template", "first", "again"), [
    (QWEN25, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n',
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
    (QWEN35, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"),
])
def test_a_call_written_again_after_itself_without_its_closer_is_one_call(template: str, first: str,
                                                                          again: str) -> None:
    """The same call twice, the first left without its closer (Ollama's Laguna parser test
    `IgnoresDuplicatedNestedToolCall`): the model started the call over. One call, the repeat's text kept in a
    diagnostic; where the second call differs, both are calls (above)."""
    args = '{"city": "Paris"}' if template == QWEN25 else '{"city":"Paris"}'
    check(case(template, first + again, enable_thinking=False), {"tool_calls": [call("get_weather", args)]},
          ["missing_call_closer", "restarted_call"])


@pytest.mark.parametrize(("template", "garbled"), [
    (QWEN35, "{\n</tool_call>"), (QWEN35, "</parameter></tool_call>"),
    ("Qwen__Qwen3-Coder-30B-A3B-Instruct", "\nbeta\n</tool_call>"),
])
def test_a_call_whose_wrapper_end_is_garbled_after_it_is_read(template: str, garbled: str) -> None:
    """Text between a whole call's `</function>` and its `</tool_call>` (found by the random outputs of
    tests/recovery/test_no_text_lost.py, where the stream showed a call the final message did not hold): the
    format has no end anchor, so the parse stopped before the call it could not read to its end, and the whole
    output was content. The call is read, as far as it goes; the rest is content."""
    out = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>" + garbled
    check(case(template, out, enable_thinking=False),
          {"content": garbled.lstrip(C_SPACE), "tool_calls": [call("get_weather", '{"city":"Paris"}')]},
          ["missing_closer", "unparsed_text"])


@pytest.mark.parametrize(("template", "out", "cut"), [
    ("Qwen__Qwen3-0.6B", "Let me check <tool", "<tool"),
    (QWEN25, 'Done.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_c',
     "<tool_c"),
    (GLM, "Let me check <tool_ca", "<tool_ca"),
])
def test_an_opener_the_end_cuts_off_is_text(template: str, out: str, cut: str) -> None:
    """An output that stops inside a call's opener (`<tool`, in lmdeploy's response-parser tests): no marker was
    written, yet the text went, with no diagnostic (llama.cpp's parse takes the start of a marker at the end for
    the marker to come). It is content. (A closer cut off, `</tool_ca`, still closes the call it ends:
    `partial_closer_at_end` in tests/recovery/test_variants.py.)"""
    calls = [call("get_weather", '{"city": "Paris"}')] if "get_weather" in out else []
    content = out[:out.index("<tool_call>")] + cut if calls else out
    check(case(template, out, enable_thinking=False), {"content": content, "tool_calls": calls}, ["unparsed_text"],
          space_after=False)


@pytest.mark.parametrize(("template", "out"), [
    ("moonshotai__Kimi-K2.6", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                              "<|tool_call_argument_begin|><|tool_call_end|><|tool_calls_section_end|>"),
    ("deepseek-ai__DeepSeek-V3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                                   "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
])
def test_a_call_whose_arguments_string_is_empty(template: str, out: str) -> None:
    """Kimi K2.6 and DeepSeek V3.1 write a call's arguments as the string they are, so empty arguments render
    nothing between the markers (lmdeploy's Kimi K2 tests read `{}` there). The call was content."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    read = call("get_weather", "{}")
    if "functions." in out:  # (Kimi's call id, written with the call)
        read["id"] = "functions.get_weather:0"
    check(case(template, out, enable_thinking=False, tools=[BASH, weather]), {"tool_calls": [read]},
          ["empty_arguments"])


@pytest.mark.parametrize(("template", "output"), [
    ("zai-org__GLM-4.7-Flash", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a </tool_call> b</arg_value>"
                               "</tool_call>"),
    ("llama.cpp__poolside-Laguna-XS.2", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>a </tool_call> b"
                                        "</arg_value>\n</tool_call>"),
])
def test_a_value_holding_the_calls_closer(template: str, output: str) -> None:
    """A string value holding the call's closer, as the template renders `a </tool_call> b` (it writes values as
    they are): llama.cpp's parse reads it, but with text after the call the reading ended the value at that
    closer and kept the rest as content (lmdeploy's GLM-4.7 tests), and a stream did so even with the whole output
    in one chunk (TensorRT-LLM's Laguna tests). The closer that text and the value's closer follow is the value's."""
    check(case(template, output + "Done.", enable_thinking=False).grammar_check(False),
          {"content": "Done.", "tool_calls": [call("get_weather", '{"city":"a </tool_call> b"}')]}, ["unparsed_text"])


@pytest.mark.parametrize("between", [" ", "\n"])
def test_an_opener_of_joined_tags_written_with_whitespace_ends_the_content(between: str) -> None:
    """Intern-S1 writes a call's opener as two tags together, `<|action_start|><|plugin|>`; a model that writes
    whitespace between them (SGLang's interns1 detector tests decode `<|action_start|> <|plugin|>`) opens the call
    all the same, and the text before it ends there: the content was the text and the markers. A mention of the
    first tag alone stays content."""
    out = (f'Let me check.<|action_start|>{between}<|plugin|>\n{{"name": "get_weather", "parameters": '
           '{"city": "Paris"}}<|action_end|>')
    # (the lazy grammar wakes at the template's opener: only an unconstrained model writes this)
    test = case("internlm__Intern-S1-mini", out, enable_thinking=False, grammar_check=False)
    got = test.expect_tool_calls([PARIS], content="Let me check.")
    assert "missing_call_opener" not in [d.kind for d in got.diagnostics]
    mention = "Use <|action_start|> then the plugin."
    case("internlm__Intern-S1-mini", mention, enable_thinking=False).expect_content(mention)


@pytest.mark.parametrize(("template", "out"), [
    ("swiss-ai__Apertus-8B-Instruct-2509", "<|tools_prefix|>["),
    (QWEN25, 'Let me check.\n<tool_call>\n{"nam'),
    (GLM, "Sure.<tool_call>"),
    ("mistralai__Mistral-Nemo-Instruct-2407", "Sure. [TOOL_CALLS]"),
    (QWEN35, "Let me see.\n<tool_call>\n<function=bash"),
    ("Qwen__Qwen3-Coder-30B-A3B-Instruct", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n"
                                           "</function>\n</tool_call>\n<tool_call>\n<function=ba"),
])
def test_a_call_section_the_output_ends_in_before_any_call_is_text(template: str, out: str) -> None:
    """An output cut right after a call section's opener, or inside a call before its name is read (SGLang's
    Apertus and Step 3.5 detector tests): the markup opened no call, and it went with no diagnostic, the 17
    characters of `<|tools_prefix|>[` all of the output. It is content, as an opener the end cuts off is."""
    calls = [call("bash", '{"command": "ls"}')] if "</tool_call>" in out else []
    cut = out.rindex("<tool_call>") if calls else 0
    check(case(template, out, enable_thinking=False, tools=[BASH]), {"content": out[cut:], "tool_calls": calls},
          ["unparsed_text"], space_after=False)


K3_CODE_CALL = ('<|open|>tools<|sep|><|open|>call tool="{name}" index="1"<|sep|><|open|>argument key="code" '
                'type="string"<|sep|>print(1)<|close|>argument<|sep|>{extra}<|close|>call<|sep|><|close|>tools<|sep|>')
PYTHON_TOOL = {"type": "function", "function": {"name": "python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}


def test_a_response_opener_written_again_after_the_prompts() -> None:
    """With thinking off Kimi K3's generation prompt opens the response channel, `<|open|>response<|sep|>`, and a
    model writes that opener again (SGLang's Kimi K3 detector tests): markup, the answer after it."""
    out = "<|open|>response<|sep|>hi there<|close|>response<|sep|>"
    check(case(KIMI_K3, out, chat_template_kwargs={"thinking": False}), {"content": "hi there"},
          ["repeated_opener"])


@pytest.mark.parametrize(("name", "extra", "arguments", "repairs"), [
    ("python", '<|open|>argument key="n" type="number"<|sep|>42<|close|>argument<|sep|><|open|>argument key="note" '
               'type="string"<|sep|>7<|close|>argument<|sep|>',
     '{"code": "print(1)", "n": 42, "note": "7"}', ["undeclared_argument", "undeclared_argument"]),
    ("other", "", '{"code": "print(1)"}', ["unknown_tool"]),
])
def test_a_call_in_kimi_k3s_form_beyond_the_declared_tools(name: str, extra: str, arguments: str,
                                                           repairs: list[str]) -> None:
    """Kimi K3 names a call's tool and each argument in attributes of their own; an argument the schema does not
    list, or a tool the request does not declare (SGLang's Kimi K3 detector tests), left the whole tools section
    content. Kept as written, as in the other formats with name markers; an undeclared argument's type attribute
    says whether its value is a string."""
    out = "Let me run it." + K3_CODE_CALL.format(name=name, extra=extra)
    check(case(KIMI_K3, out, chat_template_kwargs={"thinking": False}, tools=[PYTHON_TOOL]),
          {"content": "Let me run it.", "tool_calls": [call(name, arguments)]}, repairs)


@pytest.mark.parametrize(("template", "out", "city"), [
    ("typhoon-ai__typhoon2.1-gemma3-4b", "[get_weather(city='''Pa'ris ]''')]", "Pa'ris ]"),
    ("llama.cpp__LFM2.5-8B-A1B", '<|tool_call_start|>[get_weather(city="""Pa"ris\nnext""")]<|tool_call_end|>',
     'Pa"ris\nnext'),
])
def test_a_triple_quoted_python_string(template: str, out: str, city: str) -> None:
    """Python quotes a string holding quotes or lines in triple quotes (SGLang's pythonic streaming tests); the
    templates write `tojson` strings. The value was read as a one-quote string keeping two quotes each side."""
    check(case(template, out, enable_thinking=False, tools=[WEATHER]),
          {"tool_calls": [call("get_weather", json.dumps({"city": city}))]}, ["python_value"])


@pytest.mark.parametrize("template", [GLM, "tencent__Hy-MT2-30B-A3B"])
def test_a_call_to_an_undeclared_tool_between_calls_where_the_name_has_no_marker(template: str) -> None:
    """GLM-4.7 and Hy write a call's name right after `<tool_call>`, with no marker of its own, so a call to a
    tool the request does not declare is no call there (a word after a left-out opener would become one); it is
    content, and the reading resumes at the next call (SGLang's Hunyuan detector tests). Its opener went with it
    into neither, and the call after it was content too."""
    sep = "<tool_sep>" if "Hy" in template else ""
    one = "<tool_call>{}" + sep + "<arg_key>city</arg_key><arg_value>{}</arg_value></tool_call>"
    unknown = "<tool_call>nope" + sep + "<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>"
    calls = one.format("get_weather", "Paris") + unknown + one.format("get_weather", "Rome")
    out = f"<tool_calls>\n{calls}\n</tool_calls>" if sep else "Checking." + calls
    content = ("Checking." if not sep else "") + unknown
    check(case(template, out, enable_thinking=False, grammar_check=False),
          {"content": content, "tool_calls": [PARIS, call("get_weather", '{"city": "Rome"}')]}, ["unparsed_text"])


PICK = {"type": "function", "function": {"name": "pick", "parameters": {
    "type": "object", "properties": {"level": {"enum": ["low", 3]}}, "required": ["level"]}}}
INSPECT = {"type": "function", "function": {"name": "inspect", "parameters": {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "text"}, "value": {"type": "string"}}, "required": ["kind"]},
    {"type": "object", "properties": {"kind": {"const": "count"}, "value": {"type": "integer"}},
     "required": ["kind"]}]}}}


@pytest.mark.parametrize(("template", "out"), [
    (SEED, "<seed:tool_call>\n<function=pick>\n<parameter=level>3</parameter>\n</function>\n</seed:tool_call>"),
    (GLM, "<tool_call>pick<arg_key>level</arg_key><arg_value>3</arg_value></tool_call>"),
])
def test_a_raw_value_none_of_the_strings_its_schema_enumerates(template: str, out: str) -> None:
    """Seed-OSS and GLM-4.7 write a string value raw and any other as JSON, so `3` under `{"enum": ["low", 3]}` is
    the number (SGLang's GLM-4.7 schema tests): llama.cpp reads a raw value as a string wherever the schema admits
    some string, and gave "3", a value the schema does not admit. One of the strings stays a string."""
    check(case(template, out, enable_thinking=False, tools=[PICK]), {"tool_calls": [call("pick", '{"level": 3}')]},
          ["enumerated_value"])
    case(template, out.replace(">3<", ">low<"), enable_thinking=False, tools=[PICK]).expect_tool_calls(
        [call("pick", '{"level": "low"}')])


@pytest.mark.parametrize(("kind", "value"), [("count", 7), ("text", "7")])
@pytest.mark.parametrize("template", [GLM, "MiniMaxAI__MiniMax-M2"])
def test_a_tool_whose_parameters_are_a_union_at_the_root(template: str, kind: str, value: Any) -> None:
    """A tool's parameters as a `oneOf` of object schemas (SGLang's GLM-4.7 schema tests): llama.cpp finds no
    parameter there and reads no argument, so the call was content (GLM-4.7) or read as a tool the request does
    not declare, its values typed by no schema (MiniMax M2). The call is read by the object schema that fits it,
    its `kind` telling which: `7` is a number where the kind is "count", a string where it is "text"."""
    if "GLM" in template:
        out = (f"<tool_call>inspect<arg_key>kind</arg_key><arg_value>{kind}</arg_value><arg_key>value</arg_key>"
               "<arg_value>7</arg_value></tool_call>")
    else:
        out = (f'<minimax:tool_call>\n<invoke name="inspect">\n<parameter name="kind">{kind}</parameter>\n'
               '<parameter name="value">7</parameter>\n</invoke>\n</minimax:tool_call>')
    expected = {"tool_calls": [call("inspect", json.dumps({"kind": kind, "value": value}))]}
    repairs = [*(["reasoning_ended_by_call"] if "MiniMax" in template else []), "union_parameters"]
    check(case(template, out, enable_thinking=False, tools=[INSPECT]).grammar_check(False), expected, repairs)


def test_a_call_to_an_undeclared_tool_whose_name_the_template_escapes() -> None:
    """Kimi K3 writes a call's name in an attribute it escapes (`tool="x&quot;y"`); a call to a tool the request
    does not declare was read only where its name held none of the escaped characters (SGLang's Kimi K3 detector
    tests: `a&amp;b`), else the tools section was content. The name is the text up to the attribute's quote,
    unescaped as a declared name is."""
    out = "Let me run it." + K3_CODE_CALL.format(name="x&quot;y &amp; z", extra="")
    check(case(KIMI_K3, out, chat_template_kwargs={"thinking": False}, tools=[PYTHON_TOOL]),
          {"content": "Let me run it.", "tool_calls": [call('x"y & z', '{"code": "print(1)"}')]}, ["unknown_tool"])


@pytest.mark.parametrize(("template", "out", "request_", "repairs"), [
    # the prompt opens `<think>\n` whatever the request says; calls begin `<｜tool_calls_begin｜>` (SGLang's Step3
    # streaming tests)
    ("stepfun-ai__step3", "The price is 10<｜", {}, ["prompt_reasoning", "unparsed_reasoning"]),
    # the prompt opens `<think>`; calls begin `<｜DSML｜function_calls>` (hand-written format)
    ("deepseek-ai__DeepSeek-V3.2", "The price is 10<｜DSML｜fun", {"enable_thinking": True}, ["unparsed_reasoning"]),
])
def test_a_call_marker_the_end_cuts_while_reasoning_is_open_stays_in_the_reasoning(
        template: str, out: str, request_: dict[str, Any], repairs: list[str]) -> None:
    """Where the output ends inside a call marker's text, the model wrote no marker: the text is its own, and
    stands in the reasoning the prompt left open. It was moved into the content, after the reasoning. (A closer
    cut off, `</thi`, closes what it began: `partial_closer_at_end` in tests/recovery/test_variants.py.)"""
    check(case(template, out, **request_), {"reasoning_content": out}, repairs, space_after=False)


@pytest.mark.parametrize(("template", "out", "request_", "unread"), [
    # `</｜DSML｜parameter>` left out, the call's `</｜DSML｜invoke>` and the block's closer written (SGLang's strict
    # DSML tests); the block's opener is one text, the call (where the reading resumes) another (with whitespace
    # after the output, the strict reading of that call, llama.cpp's, stands: content, with no diagnostic of its own)
    ("deepseek-ai__DeepSeek-V3.2", 'Sure.<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter '
     'name="city" string="true">Paris</｜DSML｜invoke>\n</｜DSML｜function_calls>', {"enable_thinking": False}, 2),
    # an element closed by another name (SGLang's MiniMax M3 detector tests)
    ("llama.cpp__MiniMax-M3", M3_CALL.replace("Paris]<]minimax[>[</city>", "Paris]<]minimax[>[</wrong>"), {}, 1),
    # `<|close|>argument<|sep|>` left out before `<|close|>call<|sep|>` (the `<|sep|>` the output ends with is
    # formatting)
    (KIMI_K3, 'Let me.<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" '
     'type="string"<|sep|>Paris<|close|>call<|sep|><|close|>tools<|sep|>',
     {"chat_template_kwargs": {"thinking": False}}, 2),
])
def test_a_value_never_closed_before_its_calls_closers_in_a_hand_written_format(
        template: str, out: str, request_: dict[str, Any], unread: int) -> None:
    """A value's closer left out where the call's closers follow is no form these templates write; the completion
    of a cut output read the value up to the end, the call's closers in it (`Paris</｜DSML｜invoke>...`). A value
    never runs over the markup that ends its call: the output was not cut off, and what cannot be read is text
    (as SGLang keeps it)."""
    content = out.removesuffix("<|sep|>") if template == KIMI_K3 else out
    check(case(template, out, grammar_check=False, **request_), {"content": content}, ["unparsed_text"] * unread,
          space_after="DSML" not in out)


@pytest.mark.parametrize(("template", "out", "calls"), [
    # Command R7B writes each call id first, `{"tool_call_id": "0", "tool_name": ..., "parameters": ...}`
    ("CohereForAI__c4ai-command-r7b-12-2024__tool_use", '<|START_ACTION|>[\n    {"tool_call_id": "0", "', 0),
    ("CohereForAI__c4ai-command-r7b-12-2024__tool_use", '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": '
     '"get_weather", "parameters": {"city": "Paris"}},\n    {"tool_call_id": "1", "', 1),
    # Falcon-H1-Tiny writes `{"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}`
    ("tiiuae__Falcon-H1-Tiny-Tool-Calling-90M", '<tool_call>\n[\n  {\n    "id": "call00001",\n    "type": "function",'
     '\n    "function": {\n      "', 0),
])
def test_a_call_the_end_cuts_before_its_name_keeps_what_it_wrote(template: str, out: str, calls: int) -> None:
    """A call the end of the output cuts before its name, where the template writes the call's id first: the id
    was read into the call, which never reached the message (no name), and the call's text went with no
    diagnostic (every call marker before the id, the id itself). It is content, from the call's start (a call
    the format opens with no marker of its own) or its section's opener."""
    cut = out.rindex('{"tool_call_id": "1"') if calls else 0
    check(case(template, out, enable_thinking=False, grammar_check=False),
          {"content": out[cut:], "tool_calls": [dict(PARIS, id="0")] if calls else []}, ["unparsed_text"],
          space_after=False)


@pytest.mark.parametrize("template", ["deepseek-ai__DeepSeek-V3.2", "llama.cpp__deepseek-ai-DeepSeek-V4"])
def test_an_argument_the_schema_does_not_list_in_dsml(template: str) -> None:
    """DeepSeek V3.2/V4 name each argument in an attribute (`<｜DSML｜parameter name="K" string="...">`); a call to a
    declared tool with an argument its schema does not list (SGLang's DSV4 integration tests: `ls` with `path`,
    its schema listing none) was read as a call to a tool the request does not declare (`unknown_tool`), which
    it is not. The call is the declared one, the argument kept (`undeclared_argument`), typed by its attribute."""
    block = "function_calls" if "V3.2" in template else "tool_calls"
    out = (f'<｜DSML｜{block}>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Paris'
           '</｜DSML｜parameter>\n<｜DSML｜parameter name="hours" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
           f'</｜DSML｜{block}>')
    check(case(template, out, enable_thinking=False, tools=[WEATHER], grammar_check=False),
          {"tool_calls": [call("get_weather", '{"city": "Paris", "hours": 3}')]}, ["undeclared_argument"])
