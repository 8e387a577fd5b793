"""Values passed between pipeline stages: parsed messages, tool calls, streaming deltas, tool definitions.

All frozen. They mirror llama.cpp's `common_chat_msg`, `common_chat_tool_call`, `common_chat_msg_diff` and
`common_chat_tool`; tool-call arguments stay JSON *text* (exactly what the model wrote, or a prefix of it while
streaming), never a decoded object, because streaming deltas are computed on that text.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from autoparser.errors import AutoparserError

__all__ = [
    "ChatFormat",
    "ChatMessage",
    "Diagnostic",
    "MessageDelta",
    "ToolCall",
    "ToolDef",
    "gen_tool_call_id",
    "parse_tools",
    "tool_parameters",
    "tools_to_openai",
]


class ChatFormat(str, Enum):
    """The parse formats of `common_chat_format`; the value is the C++ `common_chat_format_name`."""

    CONTENT_ONLY = "Content-only"
    PEG_SIMPLE = "peg-simple"
    PEG_NATIVE = "peg-native"
    PEG_GEMMA4 = "peg-gemma4"
    PEG_MINIMAX_M3 = "peg-minimax-m3"

    @classmethod
    def of(cls, value: ChatFormat | str) -> ChatFormat:
        """Accept an enum member, its value ("peg-native") or its name ("PEG_NATIVE")."""
        if isinstance(value, ChatFormat):
            return value
        try:
            return cls(value)
        except ValueError:
            pass
        try:
            return cls[value.upper().replace("-", "_")]
        except KeyError:
            raise AutoparserError(f"Unknown chat format: {value!r}") from None


@dataclass(frozen=True, init=False)
class ToolCall:
    name: str = ""
    arguments: str = ""  # JSON text, possibly a prefix of it while streaming
    id: str = ""

    def __init__(self, name: str = "", arguments: str = "", id: str = "") -> None:
        # A stream builds one or two of these per token. The frozen dataclass's generated __init__ sets each
        # field through object.__setattr__; filling the instance dict directly is twice as fast, and the
        # instance is just as frozen afterwards (only __setattr__ and __delattr__ guard it).
        d = self.__dict__
        d["name"] = name
        d["arguments"] = arguments
        d["id"] = id

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ToolCall:
        """From {name, arguments, id}; `arguments` given as an object is serialised compactly."""
        args = d.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        return cls(str(d.get("name", "") or ""), args, str(d.get("id", "") or ""))


@dataclass(frozen=True)
class Diagnostic:
    """One repair of a malformed model output: what kind, where in the output, and one readable line.

    `raw` is the output text the repair concerns (a dropped marker, text kept as content), so that what the
    parser did not place in a field is still accounted for.
    """

    kind: str
    position: int
    message: str
    raw: str = ""

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "position": self.position, "message": self.message, "raw": self.raw}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Diagnostic:
        return cls(str(d.get("kind", "")), int(d.get("position", 0)), str(d.get("message", "")),
                   str(d.get("raw", "") or ""))


@dataclass(frozen=True)
class ChatMessage:
    role: str = "assistant"
    content: str = ""
    reasoning_content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    """What was repaired to get this message out of a malformed output (empty for a well-formed one)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.role,
            "content": self.content,
            "reasoning_content": self.reasoning_content,
            "tool_calls": [tc.to_dict() for tc in self.tool_calls],
        }
        if self.diagnostics:
            out["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChatMessage:
        """From the `to_dict` shape (also the `expect` records of the conformance data); missing fields empty."""
        calls = d.get("tool_calls") or ()
        return cls(
            role=str(d.get("role", "assistant") or "assistant"),
            content=str(d.get("content", "") or ""),
            reasoning_content=str(d.get("reasoning_content", "") or ""),
            tool_calls=tuple(ToolCall.from_dict(c) for c in calls),
            diagnostics=tuple(Diagnostic.from_dict(x) for x in d.get("diagnostics") or ()),
        )

    def empty(self) -> bool:
        return not (self.content or self.reasoning_content or self.tool_calls)

    def to_openai(self) -> dict[str, Any]:
        """OpenAI chat message (`common_chat_msg::to_json_oaicompat` for a plain-text message)."""
        msg: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning_content:
            msg["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            calls: list[dict[str, Any]] = []
            for tc in self.tool_calls:
                call: dict[str, Any] = {"type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                if tc.id:
                    call["id"] = tc.id
                calls.append(call)
            msg["tool_calls"] = calls
        return msg


# ToolCall is frozen, so one shared empty instance is a safe default (and spares an object per delta: a stream
# creates one delta per token)
_NO_CALL = ToolCall()


@dataclass(frozen=True, init=False)
class MessageDelta:
    """One streaming diff record (`common_chat_msg_diff`).

    `tool_call_index` is None unless the record is about a tool call; then `tool_call_delta` carries the
    arguments suffix, plus name and id when they are new or changed.
    """

    reasoning_content_delta: str = ""
    content_delta: str = ""
    tool_call_index: int | None = None
    tool_call_delta: ToolCall = _NO_CALL

    def __init__(self, reasoning_content_delta: str = "", content_delta: str = "",
                 tool_call_index: int | None = None, tool_call_delta: ToolCall = _NO_CALL) -> None:
        # one per token of a stream: filled directly, as ToolCall's (see there)
        d = self.__dict__
        d["reasoning_content_delta"] = reasoning_content_delta
        d["content_delta"] = content_delta
        d["tool_call_index"] = tool_call_index
        d["tool_call_delta"] = tool_call_delta

    def to_openai(self) -> dict[str, Any]:
        """The `delta` object of an OpenAI chat-completion chunk, as llama.cpp's server writes it
        (`common_chat_msg_diff_to_json_oaicompat`): a call's first delta, the one that names it, carries its `id`,
        `"type": "function"` and `function.name`; the later ones its `index` and `function.arguments` only.

        The id is the call's: the output's, or the one the stream generated (`stream(gen_tool_call_id=...)`,
        as the server sets ids on the message). A call with neither gets one here (`gen_tool_call_id`), because
        OpenAI's clients take a call's first chunk to carry its id; it is then in the chunk only, not in the
        stream's message."""
        delta: dict[str, Any] = {}
        if self.reasoning_content_delta:
            delta["reasoning_content"] = self.reasoning_content_delta
        if self.content_delta:
            delta["content"] = self.content_delta
        if self.tool_call_index is not None:
            tc = self.tool_call_delta
            call: dict[str, Any] = {"index": self.tool_call_index}
            if tc.name or tc.id:  # (compute_deltas names a call in its first delta, and again where its id changes)
                call["id"] = tc.id or gen_tool_call_id()
                call["type"] = "function"
            call["function"] = {"name": tc.name, "arguments": tc.arguments} if tc.name else {"arguments": tc.arguments}
            delta["tool_calls"] = [call]
        return delta


_ID_CHARACTERS = string.digits + string.ascii_letters


def gen_tool_call_id() -> str:
    """A new tool-call id, as llama.cpp's server makes one (`gen_tool_call_id`: 32 random letters and digits);
    `ChatParams.stream(gen_tool_call_id=gen_tool_call_id)` gives the calls an output leaves without one these."""
    return "".join(secrets.choice(_ID_CHARACTERS) for _ in range(32))


@dataclass(frozen=True)
class ToolDef:
    """A function tool offered to the model: name, description and JSON-schema parameters (a JSON value)."""

    name: str
    description: str = ""
    parameters: Any = None

    def to_openai(self) -> dict[str, Any]:
        """`{"type": "function", "function": {name, description, parameters}}` (parameters kept as given)."""
        function: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.parameters is not None:
            function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    @classmethod
    def from_openai(cls, tool: Any) -> ToolDef:
        """Read one OpenAI tool entry; rejects entries that are not `{"type": "function", "function": {...}}`."""
        if not isinstance(tool, Mapping):
            raise AutoparserError(f"Expected a tool object, got {_short(tool)}")
        if "type" not in tool:
            raise AutoparserError(f"Missing tool type: {_short(tool)}")
        if tool["type"] != "function":
            raise AutoparserError(f"Unsupported tool type: {_short(tool)}")
        function = tool.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise AutoparserError(f"Missing tool function name: {_short(tool)}")
        parameters = function.get("parameters")
        if isinstance(parameters, str):
            # the C++ keeps parameters as text and parses it back; accept that shape too
            try:
                parameters = json.loads(parameters)
            except ValueError as e:
                raise AutoparserError(f"Tool {function['name']!r} has unparsable parameters: {e}") from None
        description = function.get("description", "")
        return cls(function["name"], description if isinstance(description, str) else "", parameters)

    def effective_parameters(self) -> Any:
        return tool_parameters({"parameters": self.parameters} if self.parameters is not None else {})


def _short(v: Any) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 200 else s[:200] + "…"


def parse_tools(tools: Any) -> tuple[ToolDef, ...]:
    """OpenAI `tools` list (or None) -> ToolDefs (`common_chat_tools_parse_oaicompat`)."""
    if tools is None:
        return ()
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise AutoparserError(f"Expected 'tools' to be an array, got {_short(tools)}")
    return tuple(t if isinstance(t, ToolDef) else ToolDef.from_openai(t) for t in tools)


def tools_to_openai(tools: Sequence[ToolDef | Mapping[str, Any]] | None) -> list[Any]:
    """Normalise a tools list to OpenAI JSON form (ToolDefs converted, dict entries kept as they are)."""
    if not tools:
        return []
    return [t.to_openai() if isinstance(t, ToolDef) else t for t in tools]


def tool_parameters(function: Mapping[str, Any]) -> Any:
    """The parameters schema of an OpenAI `function` object (`common_chat_tool_parameters`).

    Missing, null or `{}` parameters read as an empty object schema, so every tool gets an object grammar.
    """
    params = function.get("parameters") if isinstance(function, Mapping) else None
    if params is None or (isinstance(params, Mapping) and not params):
        return {"type": "object", "properties": {}}
    return params
