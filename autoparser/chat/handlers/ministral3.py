"""Ministral / Magistral 3 (`common_chat_params_init_ministral_3`, parsers/ministral3.cpp).

`[THINK]...[/THINK]` reasoning, then content, then `[TOOL_CALLS]NAME[ARGS]{json}` repeated. Why a handler: the
template wants the reasoning and text of system/assistant messages as typed blocks, which the analyzer's probes
never produce, so its renders show no reasoning markers. Detection also catches Devstral-Small-2507 (same
markers, no `[CALL_ID]`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autoparser.chat.constraint import Alt, CallTags, Json, Lit, Seq, Space, Tag, arguments_schema
from autoparser.chat.spec import CALL_TRANSFORM, Build, FormatSpec, Laziness, Prefill, response_fields, word
from autoparser.chat.tools import Function, functions
from autoparser.peg.builder import P


def detect(source: str) -> FormatSpec | None:
    # Mistral Small 3.2 has [CALL_ID]; it is left to the analyzer.
    found = "[SYSTEM_PROMPT]" in source and "[TOOL_CALLS]" in source and "[ARGS]" in source
    return SPEC if found and "[CALL_ID]" not in source else None


def adjusted_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """System and assistant messages as typed blocks: a `thinking` block, then `text` (or the given blocks)."""
    out: list[Mapping[str, Any]] = []
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


def _build(b: Build) -> P:
    p = b.p
    gp = p.eps()  # the generation prompt is empty for this template
    reasoning = p.think("[THINK]", "[/THINK]", ["[TOOL_CALLS]"] if b.tool_calls else []) if b.extract_reasoning \
        else p.eps()

    if b.response_format:
        # the model fences its JSON answer in a ```json block
        return gp + (reasoning << "```json" << p.content(p.schema(p.json(), "response-format", b.inputs.json_schema))
                     << "```")

    if b.tool_calls:
        tool_choice = p.choice()
        for f in functions(b.inputs.tools):
            # (relaxed, space_then: whitespace before the arguments and before a further call's opener)
            tool_choice |= p.rule(f"tool-{f.name}", p.tool_open(p.tool_name(p.literal(f.name)) + p.arguments_marker("[ARGS]"))
                                  + p.space_then(p.fenced_arguments(p.tool_args(p.schema(
                                      p.arguments_value(), f"tool-{f.name}-schema", f.schema)))))
        # (relaxed: the model may leave `[TOOL_CALLS]` out: a call is then its name followed by `[ARGS]`)
        call = p.space_then(p.call_opener("[TOOL_CALLS]")) + tool_choice
        tool_calls = p.trigger_rule("tool-call", p.repeat(call, *b.call_counts))
        openers = [f"{f.name}[ARGS]" for f in functions(b.inputs.tools)]
        return gp + (reasoning << p.content_until_calls(["[TOOL_CALLS]"], openers, lambda: call) << tool_calls)

    return gp + (reasoning << p.content(p.rest()))


# For transformers' parser: `[TOOL_CALLS]NAME[ARGS]{json}`, a call with no closer: it ends where the next begins.
_CALLS = {"open_pattern": r"\[TOOL_CALLS\](?P<name>[A-Za-z0-9_.\-]+)\[ARGS\]", "close_pattern": r"(?=\[TOOL_CALLS\])",
          "content": "json", "repeats": True, "transform": CALL_TRANSFORM}


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: each call `[TOOL_CALLS]NAME[ARGS]{json}` (no closer: the call
    ends with its arguments); text may not hold `[ARGS]`, so that a call without its `[TOOL_CALLS]` is refused."""
    calls = tuple(Seq((Lit(f.name), Space(), Lit("[ARGS]"), Space(), Json(arguments_schema(f))))
                  for f in fns)
    return CallTags("[TOOL_CALLS]", (Tag("[TOOL_CALLS]", Alt(calls), ""),), ("[ARGS]",))


SPEC = FormatSpec(
    "ministral3", _build, Prefill("", "[THINK]", "[/THINK]"), laziness=Laziness.TOOLS_AUTO, relaxes=True,
    triggers=(word("[TOOL_CALLS]"),), messages=adjusted_messages,
    response_fields=response_fields(_CALLS, thinking=("[THINK]", "[/THINK]")), call_tags=_call_tags,
    preserved_tokens=("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"), supports_thinking=True,
    thinking_start_tag="[THINK]", thinking_end_tags=("[/THINK]",))
