"""Kimi K2 (Thinking, Instruct and the older K2) (parsers/kimi-k2.cpp).

Calls sit in an optional `<|tool_calls_section_begin|>...<|tool_calls_section_end|>` section, each one
`<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>`; the whole
`functions.NAME:IDX` is the call id. The model is loose with its own syntax (it may start calling tools
before closing `<think>`, or drop the end markers), so those parts are all optional.
"""

from __future__ import annotations

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
from autoparser.chat.handlers._support import function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat, tool_parameters

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"


def detect(source: str) -> bool:
    return SECTION_BEGIN in source and CALL_BEGIN in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)

    tools = has_tools(inputs)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = tools and inputs.tool_choice != ToolChoice.NONE

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = GEN_PROMPT + THINK_START + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += THINK_END + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, CALL_BEGIN),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=(SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END),
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, extract_reasoning: bool) -> P:
    end = p.end()
    # reasoning may run straight into a tool call without `</think>`
    reasoning = p.optional(THINK_START + p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
                           + p.optional(p.literal(THINK_END))) if extract_reasoning else p.eps()
    gen_prompt = p.literal(GEN_PROMPT)

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    tool_choice = p.choice()
    for function in function_defs(inputs.tools):
        name = str(function.get("name", ""))
        schema = tool_parameters(function)
        tool_id = p.tool_id(p.literal("functions.") + p.tool_name(p.literal(name)) + p.literal(":")
                            + p.chars("[0-9]", 1, -1))
        tool_parser = p.tool(p.tool_open(tool_id + p.literal(ARGS_BEGIN))
                             + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))
                             + p.tool_close(p.optional(p.literal(CALL_END))))
        tool_choice |= p.rule(f"tool-{name}", tool_parser)

    min_calls = 1 if inputs.tool_choice == ToolChoice.REQUIRED else 0
    max_calls = -1 if inputs.parallel_tool_calls else 1
    tool_calls = p.rule("tool-calls", p.optional(p.literal(SECTION_BEGIN))
                        + p.trigger_rule("tool-call", p.repeat(CALL_BEGIN + tool_choice, min_calls, max_calls)
                                         + p.optional(p.literal(SECTION_END))))
    content_before_tools = p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN]))
    return gen_prompt + reasoning + content_before_tools + tool_calls + end


HANDLER = Handler("kimi_k2", detect, generate)
