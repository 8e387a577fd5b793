"""The chat tags: what a span of model output *means* (reasoning, content, a tool name, an argument value).

The mapper (chat/mapper.py) turns a tagged AST into a `ChatMessage`. Tags that delimit structure the mapper
must never see half-parsed (tool open/close, tool names and ids, argument names) are wrapped in `atomic`, so a
streamed prefix such as `<function=special_fun` never yields a tool call named `special_fun`. The names are
llama.cpp's (`common_chat_peg_builder`).
"""

from __future__ import annotations

from autoparser.peg import Builder, P

__all__ = [
    "CONTENT",
    "FIELD_TAGS",
    "NAME_TAGS",
    "REASONING",
    "REASONING_BLOCK",
    "SCAN_TO_CALLS",
    "TOOL",
    "TOOL_ARG",
    "TOOL_ARGS",
    "TOOL_ARGS_STRING",
    "TOOL_ARG_CLOSE",
    "TOOL_ARG_NAME",
    "TOOL_ARG_OPEN",
    "TOOL_ARG_STRING_VALUE",
    "TOOL_ARG_VALUE",
    "TOOL_CLOSE",
    "TOOL_ID",
    "TOOL_NAME",
    "TOOL_NAME_ESCAPED",
    "TOOL_NAME_STRING",
    "TOOL_OPEN",
    "VALUE_KEY",
    "VALUE_STRING",
    "VALUE_TOKEN",
    "ChatTags",
]


REASONING_BLOCK = "reasoning-block"
REASONING = "reasoning"
CONTENT = "content"
TOOL = "tool"
TOOL_OPEN = "tool-open"
TOOL_CLOSE = "tool-close"
TOOL_ID = "tool-id"
TOOL_NAME = "tool-name"
TOOL_NAME_STRING = "tool-name-string"  # a call's name written as a JSON string's body: the name it decodes to
TOOL_NAME_ESCAPED = "tool-name-escaped"  # a call's name as an attribute escapes it (`echo&amp;log`): the name
# it unescapes to
NAME_TAGS = frozenset({TOOL_NAME, TOOL_NAME_STRING, TOOL_NAME_ESCAPED})  # a call's name, in each spelling
TOOL_ARGS = "tool-args"
TOOL_ARG = "tool-arg"
TOOL_ARG_OPEN = "tool-arg-open"
TOOL_ARG_CLOSE = "tool-arg-close"
TOOL_ARG_NAME = "tool-arg-name"
TOOL_ARG_VALUE = "tool-arg-value"
TOOL_ARG_STRING_VALUE = "tool-arg-string-value"  # schema says "string": the value is text, never JSON
TOOL_ARGS_STRING = "tool-args-string"  # a call's arguments written as a JSON string: the string's body
# A value written in a format's own syntax (`{name:<escape>x<escape>,n:3}`), piece by piece: each piece the JSON
# text it stands for. (The relaxed parser reads such values; llama.cpp's reads JSON.)
VALUE_TOKEN = "value-token"  # JSON text as written: a number, true/false/null, a bracket, a comma, a colon
VALUE_STRING = "value-string"  # the body of a string between the format's own quotes
VALUE_KEY = "value-key"  # an object's key written without quotes

# The rule llama.cpp's parsers step over text with, to the first call (Gemma 4's, where the reasoning before the
# call is never closed): its text reaches no field, so the default parse does not let it stand.
SCAN_TO_CALLS = "scan-to-toolcall"

# The tags whose text goes into a message field: content, reasoning, a call's name, id or arguments.
FIELD_TAGS = frozenset({CONTENT, REASONING, *NAME_TAGS, TOOL_ID, TOOL_ARGS, TOOL_ARG_NAME, TOOL_ARG_VALUE,
                        TOOL_ARG_STRING_VALUE, VALUE_TOKEN, VALUE_STRING, VALUE_KEY})




