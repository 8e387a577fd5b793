"""DeepSeek V3.2 and V4 (parsers/deepseek.cpp).

Calls are DSML markup: `<｜DSML｜function_calls>` (V4: `tool_calls`) holding `<｜DSML｜invoke name="NAME">` elements
with one `<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>` per argument (string="true" for
raw text, else JSON). With thinking on, the model may go from reasoning straight into a call block, so the
call-block opener also ends reasoning. V4 renders tool results in call order, and its non-thinking
generation prompt ends in a bare `</think>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from autoparser.chat.handlers._params import parameters
from autoparser.chat.handlers._support import function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

DSML = "｜DSML｜"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<｜Assistant｜>"
TC_SEPARATOR = "\n\n"


def detect(source: str) -> bool:
    # The token is assigned to a template variable (`dsml_token`), not written out in the markup.
    return "dsml_token" in source and "DSML" in source and ("function_calls" in source or "tool_calls" in source)


def sort_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """V4 renders a run of user/tool messages as one block, tool results in the order of the calls that
    produced them (matched by call id); reorder the results within each run accordingly (stable)."""
    adjusted = [dict(m) for m in messages]
    call_order: dict[str, int] = {}
    i = 0
    while i < len(adjusted):
        msg = adjusted[i]
        role = msg.get("role", "")
        calls = msg.get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            call_order = {}
            for idx, call in enumerate(calls):
                call_id = call.get("id", "") if isinstance(call, Mapping) else ""
                if call_id:
                    call_order[str(call_id)] = idx
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        positions: list[int] = []
        run_end = i
        while run_end < len(adjusted):
            r = adjusted[run_end].get("role", "")
            if r == "tool":
                positions.append(run_end)
            elif r != "user":
                break
            run_end += 1
        if len(positions) > 1 and call_order:
            results = sorted((adjusted[k] for k in positions),
                             key=lambda m: call_order.get(str(m.get("tool_call_id", "")), 0))
            for k, result in zip(positions, results):
                adjusted[k] = result
        i = run_end
    return adjusted


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    is_v4 = "function_calls" not in tmpl.source
    messages = sort_tool_results(inputs.messages) if is_v4 else None

    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)
    extra = {"response_format": inputs.json_schema} if is_v4 and response_format else None

    tc_block = "tool_calls" if is_v4 else "function_calls"
    fc_start = f"<{DSML}{tc_block}>"

    prompt = render_prompt(tmpl, inputs, messages=messages, extra=extra)
    gp = generation_prompt(tmpl, inputs, messages=messages, extra=extra)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        reasoning_content = str(msg.get("reasoning_content") or "")
        if is_v4 and not reasoning_content:
            gp = GEN_PROMPT + THINK_END
            if inputs.continuation == Continuation.CONTENT:
                gp += render_content(msg)
        else:
            gp = GEN_PROMPT + THINK_START + reasoning_content
            if inputs.continuation == Continuation.CONTENT:
                gp += THINK_END + render_content(msg)
        prompt += gp

    require_tools = inputs.tool_choice == ToolChoice.REQUIRED
    p = ChatBuilder()
    arena = p.build(_build(p, inputs, is_v4, tc_block, tools, response_format, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = tools and not require_tools
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, fc_start),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=(DSML, THINK_START, THINK_END),
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END, fc_start),
        message_delimiters=(("assistant", GEN_PROMPT), ("user", "<｜User｜>")))


def _tool_choice(p: ChatBuilder, inputs: GenerationInputs) -> P:
    invoke_start = f"<{DSML}invoke"
    invoke_end = f"</{DSML}invoke>"
    param_start = f"<{DSML}parameter"
    param_end = f"</{DSML}parameter>"
    tool_choice = p.choice()
    for function in function_defs(inputs.tools):
        name = str(function.get("name", ""))
        params, props = parameters(function)
        required_parsers: list[P] = []
        optional_parsers: list[P] = []
        for param in props:
            is_string = param.may_be_string
            value = p.tool_arg_string_value(p.until(param_end)) if is_string else p.tool_arg_json_value(
                p.schema(p.json(), f"tool-{name}-arg-{param.name}-schema", params, pointer=param.pointer))
            arg = p.tool_arg(p.tool_arg_open(p.literal(param_start + ' name="') + p.tool_arg_name(p.literal(param.name))
                                             + p.literal(f'" string="{"true" if is_string else "false"}">'))
                             + value + p.tool_arg_close(p.literal(param_end)))
            named = p.rule(f"tool-{name}-arg-{param.name}", arg)
            (required_parsers if param.required else optional_parsers).append(named)

        args_seq = p.eps()
        for i, rp in enumerate(required_parsers):
            if i > 0:
                args_seq = args_seq + p.space()
            args_seq = args_seq + rp
        if optional_parsers:
            any_opt = p.choice()
            for op in optional_parsers:
                any_opt |= op
            args_seq = args_seq + p.repeat(p.space() + any_opt, 0, -1)

        func = p.tool(p.tool_open(p.literal(invoke_start + ' name="') + p.tool_name(p.literal(name)) + p.literal('">\n'))
                      + args_seq + p.space() + p.tool_close(p.literal(invoke_end)))
        tool_choice |= p.rule(f"tool-{name}", func)
    return tool_choice


def _build(p: ChatBuilder, inputs: GenerationInputs, is_v4: bool, tc_block: str, tools: bool,
           response_format: bool, extract_reasoning: bool) -> P:
    fc_start = f"<{DSML}{tc_block}>"
    fc_end = f"</{DSML}{tc_block}>"
    require_tools = inputs.tool_choice == ToolChoice.REQUIRED
    has_tool_calls = tools and inputs.tool_choice != ToolChoice.NONE

    gen_prompt = p.literal(GEN_PROMPT)
    end = p.end()

    # the call section comes first: reasoning may run straight into it
    tool_choice = _tool_choice(p, inputs) if has_tool_calls else p.choice()
    if inputs.parallel_tool_calls:
        tool_calls = p.trigger_rule("tool-call", p.literal(fc_start) + p.space() + tool_choice
                                    + p.zero_or_more(p.space() + tool_choice) + p.space() + p.literal(fc_end))
    else:
        tool_calls = p.trigger_rule("tool-call", p.literal(fc_start) + p.space() + tool_choice + p.space()
                                    + p.literal(fc_end))

    reasoning = p.eps()
    reasoning_with_tc = p.eps()
    obligatory_tool_calls = tool_calls
    allow_reasoning_with_tc = False
    if not require_tools:
        tool_calls = p.optional(tool_calls)

    if extract_reasoning and inputs.enable_thinking:
        reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END)
        reasoning_with_tc = THINK_START + p.reasoning(p.until_one_of([TC_SEPARATOR + fc_start, fc_start, THINK_END])) \
            + p.space() + obligatory_tool_calls
        allow_reasoning_with_tc = True
    elif extract_reasoning:
        # thinking off: the generation prompt still holds `<think></think>` (V3.2) or `</think>` (V4)
        reasoning = p.optional(p.literal(THINK_END)) if is_v4 \
            else p.optional(p.literal(THINK_START) + p.until(THINK_END) + p.literal(THINK_END))

    if response_format:
        rf = p.rule("response-format", p.literal("```json") + p.space()
                    + p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
                    + p.space() + p.literal("```"))
        return gen_prompt + reasoning + rf + end

    if not has_tool_calls:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    content_before_tools = p.negate(p.literal(THINK_START)) \
        + p.content(p.until_one_of([TC_SEPARATOR + fc_start, fc_start])) + p.space()
    if allow_reasoning_with_tc:
        return gen_prompt + (reasoning_with_tc | (reasoning + content_before_tools + tool_calls)) + end
    return gen_prompt + reasoning + content_before_tools + tool_calls + end


HANDLER = Handler("deepseek", detect, generate)
