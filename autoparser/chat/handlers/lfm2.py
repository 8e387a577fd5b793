"""LFM2 and LFM2.5 (parsers/lfm2.cpp).

Calls are python-style, `<|tool_call_start|>[name(k="v", n=1), ...]<|tool_call_end|>`, where argument values may
also use JSON literals (true/false/null); reasoning is an optional `<think>...</think>`. LFM2 lists the tools
between `<|tool_list_start|>` / `<|tool_list_end|>` tokens; LFM2.5 writes a plain "List of tools: [" and has
no such tokens to preserve. Both are detected here, LFM2 first, as in the C++.
"""

from __future__ import annotations

from typing import Any

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.generator import (
    ChatParams,
    GenerationInputs,
    GrammarTrigger,
    TriggerType,
    generation_prompt,
    render_prompt,
)
from autoparser.chat.handlers import Handler
from autoparser.chat.handlers._support import has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

TOOL_CALL_START = "<|tool_call_start|>"
TOOL_CALL_END = "<|tool_call_end|>"
TOOL_LIST_START = "<|tool_list_start|>"
TOOL_LIST_END = "<|tool_list_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_start|>assistant\n"


def is_lfm2_template(source: str) -> bool:
    return TOOL_LIST_START in source and TOOL_LIST_END in source


def is_lfm2_5_template(source: str) -> bool:
    return "List of tools: [" in source and TOOL_LIST_START not in source


def detect(source: str) -> bool:
    return is_lfm2_template(source) or is_lfm2_5_template(source)


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    tool_list_tokens = is_lfm2_template(tmpl.source)

    # the template reads reasoning from a `thinking` field
    messages: list[Any] = []
    for message in inputs.messages:
        reasoning = message.get("reasoning_content")
        messages.append(dict(message, thinking=reasoning) if isinstance(reasoning, str) else message)

    prompt = render_prompt(tmpl, inputs, messages=messages)
    gp = generation_prompt(tmpl, inputs, messages=messages)
    preserved = [TOOL_CALL_START, TOOL_CALL_END, THINK_START, THINK_END]
    if tool_list_tokens:
        preserved += [TOOL_LIST_START, TOOL_LIST_END]

    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none" and THINK_START in tmpl.source
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = GEN_PROMPT + THINK_START + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += THINK_END + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, response_format, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not (response_format or (tools and inputs.tool_choice == ToolChoice.REQUIRED))
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, TOOL_CALL_START),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=tuple(preserved), supports_thinking=True,
        thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool,
           extract_reasoning: bool) -> P:
    gen_prompt = p.literal(GEN_PROMPT)
    end = p.end()
    reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END) if extract_reasoning \
        else p.eps()

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        if response_format:
            return gen_prompt + reasoning + p.content(p.schema(p.json(), "response-format-schema",
                                                               inputs.json_schema)) + end
        return gen_prompt + reasoning + p.content(p.rest()) + end

    tool_calls = p.rule("tool-calls", p.trigger_rule("tool-call", p.literal(TOOL_CALL_START)
                                                     + p.python_style_tool_calls(inputs.tools,
                                                                                 inputs.parallel_tool_calls,
                                                                                 allow_json_literals=True)
                                                     + p.literal(TOOL_CALL_END)))
    content = p.content(p.until(TOOL_CALL_START))
    return gen_prompt + reasoning + content + tool_calls + end


HANDLER = Handler("lfm2", detect, generate)