class ChatTags(Builder):
    """`Builder` plus one method per chat tag."""

    REASONING_BLOCK = REASONING_BLOCK
    REASONING = REASONING
    CONTENT = CONTENT
    TOOL = TOOL
    TOOL_OPEN = TOOL_OPEN
    TOOL_CLOSE = TOOL_CLOSE
    TOOL_ID = TOOL_ID
    TOOL_NAME = TOOL_NAME
    TOOL_NAME_STRING = TOOL_NAME_STRING
    TOOL_NAME_ESCAPED = TOOL_NAME_ESCAPED
    TOOL_ARGS = TOOL_ARGS
    TOOL_ARG = TOOL_ARG
    TOOL_ARG_OPEN = TOOL_ARG_OPEN
    TOOL_ARG_CLOSE = TOOL_ARG_CLOSE
    TOOL_ARG_NAME = TOOL_ARG_NAME
    TOOL_ARG_VALUE = TOOL_ARG_VALUE
    TOOL_ARG_STRING_VALUE = TOOL_ARG_STRING_VALUE
    TOOL_ARGS_STRING = TOOL_ARGS_STRING

    # --- tags (plain) ------------------------------------------------------------------------------------

    def reasoning_block(self, p: P | str) -> P:
        """`reasoning-block:(p)`: a whole reasoning block, markers included."""
        return self.tag(REASONING_BLOCK, p)

    def reasoning(self, p: P | str) -> P:
        """`reasoning:(p)`: the model's reasoning text."""
        return self.tag(REASONING, p)

    def content(self, p: P | str) -> P:
        """`content:(p)`: the reply's content."""
        return self.tag(CONTENT, p)

    def tool(self, p: P | str) -> P:
        """`tool:(p)`: one tool call."""
        return self.tag(TOOL, p)

    def tool_args(self, p: P | str) -> P:
        """`tool-args:(p)`: a call's arguments as one JSON object."""
        return self.tag(TOOL_ARGS, p)

    def tool_arg(self, p: P | str) -> P:
        """`tool-arg:(p)`: one argument of a call."""
        return self.tag(TOOL_ARG, p)

    def tool_arg_value(self, p: P | str) -> P:
        """`tool-arg-value:(p)`: an argument's value, as JSON."""
        return self.tag(TOOL_ARG_VALUE, p)

    def tool_arg_json_value(self, p: P | str) -> P:
        """`tool-arg-value:(p)`: an argument's value, as JSON."""
        return self.tag(TOOL_ARG_VALUE, p)

    def tool_arg_string_value(self, p: P | str) -> P:
        """`tool-arg-string-value:(p)`: an argument's value as raw text (the mapper quotes and escapes it)."""
        return self.tag(TOOL_ARG_STRING_VALUE, p)

    # --- tags wrapped in atomic: never reported half-parsed ----------------------------------------------

    def tool_open(self, p: P | str) -> P:
        """`atomic(tool-open:(p))`: what opens a call (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_OPEN, p))

    def tool_close(self, p: P | str) -> P:
        """`atomic(tool-close:(p))`: what closes a call (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_CLOSE, p))

    def tool_id(self, p: P | str) -> P:
        """`atomic(tool-id:(p))`: a call's id (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_ID, p))

    def tool_name(self, p: P | str) -> P:
        """`atomic(tool-name:(p))`: a call's function name (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_NAME, p))

    def tool_arg_open(self, p: P | str) -> P:
        """`atomic(tool-arg-open:(p))`: what opens an argument (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_ARG_OPEN, p))

    def tool_arg_close(self, p: P | str) -> P:
        """`atomic(tool-arg-close:(p))`: what closes an argument (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_ARG_CLOSE, p))

    def tool_arg_name(self, p: P | str) -> P:
        """`atomic(tool-arg-name:(p))`: an argument's name (never reported half-parsed)."""
        return self.atomic(self.tag(TOOL_ARG_NAME, p))

