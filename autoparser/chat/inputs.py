"""What a chat format reads: the prepared request (`generation_params`), and the prompt rendering every format
shares.

`prepare_inputs` follows the start of llama.cpp's `common_chat_templates_apply_jinja`: convert the request to
the message and tool JSON templates see, then apply the message workarounds the template's capabilities call
for. `render_prompt` / `generation_prompt` are `common_chat_template_direct_apply(_impl)` and its generation-
prompt diff, with the overrides (messages, tools, extra context) a format may pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from autoparser.chat.request import (
    ChatRequest,
    Continuation,
    ToolChoice,
    message_to_oaicompat,
    tools_to_oaicompat,
)
from autoparser.errors import AutoparserError
from autoparser.peg.nodes import C_SPACE
from autoparser.template.caps import TemplateCaps, normalize_messages
from autoparser.template.render import ChatTemplate

__all__ = ["GenerationInputs", "generation_prompt", "prepare_inputs", "render_prompt"]


@dataclass(frozen=True)
class GenerationInputs:
    """`generation_params`: the request after conversion and workarounds, as every chat format sees it."""

    request: ChatRequest
    messages: tuple[dict[str, Any], ...]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool
    continuation: Continuation
    continue_msg: Mapping[str, Any] | None
    extra_context: dict[str, Any]
    now: datetime | None

    @property
    def tool_choice(self) -> ToolChoice:
        return self.request.tool_choice

    @property
    def parallel_tool_calls(self) -> bool:
        return self.request.parallel_tool_calls

    @property
    def reasoning_format(self) -> str:
        return self.request.reasoning_format

    @property
    def enable_thinking(self) -> bool:
        return self.request.enable_thinking

    @property
    def json_schema(self) -> Any:
        return self.request.json_schema

    @property
    def has_tools(self) -> bool:
        """Tools were given (a non-empty list)."""
        return isinstance(self.tools, list) and bool(self.tools)

    @property
    def has_continuation(self) -> bool:
        """`generation_params::has_continuation`: continuing a message that is not empty (the role alone
        does not count, as in `common_chat_msg::empty`)."""
        msg = self.continue_msg
        if self.continuation == Continuation.NONE or not msg:
            return False
        return any(msg.get(key) for key in ("content", "tool_calls", "reasoning_content", "tool_name", "name",
                                            "tool_call_id"))


def prepare_inputs(tmpl: ChatTemplate, caps: TemplateCaps, request: ChatRequest) -> GenerationInputs:
    """The request as the template will see it, with the C++'s message workarounds applied."""
    raw = list(request.messages)
    if "You have access to the following functions in JSONSchema format" in tmpl.source:
        # StepFun: leftover whitespace in history drives the model into loops; the C++ trims it.
        raw = [_trim_message(m) for m in raw]
    messages = [message_to_oaicompat(m) for m in raw]
    messages = normalize_messages(messages, caps, coerce_text=True)
    add_gp = request.add_generation_prompt
    continuation = request.continue_final_message
    continue_msg: Mapping[str, Any] | None = None
    if continuation != Continuation.NONE:
        add_gp = False
        if request.messages:
            continue_msg = request.messages[-1]
            messages = messages[:-1]
        if continuation == Continuation.AUTO and continue_msg is not None:
            continuation = Continuation.CONTENT
            if continue_msg.get("reasoning_content") and not continue_msg.get("content"):
                continuation = Continuation.REASONING
    if "<|channel|>" not in tmpl.source:
        for m in messages:
            if m.get("role") == "developer":
                m["role"] = "system"
    if not caps.supports_system_role and messages and messages[0].get("role") == "system":
        first = messages.pop(0)
        if messages:
            messages[0] = dict(messages[0], content=f"{first.get('content', '')}\n{messages[0].get('content', '')}")
    if caps.supports_tool_calls:
        for m in messages:
            if "tool_calls" in m and "content" not in m:
                m["content"] = ""
    if caps.supports_object_arguments:
        for m in messages:
            for tc in m.get("tool_calls", []):
                args = tc["function"].get("arguments")
                if isinstance(args, str):
                    try:
                        tc["function"]["arguments"] = json.loads(args)
                    except json.JSONDecodeError as e:
                        raise AutoparserError(f"Failed to parse tool call arguments as JSON: {e}") from None
    now = request.now
    stamp = now or datetime.now()
    extra: dict[str, Any] = {"datetime": stamp.strftime("%b %d %Y"), "date_string": stamp.strftime("%d %b %Y")}
    extra.update(request.chat_template_kwargs)
    tools = tools_to_oaicompat(request.tools)
    if tools and request.tool_choice != ToolChoice.NONE and request.grammar:
        raise AutoparserError("Cannot specify grammar with tools")
    return GenerationInputs(request, tuple(messages), tools, add_gp, continuation, continue_msg, extra, now)


def _trim_message(m: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(m)
    ws = C_SPACE
    if isinstance(out.get("content"), str):
        out["content"] = out["content"].strip(ws)
    elif isinstance(out.get("content"), list):
        out["content"] = [dict(p, text=p["text"].strip(ws)) if p.get("type") == "text" else p for p in out["content"]]
    if isinstance(out.get("reasoning_content"), str):
        out["reasoning_content"] = out["reasoning_content"].strip(ws)
    return out


def _context(inputs: GenerationInputs, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    ctx = dict(inputs.extra_context)
    if extra:
        ctx.update(extra)
    return ctx


def render_prompt(tmpl: ChatTemplate, inputs: GenerationInputs, *,
                  messages: Sequence[Mapping[str, Any]] | None = None,
                  extra: Mapping[str, Any] | None = None, cpp_context: bool = True) -> str:
    """`common_chat_template_direct_apply(_impl)`: C++ context rules, empty bos/eos (with `cpp_context=False`,
    the variables transformers passes instead: see template/render.py).

    Formats that rewrite the messages pass them as an override; `extra` adds context variables.
    """
    return tmpl.render(list(inputs.messages if messages is None else messages), tools=inputs.tools,
                       add_generation_prompt=inputs.add_generation_prompt, enable_thinking=inputs.enable_thinking,
                       extra_context=_context(inputs, extra), now=inputs.now, cpp_context=cpp_context)


def generation_prompt(tmpl: ChatTemplate, inputs: GenerationInputs, *,
                      messages: Sequence[Mapping[str, Any]] | None = None,
                      extra: Mapping[str, Any] | None = None, cpp_context: bool = True) -> str:
    """The suffix `add_generation_prompt` adds (continuation forced off), byte-prefix diff as in the C++."""
    return tmpl.generation_prompt(list(inputs.messages if messages is None else messages), tools=inputs.tools,
                                  enable_thinking=inputs.enable_thinking, extra_context=_context(inputs, extra),
                                  now=inputs.now, cpp_context=cpp_context)
