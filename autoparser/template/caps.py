"""Template capability probing, equal to llama.cpp's `caps_get` (common/jinja/caps.cpp).

The C++ engine renders a few probe conversations while recording, for every input value, whether the
template *used* it and which *ops* it applied (`test_is_<name>`, filter/method names, `array_access`,
`object_access`). The probes here render in the C++-flavour environment (cpp.py) with tracked input values,
whose uses its hooks record. Where the two engines differ in what they can observe, the tracked types
approximate the C++ rule (a C++ identifier lookup marks a value used; here printing, comparing, testing or
taking the truthiness of a tracked string does, and any use of a string bound to a name, a context variable or
a loop's `items()`/`values()` value). Known remaining gaps are listed in tests/data/ratchet/caps.json.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from autoparser.errors import TemplateError
from autoparser.template.cpp import (
    CppTemplate,
    compile_cpp,
    in_transformers_reading,
    recording,
    stats_of,
    track,
    tracked_variable,
)
from autoparser.template.render import ChatTemplate
from autoparser.template.sandbox import run_template, time_budget

__all__ = ["TemplateCaps", "join_content_parts", "normalize_messages", "template_caps"]


@dataclasses.dataclass(frozen=True)
class TemplateCaps:
    """What a template can express; field names are those of the C++ `caps` record."""

    supports_tools: bool = True
    supports_tool_calls: bool = True
    supports_system_role: bool = True
    supports_parallel_tool_calls: bool = True
    supports_string_content: bool = True
    supports_typed_content: bool = False
    supports_object_arguments: bool = False
    supports_preserve_reasoning: bool = False
    supports_reasoning_effort: bool = False

    def to_dict(self) -> dict[str, bool]:
        return dataclasses.asdict(self)


_CONTENT_MARKER = "STRING_MARKER"
_REASONING_PLACEHOLDER = "<REASONING_CONTENT_PLACEHOLDER>"
_PROBE_TIME_LIMIT = 5.0


def _probe_tools() -> list[Any]:
    return [{
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }]


def _tool_conversation(arguments: Any, calls: int) -> list[Any]:
    tool_calls = [
        {"id": f"call0000{i + 1}", "type": "function", "function": {"name": "tool1", "arguments": arguments}}
        for i in range(calls)
    ]
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": tool_calls},
        # (transformers requests name the tool a result comes from, and some templates refuse one without:
        # llama.cpp's probe has no name, the transformers reading's has)
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001",
         **({"name": "tool1"} if in_transformers_reading() else {})},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


class _Probe:
    __slots__ = ("ctx", "messages", "output", "success", "tools")

    def __init__(self, compiled: CppTemplate, name: str, messages: list[Any], tools: list[Any] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self.messages = track(messages)
        self.tools = track(tools if tools is not None else [])
        # caps_get's own context (not the chat one): tools always defined, generation prompt on
        self.ctx: dict[str, Any] = {
            "messages": self.messages,
            "tools": self.tools,
            "bos_token": "",
            "eos_token": "",
            "add_generation_prompt": True,
        }
        self.ctx.update(extra or {})
        with recording():
            try:
                self.output = run_template(compiled, self.ctx, name=name, time_limit=_PROBE_TIME_LIMIT)
                self.success = True
            except TemplateError:
                self.output = ""
                self.success = False


def _at(value: Any, *path: Any) -> Any:
    for key in path:
        value = dict.__getitem__(value, key) if isinstance(value, dict) else list.__getitem__(value, key)
    return value


def template_caps(template: ChatTemplate | CppTemplate | str, name: str = "<template>") -> TemplateCaps:
    """Probe a template's capabilities (never raises for render failures; syntax errors raise TemplateError).

    A ChatTemplate keeps its compiled C++ flavour, so probing it again, or analysing it, compiles nothing."""
    compiled = template.cpp if isinstance(template, ChatTemplate) else \
        template if isinstance(template, CppTemplate) else compile_cpp(template, name)
    with time_budget(phase="probing capabilities"):
        return _probe_all(compiled, compiled.name or name)


def _probe_all(compiled: CppTemplate, name: str) -> TemplateCaps:
    caps: dict[str, bool] = TemplateCaps().to_dict()

    # 1. typed content: string content the template treats as an array.
    p = _Probe(compiled, name, [{"role": "user", "content": _CONTENT_MARKER}])
    content = stats_of(_at(p.messages, 0, "content"))
    checks_for_string = "test_is_string" in content.ops
    used_as_array = "selectattr" in content.ops or "array_access" in content.ops
    if used_as_array:
        caps["supports_typed_content"] = True
    if not p.success or (used_as_array and _CONTENT_MARKER not in p.output):
        caps["supports_string_content"] = False

    # 2. if the template asked "is string", see whether it handles an (empty) array.
    if checks_for_string:
        p = _Probe(compiled, name, [{"role": "user", "content": []}])
        content = stats_of(_at(p.messages, 0, "content"))
        if p.success and ("selectattr" in content.ops or "array_access" in content.ops):
            caps["supports_typed_content"] = True

    # 3. system role: the system message's content must be read.
    p = _Probe(compiled, name, [{"role": "system", "content": "System message"},
                                {"role": "user", "content": "User message"}])
    if not stats_of(_at(p.messages, 0, "content")).used:
        caps["supports_system_role"] = False

    # 4. one tool call with object arguments.
    p = _Probe(compiled, name, _tool_conversation({"arg": "value"}, 1), _probe_tools())
    if p.success:
        if not stats_of(_at(p.tools, 0, "function", "name")).used:
            caps["supports_tools"] = False
        tool_calls = _at(p.messages, 1, "tool_calls")
        if not stats_of(tool_calls).used:
            caps["supports_tool_calls"] = False
        elif stats_of(_at(tool_calls, 0, "function", "arguments", "arg")).used:
            caps["supports_object_arguments"] = True

    # 5. the same with arguments as a JSON string.
    if not caps["supports_object_arguments"]:
        p = _Probe(compiled, name, _tool_conversation('{"arg": "value"}', 1), _probe_tools())
        if not p.success:
            caps["supports_tool_calls"] = False
            caps["supports_tools"] = False
        else:
            if not stats_of(_at(p.tools, 0, "function", "name")).used:
                caps["supports_tools"] = False
            if not stats_of(_at(p.messages, 1, "tool_calls")).used:
                caps["supports_tool_calls"] = False

    # 6. parallel calls: the second call must be read.
    args: Any = {"arg": "value"} if caps["supports_object_arguments"] else '{"arg": "value"}'
    p = _Probe(compiled, name, _tool_conversation(args, 2), _probe_tools())
    if not p.success or not stats_of(_at(p.messages, 1, "tool_calls", 1, "function")).used:
        caps["supports_parallel_tool_calls"] = False

    # 7. reasoning kept in history (judged on the output: a test on reasoning_content is not enough).
    p = _Probe(compiled, name, [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": _REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], extra={"enable_thinking": True, "preserve_thinking": True, "clear_thinking": False,
              "truncate_history_thinking": False, "drop_thinking": False})
    if _REASONING_PLACEHOLDER in p.output:
        caps["supports_preserve_reasoning"] = True

    # 8. reasoning effort: one value bound to both names, so either spelling counts.
    effort = tracked_variable("low")
    p = _Probe(compiled, name, [{"role": "user", "content": "User message"}],
               extra={"enable_thinking": True, "reasoning_effort": effort, "reasoning_strength": effort})
    caps["supports_reasoning_effort"] = stats_of(effort).used

    return TemplateCaps(**caps)


def join_content_parts(parts: list[Any], *, coerce_text: bool = False) -> str:
    """Typed content as one string, as the C++ joins it: text parts joined by newlines, except next to media
    markers; other part types are dropped.

    `coerce_text`: read the parts as the chat layer reads a request's (any mapping is a part, a text that is not
    a string is written with str()); without it, as JSON (dict parts only, a text that is not a string adds
    nothing).
    """
    text = ""
    last_was_media_marker = False
    for part in parts:
        kind = part.get("type", "") if isinstance(part, Mapping if coerce_text else dict) else ""
        if kind == "text":
            add_new_line = not last_was_media_marker and text != ""
            last_was_media_marker = False
        elif kind == "media_marker":
            add_new_line = False
            last_was_media_marker = True
        else:
            continue
        if add_new_line:
            text += "\n"
        value = part.get("text", "")
        text += str(value) if coerce_text else value if isinstance(value, str) else ""
    return text


def normalize_messages(messages: list[Any], caps: TemplateCaps, *, coerce_text: bool = False) -> list[Any]:
    """Adapt message content to what the template supports (the C++ `messages_inp_normalizer`).

    String-only templates get typed content arrays joined into one string (join_content_parts, which
    `coerce_text` is passed to); typed-only templates get string content wrapped as `[{"type": "text", "text":
    s}]`; otherwise messages are returned unchanged. Only the messages rewritten are copies.
    """
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    if not (only_string or only_typed):
        return messages
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and "content" in message:
            content = message["content"]
            if only_typed and isinstance(content, str):
                message = {**message, "content": [{"type": "text", "text": content}]}
            elif only_string and isinstance(content, list):
                message = {**message, "content": join_content_parts(content, coerce_text=coerce_text)}
        out.append(message)
    return out
