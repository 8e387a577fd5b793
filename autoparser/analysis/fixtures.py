"""Needles, tool definitions and messages the analyzer renders (C++ chat-diff-analyzer.cpp statics).

Needles are distinctive strings so that finding them in a render is unambiguous; every fixture is built
fresh by a function so no caller can mutate a shared structure.
"""

from __future__ import annotations

from typing import Any

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
VALUE_FIRST = "XXXX"
VALUE_SECOND = "YYYY"
USER_MSG = "U_USER_MSG Hello END_U"
USER_MSG_TWO = "V_USER_MSG Hello END_V"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING_CONTENT = "REASON_PART I am thinking END_R"
CALL_ID_001 = "call00001"
CALL_ID_002 = "call00002"
CALL_ID_999 = "call99999"

Message = dict[str, Any]


def params_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            ARG_FIRST: {"type": "string", "description": "First argument"},
            ARG_SECOND: {"type": "string", "description": "Second argument"},
        },
        "required": [],
    }


def tools() -> list[dict[str, Any]]:
    return [
        {"type": "function",
         "function": {"name": FUN_FIRST, "description": "Test function foo", "parameters": params_schema()}},
        {"type": "function",
         "function": {"name": FUN_SECOND, "description": "Test function bar", "parameters": params_schema()}},
    ]


def tool_call(name: str, args: dict[str, Any], call_id: str = CALL_ID_001) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def first_tool_call() -> dict[str, Any]:
    return tool_call(FUN_FIRST, {ARG_FIRST: VALUE_FIRST, ARG_SECOND: VALUE_SECOND})


def second_tool_call() -> dict[str, Any]:
    return tool_call(FUN_SECOND, {ARG_FIRST: VALUE_FIRST, ARG_SECOND: VALUE_SECOND}, CALL_ID_002)


def first_tool_call_alt_id() -> dict[str, Any]:
    return tool_call(FUN_FIRST, {ARG_FIRST: VALUE_FIRST, ARG_SECOND: VALUE_SECOND}, CALL_ID_999)


def first_tool_call_one_arg() -> dict[str, Any]:
    return tool_call(FUN_FIRST, {ARG_FIRST: VALUE_FIRST})


def first_tool_call_one_arg_other_val() -> dict[str, Any]:
    return tool_call(FUN_FIRST, {ARG_FIRST: VALUE_SECOND})


def first_tool_call_other_arg() -> dict[str, Any]:
    return tool_call(FUN_FIRST, {ARG_SECOND: VALUE_SECOND})


def user_msg() -> Message:
    return {"role": "user", "content": USER_MSG}


def assistant(content: Any = ASSISTANT_MSG, *, reasoning: str | None = None,
              tool_calls: list[dict[str, Any]] | None = None) -> Message:
    msg: Message = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return msg


def assistant_calls(*calls: dict[str, Any]) -> Message:
    return assistant("", tool_calls=list(calls))
