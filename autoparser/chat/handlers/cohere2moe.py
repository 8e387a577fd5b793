"""Cohere2 MoE / North Code (`common_chat_params_init_cohere2moe`, parsers/cohere2moe.cpp).

The assistant turn is wrapped in markers throughout:

    <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>reasoning<|END_THINKING|>
    then <|START_TEXT|>content<|END_TEXT|>
    or   <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
    <|END_OF_TURN_TOKEN|>

Content and tool calls exclude each other. The generation prompt already opens the thinking block, so the
parser's literal covers only the turn prefix and the reasoning rule consumes the thinking markers itself,
wherever they came from. Why a handler: every part of the turn is wrapped, and the analyzer describes at most
one wrapper around the content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from autoparser.chat.constraint import (
    Alt,
    CallTags,
    Json,
    Lit,
    Many,
    Opt,
    Pattern,
    Piece,
    Seq,
    Space,
    Tag,
    arguments_schema,
    json_member,
)
from autoparser.chat.spec import Build, FormatSpec, Prefill, call_transform, response_fields, word
from autoparser.chat.tools import Function
from autoparser.peg.builder import P

TURN_START = "<|START_OF_TURN_TOKEN|>"
TURN_END = "<|END_OF_TURN_TOKEN|>"
CHATBOT = "<|CHATBOT_TOKEN|>"
USER = "<|USER_TOKEN|>"
SYSTEM = "<|SYSTEM_TOKEN|>"
THINK_START = "<|START_THINKING|>"
THINK_END = "<|END_THINKING|>"
TEXT_START = "<|START_TEXT|>"
TEXT_END = "<|END_TEXT|>"
ACTION_START = "<|START_ACTION|>"
ACTION_END = "<|END_ACTION|>"
RESULT_START = "<|START_TOOL_RESULT|>"
RESULT_END = "<|END_TOOL_RESULT|>"

# the part of the generation prompt before the forced <|START_THINKING|>
GEN_PREFIX = TURN_START + CHATBOT


def detect(source: str) -> FormatSpec | None:
    # <|START_TEXT|> sets it apart from the older Command-R templates (<|START_RESPONSE|>)
    return SPEC if "<|START_TEXT|>" in source and "<|START_ACTION|>" in source else None


def _build(b: Build) -> P:
    p = b.p
    # Operands of `+` chains are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids
    # in the grammar match.
    gen_prefix = p.literal(GEN_PREFIX)
    end = p.end()
    reasoning = p.eps()
    # Without extraction the whole thinking block, markers included, stays in the content.
    if b.extract_reasoning:
        reasoning = p.optional(p.cpp_sum(
            lambda: p.literal(THINK_START),
            lambda: p.reasoning(p.until_one_of([THINK_END, TEXT_START, ACTION_START])),
            lambda: p.optional(p.literal(THINK_END))))
    else:
        reasoning = p.optional(p.content(p.cpp_sum(
            lambda: p.literal(THINK_START), lambda: p.until_one_of([THINK_END, TEXT_START, ACTION_START]),
            lambda: p.optional(p.literal(THINK_END)))))

    if b.response_format:
        text_content = p.cpp_sum(
            lambda: p.literal(TEXT_START),
            lambda: p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema)),
            lambda: p.optional(p.literal(TEXT_END)))
    else:
        text_content = p.cpp_sum(lambda: p.literal(TEXT_START), lambda: p.content(p.until(TEXT_END)),
                               lambda: p.optional(p.literal(TEXT_END)))

    if not b.tool_calls:
        turn_end = p.optional(p.literal(TURN_END))
        return gen_prefix + reasoning + text_content + turn_end + end

    tool_calls = p.standard_json_tools(ACTION_START, ACTION_END, b.inputs.tools, b.parallel,
                                       force_tool_calls=True, name_key="tool_name", args_key="parameters",
                                       array_wrapped=True, function_is_key=False, call_id_key="",
                                       gen_call_id_key="tool_call_id",
                                       parameters_order=("tool_call_id", "tool_name", "parameters"))
    body = tool_calls if b.required else p.choice([tool_calls, text_content])
    turn_end = p.optional(p.literal(TURN_END))
    return gen_prefix + reasoning + body + turn_end + end


# For transformers' parser: the action is a JSON list of `{"tool_call_id", "tool_name", "parameters"}`; the
# reply's text sits between its own markers.
_CALLS = {"open": ACTION_START, "close": ACTION_END, "content": "json", "transform_each": True,
          "transform": call_transform("{tool_name}", "{parameters}")}


def _call_tags(fns: Sequence[Function], parallel: bool) -> CallTags:
    """For the structural tag and Lark exports: the action, a JSON list of `{"tool_call_id": "N", "tool_name":
    "NAME", "parameters": {...}}` objects between `<|START_ACTION|>` and `<|END_ACTION|>`, the members in the
    template's order (the parser's too), the id a string of digits as the template numbers the calls, the
    parameters under the tool's schema; JSON's whitespace free."""

    def call(f: Function) -> Piece:
        return Seq((Lit("{"), Space(), *json_member("tool_call_id", Pattern(r'"[0-9]+"')), Space(), Lit(","), Space(),
                    *json_member("tool_name", Lit(json.dumps(f.name, ensure_ascii=False))), Space(), Lit(","), Space(),
                    *json_member("parameters", Json(arguments_schema(f))), Space(), Lit("}")))

    one = Alt(tuple(call(f) for f in fns))
    more = Opt(Many(Seq((Space(), Lit(","), Space(), one)))) if parallel else Seq(())
    action = Tag(ACTION_START, Seq((Space(), Lit("["), Space(), one, more, Space(), Lit("]"), Space())), ACTION_END)
    return CallTags(ACTION_START, (action,), (ACTION_END,))


SPEC = FormatSpec(
    "cohere2moe", _build, Prefill(GEN_PREFIX, THINK_START, THINK_END + TEXT_START), triggers=(word(ACTION_START),),
    relaxes=True, response_fields=response_fields(_CALLS, thinking=(THINK_START, THINK_END),
                                                      content={"open": TEXT_START, "close": TEXT_END}),
    preserved_tokens=(TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START, TEXT_END,
                      ACTION_START, ACTION_END, RESULT_START, RESULT_END),
    supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,), call_tags=_call_tags,
    # Tool results render as the system token + <|START_TOOL_RESULT|>: the longer delimiter must come first.
    message_delimiters=(("assistant", GEN_PREFIX), ("user", TURN_START + USER),
                        ("tool", TURN_START + SYSTEM + RESULT_START), ("system", TURN_START + SYSTEM)))
