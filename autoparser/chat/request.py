"""A chat request (what `common_chat_templates_inputs` holds) and the message/tool JSON the template sees.

The request dict uses the field names of the `params` objects in llama.cpp's chat test data: messages and
tools in OpenAI form, tool_choice (0 auto, 1 required, 2 none, or the names), reasoning_format, enable_thinking,
parallel_tool_calls, add_generation_prompt, json_schema, continue_final_message (0 none, 1 auto, 2 reasoning,
3 content), chat_template_kwargs, grammar (the caller's own GBNF grammar), and `now` (the date or time the prompt
is rendered at). Any other key is refused (UnknownKeyError, with the closest of these).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from enum import IntEnum
from typing import Any

from autoparser.errors import AutoparserError, check_keys
from autoparser.template.caps import join_content_parts


class ToolChoice(IntEnum):
    AUTO = 0
    REQUIRED = 1
    NONE = 2


class Continuation(IntEnum):
    NONE = 0
    AUTO = 1
    REASONING = 2
    CONTENT = 3


REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")


def _enum(cls: type[IntEnum], value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise AutoparserError(f"unknown {what} {value!r}") from None
    try:
        return cls(int(value or 0))
    except (TypeError, ValueError):
        raise AutoparserError(f"unknown {what} {value!r}") from None


def _parse_now(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise AutoparserError(f"request 'now' is not an ISO date or time: {value!r}") from None


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Mapping[str, Any], ...] = ()
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: ToolChoice = ToolChoice.AUTO
    reasoning_format: str = "none"
    enable_thinking: bool = True
    parallel_tool_calls: bool = False
    add_generation_prompt: bool = True
    json_schema: Any = None  # a JSON object (`{}` included), or None
    continue_final_message: Continuation = Continuation.NONE
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    grammar: str = ""
    now: datetime | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | ChatRequest) -> ChatRequest:
        if isinstance(d, ChatRequest):
            return d
        if not isinstance(d, Mapping):
            raise AutoparserError("request must be a dict")
        # a misspelt key ("tool", "enable_thinkng") would otherwise leave its default in place without a word
        check_keys(d, REQUEST_KEYS, caller="generate()", where="the request")
        rf = str(d.get("reasoning_format") or "none").lower()
        if rf not in REASONING_FORMATS:
            raise AutoparserError(f"unknown reasoning_format {rf!r}")
        schema = d.get("json_schema")
        if isinstance(schema, str):
            try:
                schema = json.loads(schema) if schema.strip() else None
            except json.JSONDecodeError as e:
                raise AutoparserError(f"json_schema is not valid JSON: {e}") from None
        kwargs = {}
        for k, v in dict(d.get("chat_template_kwargs") or {}).items():
            # the C++ takes each kwarg as JSON text; accept values already decoded too
            if isinstance(v, str):
                with contextlib.suppress(json.JSONDecodeError):
                    v = json.loads(v)
            kwargs[k] = v
        return cls(
            messages=tuple(d.get("messages") or ()),
            tools=checked_tools(d.get("tools")),
            tool_choice=_enum(ToolChoice, d.get("tool_choice", 0), "tool_choice"),
            reasoning_format=rf,
            enable_thinking=bool(d.get("enable_thinking", True)),
            parallel_tool_calls=bool(d.get("parallel_tool_calls", False)),
            add_generation_prompt=bool(d.get("add_generation_prompt", True)),
            # `{}` too: formats differ on whether an empty object asks for JSON (spec.SchemaRule, as llama.cpp)
            json_schema=schema if isinstance(schema, dict) else None,
            continue_final_message=_enum(Continuation, d.get("continue_final_message", 0), "continue_final_message"),
            chat_template_kwargs=kwargs,
            grammar=str(d.get("grammar") or ""),
            now=_parse_now(d.get("now")),
        )


# The keys a request may hold: ChatRequest's fields, each read by `from_dict` under its own name.
REQUEST_KEYS = tuple(f.name for f in fields(ChatRequest))


def checked_tools(tools: Any) -> tuple[Mapping[str, Any], ...]:
    """The request's tools: a list of objects, each a function (`{"type": "function", "function": {...}}`, or
    the function itself) with a name."""
    if not tools:
        return ()
    if not isinstance(tools, (list, tuple)):
        raise AutoparserError(f"tools must be a list of tool objects, got {type(tools).__name__}")
    for i, t in enumerate(tools):
        fn = t.get("function", t) if isinstance(t, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise AutoparserError(f"tools[{i}] is not a tool: expected an object with a function name, got "
                                  f"{json.dumps(t, ensure_ascii=False, default=repr)[:80]}")
    return tuple(tools)


def message_to_oaicompat(msg: Mapping[str, Any]) -> dict[str, Any]:
    """One message as `common_chat_msg::to_json_oaicompat` writes it (empty fields dropped, "" content)."""
    out: dict[str, Any] = {"role": msg.get("role", "")}
    content = msg.get("content")
    if isinstance(content, list) and content:
        if any(isinstance(p, Mapping) and p.get("type") == "media_marker" for p in content):
            out["content"] = join_content_parts(content, coerce_text=True)
        else:
            out["content"] = [{"type": p.get("type"), "text": p.get("text", "")} for p in content
                              if isinstance(p, Mapping)]
    elif isinstance(content, str) and content:
        out["content"] = content
    else:
        out["content"] = ""
    for key, name in (("reasoning_content", "reasoning_content"), ("name", "name"), ("tool_name", "name"),
                      ("tool_call_id", "tool_call_id")):
        v = msg.get(key)
        if v:
            out[name] = v
    calls = msg.get("tool_calls") or []
    if calls:
        out["tool_calls"] = []
        for tc in calls:
            fn = tc.get("function", tc)
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
            item: dict[str, Any] = {"type": "function", "function": {"name": fn.get("name", ""), "arguments": args}}
            if tc.get("id"):
                item["id"] = tc["id"]
            out["tool_calls"].append(item)
    return out


def tools_to_oaicompat(tools: tuple[Mapping[str, Any], ...]) -> list[dict[str, Any]] | None:
    """Tools as the C++ hands them to templates: {"type": "function", "function": {name, description, parameters}}."""
    if not tools:
        return None
    out = []
    for t in tools:
        fn = t.get("function", t)
        out.append({"type": "function", "function": {"name": fn.get("name", ""),
                                                     "description": fn.get("description", ""),
                                                     "parameters": fn.get("parameters", {})}})
    return out


def render_content(msg: Mapping[str, Any]) -> str:
    """`common_chat_msg::render_content`: the content, or text parts joined with blank lines (the separator
    only once some text precedes, as in the C++)."""
    c = msg.get("content")
    if not isinstance(c, list):
        return str(c or "")
    text = ""
    for p in c:
        if isinstance(p, Mapping) and p.get("type") == "text":
            if text:
                text += "\n\n"
            text += str(p.get("text", ""))
    return text
