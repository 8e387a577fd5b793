"""The structural tag and Lark exports (autoparser/export/constrained.py): what each says for the request, from the
template's own analysis. Whether xgrammar and llguidance accept the intended outputs and reject broken ones is
tests/export/test_consumers.py (`tox -e consumers`); here, the shape each engine reads, without them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus
from autoparser.export import ExportError, lark_grammar, structural_tag

CORPUS = Corpus.load()
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}
# Qwen3 writes `<think>...</think>`, then calls `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`; its
# generation prompt closes an empty think block when thinking is off
QWEN3 = "Qwen__Qwen3-0.6B"
# the same calls; its generation prompt opens `<think>\n`, so the output starts inside the reasoning
QWEN3_THINKING = "Qwen__Qwen3-4B-Thinking-2507"
GPT_OSS = "openai__gpt-oss-120b"
DEEPSEEK = "deepseek-ai__DeepSeek-V3.2"


def _source(name: str) -> str:
    return CORPUS.by_name(name).read_text()


def _elements(tag: dict[str, Any]) -> list[dict[str, Any]]:
    fmt = tag["format"]
    return fmt["elements"] if fmt["type"] == "sequence" else [fmt]


def _of_type(tag: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in _elements(tag) if e["type"] == kind]


def test_a_json_call_in_markers_is_a_triggered_tag_with_the_tools_schema() -> None:
    tag = structural_tag(_source(QWEN3), [WEATHER])
    assert tag["type"] == "structural_tag"
    [calls] = _of_type(tag, "triggered_tags")
    assert calls["triggers"] == ["<tool_call>"]
    [call] = calls["tags"]
    assert (call["begin"], call["end"]) == ("<tool_call>", "</tool_call>")
    schemas = [e["json_schema"] for e in call["content"]["elements"] if e["type"] == "json_schema"]
    assert schemas == [WEATHER["function"]["parameters"]]
    # the markup before the arguments, as one regex: whitespace free around each piece, as models vary it
    head = call["content"]["elements"][0]["pattern"]
    assert re.fullmatch(head, '\n{"name": "get_weather", "arguments": ')
    assert re.fullmatch(head, '{"name":"get_weather","arguments":')
    assert not re.fullmatch(head, '{"name": "search", "arguments": ')
    # free text may not hold the closer: an output that lost a call's opener is rejected
    assert calls["excludes"] == ["</tool_call>"]
    assert (calls["at_least_one"], calls["stop_after_first"]) == (False, False)


def test_reasoning_is_optional_unless_the_prompt_opened_it() -> None:
    [optional] = _of_type(structural_tag(_source(QWEN3), [WEATHER]), "optional")
    assert (optional["content"]["begin"], optional["content"]["end"]) == ("<think>", "</think>")
    [opened] = _of_type(structural_tag(_source(QWEN3_THINKING), [WEATHER]), "tag")
    assert (opened["begin"], opened["end"]) == ("", "</think>")
    # thinking off: Qwen3's prompt closes the block, the output has none
    off = structural_tag(_source(QWEN3), [WEATHER], thinking=False)
    assert not _of_type(off, "optional") and not _of_type(off, "tag")


def test_tool_choice_and_parallel_calls() -> None:
    [required] = _of_type(structural_tag(_source(QWEN3), [WEATHER], "required"), "triggered_tags")
    assert required["at_least_one"]
    [single] = _of_type(structural_tag(_source(QWEN3), [WEATHER], parallel_tool_calls=False), "triggered_tags")
    assert single["stop_after_first"]
    none = structural_tag(_source(QWEN3), [WEATHER], "none")
    assert not _of_type(none, "triggered_tags") and _of_type(none, "any_text")


def test_tagged_arguments_are_one_tag_each() -> None:
    """GLM-4.6 writes `<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n</tool_call>`: a string
    value is any text up to its closer, another value JSON under its schema; an optional argument may be left out."""
    tag = structural_tag(_source("zai-org__GLM-4.6"), [WEATHER])
    text = json.dumps(tag)
    assert '"begin": "<arg_value>", "content": {"type": "any_text"}, "end": "</arg_value>"' in text
    assert '{"type": "json_schema", "json_schema": {"type": "integer"}}' in text
    assert '"type": "optional"' in text


def test_the_lark_grammar_says_the_same_with_json_lexemes() -> None:
    grammar = lark_grammar(_source(QWEN3), [WEATHER], thinking=False)
    assert grammar.startswith("%llguidance {}\n")
    assert 'call_head[lazy]: TEXT "<tool_call>"' in grammar
    assert "%json " + json.dumps(WEATHER["function"]["parameters"]) in grammar
    assert '"</tool_call>"' in grammar and "think" not in grammar
    # the closer is no text: `/` escaped in the regex
    assert r"~/(?s:.*(<\/tool_call>).*)/" in grammar


def test_a_hand_written_format_whose_calls_are_as_analysed() -> None:
    """Qwen3.5's handler reads the calls the analysis describes (`calls_as_analysed`), `<tool_call>\n<function=NAME>
    \n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>`; its generation prompt opens `<think>\n`."""
    tag = structural_tag(_source("llama.cpp__Qwen3.5-4B"), [WEATHER])
    [reasoning] = _of_type(tag, "tag")
    assert (reasoning["begin"], reasoning["end"]) == ("", "</think>")
    [calls] = _of_type(tag, "triggered_tags")
    [call] = calls["tags"]
    assert (call["begin"], call["end"]) == ("<tool_call>", "</tool_call>")
    text = json.dumps(call)
    assert "<function=get_weather" in text
    assert '"begin": "<parameter=city>", "content": {"type": "any_text"}, "end": "</parameter>"' in text


def test_gigachat_3s_call_is_as_analysed() -> None:
    """GigaChat 3's handler is there for the tokens llama.cpp hands the engine; its call, a JSON object after
    `<|message_sep|>\n\nfunction call<|role_sep|>\n`, is as the analysis reads it (`calls_as_analysed`)."""
    [calls] = _of_type(structural_tag(_source("llama.cpp__GigaChat3-10B-A1.8B"), [WEATHER]), "triggered_tags")
    assert calls["triggers"] == ["<|message_sep|>\n\nfunction call<|role_sep|>"]
    [call] = calls["tags"]
    head, arguments = call["content"]["elements"][:2]
    assert re.fullmatch(head["pattern"], '\n{"name": "get_weather", "arguments": ')
    assert arguments["json_schema"] == WEATHER["function"]["parameters"]


def test_a_hand_written_format_says_how_it_writes_calls() -> None:
    """Ministral 3 writes `[TOOL_CALLS]NAME[ARGS]{...}`, which its handler knows and its analysis does not: the
    handler's `call_tags` (chat/handlers/ministral3.py) gives the calls, its reasoning markers the block."""
    tag = structural_tag(_source("mistralai__Ministral-3-3B-Reasoning-2512"), [WEATHER])
    [optional] = _of_type(tag, "optional")
    assert (optional["content"]["begin"], optional["content"]["end"]) == ("[THINK]", "[/THINK]")
    [calls] = _of_type(tag, "triggered_tags")
    assert calls["triggers"] == ["[TOOL_CALLS]"] and calls["excludes"] == ["[ARGS]"]
    [call] = calls["tags"]
    assert (call["begin"], call["end"]) == ("[TOOL_CALLS]", "")
    assert re.fullmatch(call["content"]["elements"][0]["pattern"], "get_weather[ARGS]")


def test_harmony_calls_are_triggered_by_their_recipient() -> None:
    """gpt-oss writes a call as a message to ` to=functions.NAME`, the recipient after the role or after the
    channel (chat/handlers/gpt_oss.py `call_tags`); reasoning is the `analysis` message. Where the output is calls,
    the role that opens the call's message may stand between the reasoning and the call."""
    tag = structural_tag(_source(GPT_OSS), [WEATHER], "required")
    [optional] = _of_type(tag, "optional")
    assert (optional["content"]["begin"], optional["content"]["end"]) == ("<|channel|>analysis<|message|>", "<|end|>")
    [calls] = _of_type(tag, "triggered_tags")
    assert calls["triggers"] == [" to=functions."] and calls["excludes"] == ["<|call|>"]
    lead = [e["pattern"] for e in _of_type(tag, "regex")][-1]
    assert re.fullmatch(lead, "<|start|>assistant") and re.fullmatch(lead, "") and not re.fullmatch(lead, "text")
    grammar = lark_grammar(_source(GPT_OSS), [WEATHER])
    assert 'call_head[lazy]: TEXT " to=functions."' in grammar
    assert all(f'"{m}"' in grammar for m in ("get_weather", "<|channel|>commentary", "<|constrain|>", "<|message|>"))


@pytest.mark.parametrize(("template", "section"), [
    # OLMo 3 writes `<function_calls>NAME(k="v")\nNAME2(...)</function_calls>`, strings as JSON writes them
    ("allenai__Olmo-3-7B-Instruct", ("<function_calls>", "</function_calls>")),
    # LFM2 writes `<|tool_call_start|>[NAME(k='v'), ...]<|tool_call_end|>` (its handler's `call_tags`)
    ("llama.cpp__LFM2.5-8B-A1B", ("<|tool_call_start|>", "<|tool_call_end|>")),
])
def test_python_calls_in_a_section(template: str, section: tuple[str, str]) -> None:
    """A call's keyword arguments in any order, a string a Python literal in either quote, another value JSON under
    its schema (or Python's True/False/None); the section's markers are the tag's."""
    tag = structural_tag(_source(template), [WEATHER])
    [calls] = _of_type(tag, "triggered_tags")
    [call] = calls["tags"]
    assert (call["begin"], call["end"]) == section and calls["excludes"] == [section[1]]
    assert '{"type": "json_schema", "json_schema": {"type": "integer"}}' in json.dumps(call)
    grammar = lark_grammar(_source(template), [WEATHER])
    assert '"get_weather("' in grammar and '"days=" json_' in grammar
    string = re.search(r'"city=" /(.*?)/ \|', grammar)
    assert string is not None
    assert re.fullmatch(string.group(1), '"Z\\"x"') and re.fullmatch(string.group(1), "'it\\'s'")
    assert not re.fullmatch(string.group(1), "Paris")


def test_a_call_id_the_model_makes_up_is_a_pattern_before_the_names_marker() -> None:
    """Solar Open writes `<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{...}`, the id made up by the
    model (TemplateAnalysis.call_id_in_name_prefix): any word up to the name's marker, not the first call's id."""
    [calls] = _of_type(structural_tag(_source("upstage__Solar-Open-100B"), [WEATHER]), "triggered_tags")
    [section] = calls["tags"]
    assert section["begin"] == "<|tool_calls|>"
    [call] = [e for e in section["content"]["elements"] if e["type"] == "tag"]
    assert call["begin"] == "<|tool_call:begin|>"
    made_up, head = (e["pattern"] for e in call["content"]["elements"][:2])
    for id_ in ("a1b2c3d4e5", "call00001", "x"):
        assert re.fullmatch(made_up + head, f"{id_}<|tool_call:name|>get_weather<|tool_call:args|>")
    assert not re.fullmatch(made_up + head, "<|tool_call:name|>get_weather<|tool_call:args|>")  # (an id is written)
    assert not re.fullmatch(made_up + head, "a b<|tool_call:name|>get_weather<|tool_call:args|>")


def test_a_plain_text_opener_before_each_name_is_the_trigger() -> None:
    """llama-cpp-python's function-calling template writes `functions.NAME:\n{json}`, calls one after another
    (analysis/forms.py `opener_before_name`)."""
    [calls] = _of_type(structural_tag(_source("llama-cpp-python__function_calling_template"), [WEATHER]),
                       "triggered_tags")
    assert calls["triggers"] == ["functions."]
    [call] = calls["tags"]
    assert call["begin"] == "functions."
    schemas = [e["json_schema"] for e in call["content"]["elements"] if e["type"] == "json_schema"]
    assert schemas == [WEATHER["function"]["parameters"]]


def test_a_call_whose_name_is_its_objects_key() -> None:
    """Apertus writes `<|tools_prefix|>[{"get_weather": {...}}]<|tools_suffix|>`: each call is an object whose one
    key is the name, its value the arguments."""
    [calls] = _of_type(structural_tag(_source("swiss-ai__Apertus-8B-Instruct-2509"), [WEATHER]), "triggered_tags")
    [section] = calls["tags"]
    assert (section["begin"], section["end"]) == ("<|tools_prefix|>", "<|tools_suffix|>")
    head, schema = section["content"]["elements"][:2]
    assert re.fullmatch(head["pattern"], '[{"get_weather": ') and re.fullmatch(head["pattern"], '[{"get_weather":')
    assert not re.fullmatch(head["pattern"], '[{"name": "get_weather", "arguments": ')
    assert schema["json_schema"] == WEATHER["function"]["parameters"]


def test_a_call_id_between_the_name_and_the_arguments_may_be_left_out() -> None:
    """Mistral Small 3.2 writes `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}`; the parser reads the call without
    `[CALL_ID]ID` too."""
    [calls] = _of_type(structural_tag(_source("mistralai__Mistral-Small-3.2-24B-Instruct-2506"), [WEATHER]),
                       "triggered_tags")
    [call] = calls["tags"]
    assert call["begin"] == "[TOOL_CALLS]"
    name, with_id, args = call["content"]["elements"][:3]
    id_marker, id_text = (e["pattern"] for e in with_id["content"]["elements"])
    assert with_id["type"] == "optional"
    assert re.fullmatch(name["pattern"] + id_marker + id_text + args["pattern"], "get_weather[CALL_ID]a1B2c3D4e[ARGS]")
    assert re.fullmatch(name["pattern"] + args["pattern"], "get_weather[ARGS]")


def test_arguments_without_a_key_marker_stand_between_separators_in_the_templates_order() -> None:
    """FunctionGemma writes `call:search{lang:<escape>en<escape>,max_results:3,query:<escape>x<escape>}`: no marker
    before a key, `,` between arguments, sorted by name (`| dictsort`), a number as it is. An optional argument may
    be left out with its separator: one alternative per argument that may come first."""
    search = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer"}, "lang": {"type": "string"}},
        "required": ["query"]}}}
    [calls] = _of_type(structural_tag(_source("unsloth__functiongemma-270m-it"), [search]), "triggered_tags")
    [call] = calls["tags"]
    assert (call["begin"], call["end"]) == ("<start_function_call>call:", "}<end_function_call>")
    [arguments] = [e for e in call["content"]["elements"] if e["type"] == "or"]
    firsts = [json.dumps(alternative) for alternative in arguments["elements"]]
    assert len(firsts) == 3  # (lang, max_results or query first: query is required)
    for text in firsts:
        at = [text.find(key) for key in ('"lang:<escape>"', "max_results:", '"query:<escape>"') if key in text]
        assert at == sorted(at) and text.count("]*,[") == len(at) - 1, text  # (a separator between two)
    assert '"begin": "query:<escape>", "content": {"type": "any_text"}, "end": "<escape>"' in firsts[-1]
    assert 'max_results:"}, {"type": "json_schema", "json_schema": {"type": "integer"}}' in firsts[1]
    # (an object is written in FunctionGemma's own syntax, `{k:<escape>v<escape>}`: no JSON schema says it)
    options = {"type": "function", "function": {"name": "configure", "parameters": {"type": "object", "properties": {
        "options": {"type": "object"}}, "required": ["options"]}}}
    with pytest.raises(ExportError, match="own syntax"):
        structural_tag(_source("unsloth__functiongemma-270m-it"), [options])


@pytest.mark.parametrize("template, section", [(DEEPSEEK, "function_calls"),
                                               ("llama.cpp__deepseek-ai-DeepSeek-V4", "tool_calls")])
def test_dsml_invokes_hold_one_element_per_argument_typed_by_its_attribute(template: str, section: str) -> None:
    """DeepSeek V3.2 and V4 write `<｜DSML｜function_calls>` (V4: `tool_calls`) holding `<｜DSML｜invoke
    name="NAME">` elements, one `<｜DSML｜parameter name="K" string="true|false">` per argument (chat/handlers/
    deepseek.py `_call_tags`): a string raw up to the closer, another value JSON under its schema."""
    [calls] = _of_type(structural_tag(_source(template), [WEATHER]), "triggered_tags")
    assert calls["triggers"] == [f"<｜DSML｜{section}>"]
    assert calls["excludes"] == ["</｜DSML｜invoke>", f"</｜DSML｜{section}>"]
    [block] = calls["tags"]
    assert (block["begin"], block["end"]) == (f"<｜DSML｜{section}>", f"</｜DSML｜{section}>")
    invoke = block["content"]["elements"][1]
    assert (invoke["begin"], invoke["end"]) == ('<｜DSML｜invoke name="', "</｜DSML｜invoke>")
    name, arguments = invoke["content"]["elements"][:2]
    assert name["value"] == 'get_weather">'
    city, days = arguments["content"]["content"]["elements"][1]["elements"]
    assert (city["begin"], city["content"]) == ('<｜DSML｜parameter name="city" string="true">', {"type": "any_text"})
    assert (days["begin"], days["content"]["json_schema"]) == ('<｜DSML｜parameter name="days" string="false">',
                                                               {"type": "integer"})
    assert city["end"] == days["end"] == "</｜DSML｜parameter>"


def test_a_command_a_action_is_a_list_of_numbered_call_objects() -> None:
    """Command A (Cohere2 MoE) writes `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "NAME", "parameters":
    {...}}]<|END_ACTION|>` (chat/handlers/cohere2moe.py `_call_tags`); its generation prompt opens the thinking
    block, which `<|END_THINKING|>` closes before the action."""
    tag = structural_tag(_source("llama.cpp__Cohere2MoE"), [WEATHER])
    [reasoning] = _of_type(tag, "tag")
    assert (reasoning["begin"], reasoning["end"]) == ("", "<|END_THINKING|>")
    [calls] = _of_type(tag, "triggered_tags")
    assert calls["triggers"] == ["<|START_ACTION|>"] and calls["excludes"] == ["<|END_ACTION|>"]
    [action] = calls["tags"]
    assert (action["begin"], action["end"]) == ("<|START_ACTION|>", "<|END_ACTION|>")
    opening, call_id, name, arguments, close = action["content"]["elements"][:5]
    assert re.fullmatch(opening["pattern"] + call_id["pattern"] + name["pattern"],
                        '[\n  {"tool_call_id": "0", "tool_name": "get_weather", "parameters": ')
    assert not re.fullmatch(call_id["pattern"], '"call_1"')
    assert re.fullmatch(close["pattern"], "\n  }")
    assert arguments["json_schema"] == WEATHER["function"]["parameters"]


def test_kimi_k3s_calls_and_its_reasoning_end_are_the_handlers() -> None:
    """Kimi K3 writes every section between `<|open|>TAG<|sep|>` and `<|close|>TAG<|sep|>` (chat/handlers/kimi_k3.py
    `_call_tags`): the reasoning the prompt opens ends at `<|close|>think<|sep|>`, not at the `<|close|>` the
    analysis sees; where the output is calls, the empty response section may lead them; each argument is a
    section whose type attribute is `string` for raw text, the template's word for any other JSON value."""
    tag = structural_tag(_source("llama.cpp__Kimi-K3"), [WEATHER], "required")
    [reasoning] = _of_type(tag, "tag")
    assert (reasoning["begin"], reasoning["end"]) == ("", "<|close|>think<|sep|>")
    [lead] = [e for e in _of_type(tag, "regex") if "response" in e["pattern"]]
    assert re.fullmatch(lead["pattern"], "<|open|>response<|sep|><|close|>response<|sep|>")
    [calls] = _of_type(tag, "triggered_tags")
    assert calls["triggers"] == ["<|open|>tools<|sep|>"]
    [section] = calls["tags"]
    call = section["content"]["elements"][0]
    assert (call["begin"], call["end"]) == ('<|open|>call tool="', "<|close|>call<|sep|>")
    text = json.dumps(call)
    assert '"begin": "<|open|>argument key=\\"city\\" type=\\"string\\"<|sep|>", "content": {"type": "any_text"}' in text
    assert 'boolean|null|number|object|array' in text


def test_a_form_that_cannot_be_said_is_refused_with_the_reason() -> None:
    # the Llama 3.2 pythonic template writes its calls bare, `[get_weather(city="Paris")]`: the `[` free text
    # holds too is no trigger
    with pytest.raises(ExportError, match=r"the calls stand bare"):
        structural_tag(_source("vllm__tool_chat_template_gemma3_pythonic"), [WEATHER])
    # Muse Glimmer's format is written by hand (chat/handlers/muse_glimmer.py), with no call_tags yet
    with pytest.raises(ExportError, match=r"hand-written \(muse_glimmer\)"):
        structural_tag(_source("llama.cpp__muse-glimmer"), [WEATHER])


def test_an_unknown_tool_choice_is_a_clear_error() -> None:
    with pytest.raises(ExportError, match="unknown tool_choice 'any': auto, required or none"):
        structural_tag(_source(QWEN3), [WEATHER], "any")


def test_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER]), encoding="utf-8")
    assert main(["export", "structural-tag", QWEN3, "--tools", str(tools), "--tool-choice", "required"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == structural_tag(_source(QWEN3), [WEATHER], "required")
    assert main(["export", "lark", QWEN3, "--tools", str(tools), "--thinking", "off"]) == 0
    assert capsys.readouterr().out == lark_grammar(_source(QWEN3), [WEATHER], thinking=False)
    assert main(["export", "lark", "llama.cpp__muse-glimmer", "--tools", str(tools)]) == 2
    assert "hand-written (muse_glimmer)" in capsys.readouterr().err
