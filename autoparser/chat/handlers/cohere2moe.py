"""Cohere2 MoE / North Code (`common_chat_params_init_cohere2moe`, parsers/cohere2moe.cpp).

The assistant turn is wrapped in markers throughout:

    <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>reasoning<|END_THINKING|>
    then <|START_TEXT|>content<|END_TEXT|>
    or   <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
    <|END_OF_TURN_TOKEN|>

Content and tool calls exclude each other. The generation prompt already opens the thinking block, so the
parser's literal covers only the turn prefix and the reasoning rule consumes the thinking markers itself,
wherever they came from.
"""

from __future__ import annotations

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
from autoparser.chat.handlers._support import cpp_sum, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

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


def detect(source: str) -> bool:
    # <|START_TEXT|> sets it apart from the older Command-R templates (<|START_RESPONSE|>)
    return "<|START_TEXT|>" in source and "<|START_ACTION|>" in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = GEN_PREFIX + THINK_START + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += THINK_END + TEXT_START + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, response_format, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not response_format and inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, ACTION_START),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=(TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START, TEXT_END,
                          ACTION_START, ACTION_END, RESULT_START, RESULT_END),
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,),
        # Tool results render as the system token + <|START_TOOL_RESULT|>: the longer delimiter must come first.
        message_delimiters=(("assistant", GEN_PREFIX), ("user", TURN_START + USER),
                            ("tool", TURN_START + SYSTEM + RESULT_START), ("system", TURN_START + SYSTEM)))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool,
           extract_reasoning: bool) -> P:
    # Operands of `+` chains are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids
    # in the grammar match.
    gen_prefix = p.literal(GEN_PREFIX)
    end = p.end()
    reasoning = p.eps()
    # Without extraction the whole thinking block, markers included, stays in the content.
    if extract_reasoning:
        reasoning = p.optional(cpp_sum(
            lambda: p.literal(THINK_START),
            lambda: p.reasoning(p.until_one_of([THINK_END, TEXT_START, ACTION_START])),
            lambda: p.optional(p.literal(THINK_END))))
    else:
        reasoning = p.optional(p.content(cpp_sum(
            lambda: p.literal(THINK_START), lambda: p.until_one_of([THINK_END, TEXT_START, ACTION_START]),
            lambda: p.optional(p.literal(THINK_END)))))

    if response_format:
        text_content = cpp_sum(
            lambda: p.literal(TEXT_START),
            lambda: p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema)),
            lambda: p.optional(p.literal(TEXT_END)))
    else:
        text_content = cpp_sum(lambda: p.literal(TEXT_START), lambda: p.content(p.until(TEXT_END)),
                               lambda: p.optional(p.literal(TEXT_END)))

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        turn_end = p.optional(p.literal(TURN_END))
        return gen_prefix + reasoning + text_content + turn_end + end

    tool_calls = p.standard_json_tools(ACTION_START, ACTION_END, inputs.tools, inputs.parallel_tool_calls,
                                       force_tool_calls=True, name_key="tool_name", args_key="parameters",
                                       array_wrapped=True, function_is_key=False, call_id_key="",
                                       gen_call_id_key="tool_call_id",
                                       parameters_order=("tool_call_id", "tool_name", "parameters"))
    body = tool_calls if inputs.tool_choice == ToolChoice.REQUIRED else p.choice([tool_calls, text_content])
    turn_end = p.optional(p.literal(TURN_END))
    return gen_prefix + reasoning + body + turn_end + end


HANDLER = Handler("cohere2moe", detect, generate)
