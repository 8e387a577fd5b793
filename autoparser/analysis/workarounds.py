"""Source-keyed fixes applied after the differential analysis (C++ `workarounds` list, in order).

Each one recognises a template family by a literal snippet of its source and patches what the diffs cannot
see (reasoning the template never renders, markers hidden by odd whitespace, ...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from autoparser.analysis.model import (
    ContentAnalysis,
    ContentMode,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.template.diff import trim_whitespace

__all__ = ["WORKAROUNDS", "apply_workarounds"]

Workaround = Callable[[str, TemplateAnalysis], TemplateAnalysis]
_r = dataclasses.replace


def _tools(a: TemplateAnalysis, *, format: dict[str, object] | None = None,
           function: dict[str, object] | None = None, arguments: dict[str, object] | None = None) -> TemplateAnalysis:
    t = a.tools
    return _r(a, tools=_r(t, format=_r(t.format, **(format or {})), function=_r(t.function, **(function or {})),
                          arguments=_r(t.arguments, **(arguments or {}))))


def old_qwen_thinking(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if ("content.split('</think>')" in src and "reasoning_content" not in src and "<SPECIAL_12>" not in src
            and a.reasoning.mode is ReasoningMode.NONE):
        return _r(a, reasoning=ReasoningAnalysis(ReasoningMode.TAG_BASED, "<think>", "</think>"),
                  preserved_tokens=(*a.preserved_tokens, "<think>", "</think>"))
    return a


def granite(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if ("Write your thoughts between <think></think> and write your response between <response></response>"
            in src):
        return _r(a, reasoning=ReasoningAnalysis(ReasoningMode.TAG_BASED, "<think>", "</think>"),
                  content=_r(a.content, mode=ContentMode.WRAPPED_WITH_REASONING, start="<response>",
                             end="</response>"),
                  preserved_tokens=(*a.preserved_tokens, "<think>", "</think>", "<response>", "</response>"))
    return a


def command_r_plus(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if "<|CHATBOT_TOKEN|>" in src and "<|END_OF_TURN_TOKEN|>" in src and not a.content.start:
        return _r(a, content=_r(a.content, mode=ContentMode.ALWAYS_WRAPPED, start="<|CHATBOT_TOKEN|>",
                                end="<|END_OF_TURN_TOKEN|>"),
                  preserved_tokens=(*a.preserved_tokens, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
                  user_start="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>")
    return a


def functionary_v3_1(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if ('set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") | list | length > 0'
            in src):
        a = _r(a, content=_r(a.content, mode=ContentMode.PLAIN, end=""),
               preserved_tokens=("<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"))
        return _tools(a, format={"section_start": "", "section_end": "", "per_call_start": "<function=",
                                 "per_call_end": "</function>"},
                      function={"name_prefix": "", "close": ""})
    return a


def deepseek_r1_distill_qwen(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if ("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'"
            in src):
        return _tools(a, format={"section_start": "<｜tool▁calls▁begin｜>", "section_end": "<｜tool▁calls▁end｜>",
                                 "per_call_start": "<｜tool▁call▁begin｜>function",
                                 "per_call_end": "<｜tool▁call▁end｜>"},
                      function={"name_prefix": "<｜tool▁sep｜>", "close": "```"})
    return a


def nemotron_nano_v2(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if all(s in src for s in ("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<TOOL_RESPONSE>")):
        a = _tools(a, format={"mode": ToolFormat.JSON_NATIVE, "section_start": "", "section_end": "",
                              "per_call_start": "<TOOLCALL>", "per_call_end": "</TOOLCALL>",
                              "tools_array_wrapped": True})
        return _r(a, content=ContentAnalysis(ContentMode.PLAIN, "", "", a.content.requires_nonnull_content),
                  reasoning=ReasoningAnalysis(ReasoningMode.TAG_BASED, "<think>\n", "</think>"),
                  assistant_start="<SPECIAL_11>Assistant", user_start="<SPECIAL_11>User",
                  preserved_tokens=("<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"))
    return a


def fireworks(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if ("{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n'"
            " + message['content'] | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}") in src:
        return _r(a, assistant_start="<|start_header_id|>assistant<|end_header_id|>",
                  user_start="<|start_header_id|>user<|end_header_id|>")
    return a


def solar_open(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if "<|begin|>assistant<|think|><|end|>" in src:
        return _r(a, assistant_start="<|begin|>assistant")
    return a


def apriel_1_6(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if "if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text" in src:
        return _r(a, user_start="<|begin_user|>", assistant_start="<|begin_assistant|>")
    return a


def json_name_parameters_instruction(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if 'Respond in the format {"name": function name' in src and "Do not use variables." in src:
        return _tools(a, format={"openai_wrapper_trigger": True})
    return a


def laguna(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if "laguna_glm_thinking" in src:
        args = a.tools.arguments
        a = _tools(a, arguments={"value_prefix": trim_whitespace(args.value_prefix),
                                 "value_suffix": trim_whitespace(args.value_suffix),
                                 "separator": trim_whitespace(args.separator),
                                 "tolerate_intertag_whitespace": True})
        return _r(a, reasoning=_r(a.reasoning, start=trim_whitespace(a.reasoning.start),
                                  end=trim_whitespace(a.reasoning.end)),
                  additional_stops=(*a.additional_stops, "</assistant>"))
    return a


def bailing_v3(src: str, a: TemplateAnalysis) -> TemplateAnalysis:
    if "Bailing V3 chat template" in src:
        return _tools(a, arguments={"value_suffix": trim_whitespace(a.tools.arguments.value_suffix),
                                    "tolerate_intertag_whitespace": True})
    return a


WORKAROUNDS: tuple[Workaround, ...] = (
    old_qwen_thinking, granite, command_r_plus, functionary_v3_1, deepseek_r1_distill_qwen, nemotron_nano_v2,
    fireworks, solar_open, apriel_1_6, json_name_parameters_instruction, laguna, bailing_v3,
)


def apply_workarounds(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis:
    for fix in WORKAROUNDS:
        analysis = fix(source, analysis)
    return analysis
