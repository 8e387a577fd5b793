"""GPT-OSS (OpenAI Harmony): channel-based messages (`common_chat_params_init_gpt_oss`, parsers/gpt-oss.cpp).

Every assistant turn is `<|start|>assistant` + a channel header + `<|message|>` + body. `analysis` carries the
reasoning, `final` the answer, `commentary` preambles; a tool call names its recipient `to=functions.NAME`
either in the role header or in the channel header. Why a handler: one output holds several assistant turns,
each re-opened with the role marker, which the analyzer's one-turn model cannot describe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from autoparser.chat.inputs import GenerationInputs
from autoparser.chat.spec import Build, FormatSpec, Prefill, Rendered, SchemaRule, pattern
from autoparser.chat.tools import functions
from autoparser.peg.builder import P

RETURN_TOKEN = "<|return|>"
END_TOKEN = "<|end|>"


def detect(source: str) -> FormatSpec | None:
    return SPEC if "<|channel|>" in source else None


def _thinking_field(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The template reads reasoning from `thinking`; with tool calls the content must go (it would render twice)."""
    out: list[Mapping[str, Any]] = []
    for m in messages:
        msg = dict(m)
        if isinstance(msg.get("reasoning_content"), str):
            msg["thinking"] = msg["reasoning_content"]
            calls = msg.get("tool_calls")
            if isinstance(calls, list) and calls:
                msg.pop("content", None)
        out.append(msg)
    return out


def _closed_last_turn(rendered: Rendered, inputs: GenerationInputs) -> Rendered:
    """llama.cpp issue 15417: a rendered history ends with <|return|>, but at inference the model's last turn
    must read as closed with <|end|> so that a new turn can follow."""
    pos = rendered.prompt.rfind(RETURN_TOKEN)
    if inputs.add_generation_prompt or pos < 0:
        return rendered
    return replace(rendered, prompt=rendered.prompt[:pos] + END_TOKEN + rendered.prompt[pos + len(RETURN_TOKEN):])


def _build(b: Build) -> P:
    p = b.p
    start = p.rule("start", p.literal("<|start|>assistant"))
    end = p.rule("end", p.literal("<|end|>"))
    content = p.rule("message-content", p.until("<|end|>"))
    channel = p.literal("<|channel|>") + (p.literal("commentary") | p.literal("analysis"))
    constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)

    # gpt-oss-20b sometimes opens a turn with a stray commentary header before the real channel
    stray_commentary = p.optional(p.literal("<|channel|>commentary") + p.optional(p.literal(" to=assistant")))
    start_analysis = stray_commentary + p.literal("<|channel|>analysis<|message|>")

    if b.extract_reasoning:
        p.rule("analysis", start_analysis + p.reasoning(content) + end)
    else:
        p.rule("analysis", p.content(start_analysis + content + end))

    analysis = p.ref("analysis")
    preamble = p.rule("preamble", p.literal("<|channel|>commentary<|message|>") + p.content(content) + end)
    final_msg = p.rule("final", stray_commentary + p.literal("<|channel|>final<|message|>") + p.content(content))

    # Calls the request did not declare (built-in tools such as python or container.exec) are consumed whole.
    unsolicited = p.rule("unsolicited", p.atomic(p.optional(channel) + p.literal(" to=") + content + end))

    any_ = p.rule("any", preamble | analysis)

    if b.response_format:
        constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
        rf = p.rule("response-format", p.literal("<|channel|>final") + constraint + p.literal("<|message|>")
                    + p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema)))
        return p.zero_or_more(start + analysis) + start + rf

    if b.tool_calls:
        tool_choice = p.choice()
        for f in functions(b.inputs.tools):
            func_name = p.literal(" to=functions.") + p.tool_name(p.literal(f.name))
            constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
            args = p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema", f.schema))
            # <|start|>assistant to=functions.NAME<|channel|>commentary[ <|constrain|>json]<|message|>ARGS
            tool_in_role = p.tool(p.tool_open(func_name + channel + constraint + p.literal("<|message|>")) + args)
            # <|start|>assistant<|channel|>commentary to=functions.NAME[ <|constrain|>json]<|message|>ARGS
            tool_in_channel = p.tool(p.tool_open(channel + func_name + constraint + p.literal("<|message|>")) + args)
            tool_choice |= p.rule(f"tool-{f.name}", tool_in_role | tool_in_channel)
        tool_call = p.trigger_rule("tool-call", tool_choice)
        if b.required:
            return p.zero_or_more(start + any_) + start + tool_call
        return p.zero_or_more(start + any_) + start + (tool_call | final_msg)

    return p.zero_or_more(start + any_) + start + (final_msg | unsolicited)


SPEC = FormatSpec(
    "gpt_oss", _build,
    Prefill("<|start|>assistant", "<|channel|>analysis<|message|>",
            "<|end|><|start|>assistant<|channel|>final<|message|>"),
    response_format=SchemaRule.OBJECT, messages=_thinking_field, fix_prompt=_closed_last_turn,
    # Where a tool call begins: a recipient after the role (` to=`) or after the channel name.
    triggers=(pattern(r"^\s+to$"), pattern(r"^<\|channel\|>(?:commentary|analysis)\s+to=functions$"),
              pattern(r"<\|start\|>assistant(\s+to)"),
              pattern(r"<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)")),
    preserved_tokens=("<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"),
    supports_thinking=True, thinking_start_tag="<|channel|>analysis<|message|>", thinking_end_tags=("<|end|>",),
    message_delimiters=(("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                        ("system", "<|start|>developer"), ("system", "<|start|>system"),
                        ("tool", "<|start|>functions")))
