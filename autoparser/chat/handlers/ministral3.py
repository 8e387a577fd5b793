"""Ministral / Magistral 3 (`common_chat_params_init_ministral_3`, parsers/ministral3.cpp).

`[THINK]...[/THINK]` reasoning, then content, then `[TOOL_CALLS]NAME[ARGS]{json}` repeated. The template wants
reasoning and text of system/assistant messages as typed blocks, which the analyzer's probes never produce.
Detection also catches Devstral-Small-2507 (same markers, no `[CALL_ID]`).
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
from autoparser.chat.handlers._support import functions, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat


def detect(source: str) -> bool:
    # Mistral Small 3.2 has [CALL_ID]; it is left to the analyzer.
    return ("[SYSTEM_PROMPT]" in source and "[TOOL_CALLS]" in source and "[ARGS]" in source
            and "[CALL_ID]" not in source)


def _adjusted_messages(messages: Any) -> list[Any]:
    """System and assistant messages as typed blocks: a `thinking` block, then `text` (or the given blocks)."""
    out: list[Any] = []
    for msg in messages:
        if msg.get("role", "") not in ("system", "assistant"):
            out.append(msg)
            continue
        blocks: list[Any] = []
        if isinstance(msg.get("reasoning_content"), str):
            blocks.append({"type": "thinking", "thinking": msg["reasoning_content"]})
        if "content" in msg:
            content = msg["content"]
            if isinstance(content, str):
                blocks.append({"type": "text", "text": content})
            elif isinstance(content, list):
                blocks.extend(content)
        adjusted = dict(msg)
        adjusted["content"] = blocks
        adjusted.pop("reasoning_content", None)
        out.append(adjusted)
    return out


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    messages = _adjusted_messages(inputs.messages)
    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    extract_reasoning = inputs.reasoning_format != "none"

    prompt = render_prompt(tmpl, inputs, messages=messages)
    gp = generation_prompt(tmpl, inputs, messages=messages)
    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = "[THINK]" + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += "[/THINK]" + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    root, include_grammar = _build(p, inputs, tools, response_format, extract_reasoning)
    arena = p.build(root)

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = tools and inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, "[TOOL_CALLS]"),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"),
        supports_thinking=True, thinking_start_tag="[THINK]", thinking_end_tags=("[/THINK]",))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool,
           extract_reasoning: bool) -> tuple[P, bool]:
    """The root parser, and whether a grammar goes with it (not for plain content)."""
    gp = p.eps()  # the generation prompt is empty for this template
    reasoning = p.optional("[THINK]" + p.reasoning(p.until("[/THINK]")) + "[/THINK]") if extract_reasoning \
        else p.eps()

    if response_format:
        # the model fences its JSON answer in a ```json block
        return gp + (reasoning << "```json" << p.content(p.schema(p.json(), "response-format", inputs.json_schema))
                     << "```"), True

    if tools and inputs.tool_choice != ToolChoice.NONE:
        tool_choice = p.choice()
        for name, schema in functions(inputs.tools):
            tool_choice |= p.rule(f"tool-{name}", p.tool_open(p.tool_name(p.literal(name)) + "[ARGS]")
                                  + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema)))
        min_calls = 1 if inputs.tool_choice == ToolChoice.REQUIRED else 0
        max_calls = -1 if inputs.parallel_tool_calls else 1
        tool_calls = p.trigger_rule("tool-call", p.repeat("[TOOL_CALLS]" + tool_choice, min_calls, max_calls))
        return gp + (reasoning << p.content(p.until("[TOOL_CALLS]")) << tool_calls), True

    return gp + (reasoning << p.content(p.rest())), False


HANDLER = Handler("ministral3", detect, generate)
