"""GPT-OSS (OpenAI Harmony): channel-based messages (`common_chat_params_init_gpt_oss`, parsers/gpt-oss.cpp).

Every assistant turn is `<|start|>assistant` + a channel header + `<|message|>` + body. `analysis` carries the
reasoning, `final` the answer, `commentary` preambles; a tool call names its recipient `to=functions.NAME`
either in the role header or in the channel header. The analyzer cannot describe this: one output holds
several assistant turns, each re-opened with the role marker.
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
from autoparser.chat.handlers._support import functions, has_continuation, has_response_format, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

RETURN_TOKEN = "<|return|>"
END_TOKEN = "<|end|>"

# Where a tool call begins: a recipient after the role (` to=`) or after the channel name.
TRIGGERS = (
    GrammarTrigger(TriggerType.PATTERN, r"^\s+to$"),
    GrammarTrigger(TriggerType.PATTERN, r"^<\|channel\|>(?:commentary|analysis)\s+to=functions$"),
    GrammarTrigger(TriggerType.PATTERN, r"<\|start\|>assistant(\s+to)"),
    GrammarTrigger(TriggerType.PATTERN, r"<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)"),
)


def detect(source: str) -> bool:
    return "<|channel|>" in source


def _adjusted_messages(messages: Any) -> list[dict[str, Any]]:
    """The template reads reasoning from `thinking`; with tool calls the content must go (it would render twice)."""
    out = []
    for m in messages:
        msg = dict(m)
        if isinstance(msg.get("reasoning_content"), str):
            msg["thinking"] = msg["reasoning_content"]
            calls = msg.get("tool_calls")
            if isinstance(calls, list) and calls:
                msg.pop("content", None)
        out.append(msg)
    return out


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    messages = _adjusted_messages(inputs.messages)
    prompt = render_prompt(tmpl, inputs, messages=messages)
    if not inputs.add_generation_prompt:
        # llama.cpp issue 15417: a rendered history ends with <|return|>, but at inference the model's last turn
        # must read as closed with <|end|> so that a new turn can follow.
        pos = prompt.rfind(RETURN_TOKEN)
        if pos >= 0:
            prompt = prompt[:pos] + END_TOKEN + prompt[pos + len(RETURN_TOKEN):]
    gp = generation_prompt(tmpl, inputs, messages=messages)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = "<|start|>assistant<|channel|>analysis<|message|>" + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += "<|end|><|start|>assistant<|channel|>final<|message|>" + render_content(msg)
        prompt += gp

    tools = has_tools(inputs)
    response_format = has_response_format(inputs)
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)
    extract_reasoning = inputs.reasoning_format != "none"

    p = ChatBuilder()
    root = _build(p, inputs, tools, response_format, extract_reasoning)
    arena = p.build(root)

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not (response_format or (tools and inputs.tool_choice == ToolChoice.REQUIRED))
        grammar = to_grammar(arena, lazy)
        triggers = TRIGGERS

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=("<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"),
        supports_thinking=True, thinking_start_tag="<|channel|>analysis<|message|>", thinking_end_tags=("<|end|>",),
        message_delimiters=(("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                            ("system", "<|start|>developer"), ("system", "<|start|>system"),
                            ("tool", "<|start|>functions")))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool,
           extract_reasoning: bool) -> P:
    start = p.rule("start", p.literal("<|start|>assistant"))
    end = p.rule("end", p.literal("<|end|>"))
    content = p.rule("message-content", p.until("<|end|>"))
    channel = p.literal("<|channel|>") + (p.literal("commentary") | p.literal("analysis"))
    constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)

    # gpt-oss-20b sometimes opens a turn with a stray commentary header before the real channel
    stray_commentary = p.optional(p.literal("<|channel|>commentary") + p.optional(p.literal(" to=assistant")))
    start_analysis = stray_commentary + p.literal("<|channel|>analysis<|message|>")

    if extract_reasoning:
        p.rule("analysis", start_analysis + p.reasoning(content) + end)
    else:
        p.rule("analysis", p.content(start_analysis + content + end))

    analysis = p.ref("analysis")
    preamble = p.rule("preamble", p.literal("<|channel|>commentary<|message|>") + p.content(content) + end)
    final_msg = p.rule("final", stray_commentary + p.literal("<|channel|>final<|message|>") + p.content(content))

    # Calls the request did not declare (built-in tools such as python or container.exec) are consumed whole.
    unsolicited = p.rule("unsolicited", p.atomic(p.optional(channel) + p.literal(" to=") + content + end))

    any_ = p.rule("any", preamble | analysis)

    if response_format:
        constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
        rf = p.rule("response-format", p.literal("<|channel|>final") + constraint + p.literal("<|message|>")
                    + p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema)))
        return p.zero_or_more(start + analysis) + start + rf

    if tools and inputs.tool_choice != ToolChoice.NONE:
        tool_choice = p.choice()
        for name, params in functions(inputs.tools):
            func_name = p.literal(" to=functions.") + p.tool_name(p.literal(name))
            constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
            args = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", params))
            # <|start|>assistant to=functions.NAME<|channel|>commentary[ <|constrain|>json]<|message|>ARGS
            tool_in_role = p.tool(p.tool_open(func_name + channel + constraint + p.literal("<|message|>")) + args)
            # <|start|>assistant<|channel|>commentary to=functions.NAME[ <|constrain|>json]<|message|>ARGS
            tool_in_channel = p.tool(p.tool_open(channel + func_name + constraint + p.literal("<|message|>")) + args)
            tool_choice |= p.rule(f"tool-{name}", tool_in_role | tool_in_channel)
        tool_call = p.trigger_rule("tool-call", tool_choice)
        if inputs.tool_choice == ToolChoice.REQUIRED:
            return p.zero_or_more(start + any_) + start + tool_call
        return p.zero_or_more(start + any_) + start + (tool_call | final_msg)

    return p.zero_or_more(start + any_) + start + (final_msg | unsolicited)


HANDLER = Handler("gpt_oss", detect, generate)
