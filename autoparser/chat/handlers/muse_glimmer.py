"""Muse Glimmer (`common_chat_params_init_muse_glimmer`, parsers/muse-glimmer.cpp).

An assistant turn is one or more messages `<|start|>assistant to=RECIPIENT<|message|>BODY END`, END being
`<|eom|>` (more follows) or `<|eot|>` (turn over): chain of thought goes `to=self`, the answer `to=user`, and a
tool call `to=TOOL` with an ATEM XML body:

    <atem:function_calls><atem:invoke name="NAME"><atem:parameter name="ARG">value</atem:parameter>...
    </atem:invoke></atem:function_calls>

The generation prompt is just `<|start|>assistant`; the model writes its own recipient.
"""

from __future__ import annotations

from typing import Any

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.generator import ChatParams, GenerationInputs, GrammarTrigger, TriggerType, render_prompt
from autoparser.chat.handlers import Handler
from autoparser.chat.handlers._params import Parameter, parameters
from autoparser.chat.handlers._support import (
    cpp_sum,
    function_defs,
    has_continuation,
    has_response_format,
    has_tools,
    to_grammar,
)
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

PARAM_END = "</atem:parameter>"

# A message to any recipient but self or user is a tool call.
TRIGGER = GrammarTrigger(
    TriggerType.PATTERN,
    r"(?:^|<\|start\|>assistant)( to=(?!self<\|message\|>)(?!user<\|message\|>)[^<]*?<\|message\|>)")


def detect(source: str) -> bool:
    return "<atem:function_calls>" in source and "<|eom|>" in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = "<|start|>assistant"
    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = "<|start|>assistant to=self<|message|>" + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += "<|eom|><|start|>assistant to=user<|message|>" + render_content(msg)
        prompt += gp

    extract_reasoning = inputs.reasoning_format != "none"
    tools = has_tools(inputs)
    response_format = has_response_format(inputs)
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, response_format, extract_reasoning, include_grammar))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not (response_format or (tools and inputs.tool_choice == ToolChoice.REQUIRED))
        grammar = to_grammar(arena, lazy)
        triggers = (TRIGGER,)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=("<|start|>", "<|message|>", "<|eom|>", "<|eot|>",
                          # the ATEM markup of tool-call messages
                          "<atem:function_calls>", "<atem:invoke", "<atem:parameter", PARAM_END,
                          "</atem:invoke>", "</atem:function_calls>"),
        supports_thinking=True,
        message_delimiters=(("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                            ("system", "<|start|>system"), ("tool", "<|start|>tool")))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool, extract_reasoning: bool,
           include_grammar: bool) -> P:
    start = p.rule("start", p.literal("<|start|>assistant"))
    if not extract_reasoning and not include_grammar:
        return start + p.content(p.rest())

    if extract_reasoning:
        p.rule("analysis", p.literal(" to=self<|message|>") + p.reasoning(p.until("<|eom|>")) + p.literal("<|eom|>"))
    else:
        p.rule("analysis", p.literal(" to=self<|message|>") + p.content(p.until("<|eom|>")) + p.literal("<|eom|>"))
    analysis = p.ref("analysis")

    recipient = p.optional(p.literal(" to=user"))
    final_msg = p.rule("final", cpp_sum(lambda: recipient, lambda: p.literal("<|message|>"),
                                        lambda: p.content(p.until_one_of(["<|eot|>", "<|eom|>"]))))

    if response_format:
        response_json = p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
        rf = p.rule("response-format", recipient + p.literal("<|message|>")
                    + ((p.literal("```json") + p.space() + response_json + p.space() + p.literal("```"))
                       | response_json))
        return p.zero_or_more(start + analysis) + start + rf

    if tools and inputs.tool_choice != ToolChoice.NONE:
        # Operands are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids match.
        string_value = p.ac(cpp_sum(lambda: p.tool_arg_string_value(p.until(PARAM_END)),
                                    lambda: p.tool_arg_close(p.literal(PARAM_END))), PARAM_END)
        tool_choice = p.choice()
        for function in function_defs(inputs.tools):
            name = str(function.get("name", ""))
            schema, props = parameters(function)
            arg_rules = [_arg(p, name, schema, param, string_value) for param in props]
            args = p.eps()
            if arg_rules:
                space = p.space()
                args = p.zero_or_more(p.choice(arg_rules) + space)
            tool_parser = _tool(p, name, args)
            tool_choice |= p.rule(f"tool-{name}", tool_parser)

        if inputs.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", tool_choice
                                        + p.zero_or_more(p.literal("<|eom|>") + start + tool_choice))
        else:
            tool_calls = p.trigger_rule("tool-call", tool_choice)

        if inputs.tool_choice == ToolChoice.REQUIRED:
            return p.zero_or_more(start + analysis) + start + tool_calls
        trailing_calls = p.optional(p.literal("<|eom|>") + start + tool_calls)
        return p.zero_or_more(start + analysis) + start + (tool_calls | (final_msg + trailing_calls))

    return p.zero_or_more(start + analysis) + start + final_msg


def _arg(p: ChatBuilder, name: str, schema: Any, param: Parameter, string_value: P) -> P:
    """`<atem:parameter name="ARG">value</atem:parameter>`: raw text when the schema allows a string, else JSON."""
    value_parser = p.eps()  # default-initialised in the C++ (it takes an id)
    if param.may_be_string:
        value_parser = string_value
    else:
        value_parser = cpp_sum(lambda: p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{param.name}-schema",
                                                                      schema, pointer=param.pointer)),
                               lambda: p.tool_arg_close(p.literal(PARAM_END)))
    opener = p.tool_arg_open(cpp_sum(lambda: p.literal('<atem:parameter name="'),
                                     lambda: p.tool_arg_name(p.literal(param.name)), lambda: p.literal('">')))
    return p.tool_arg(opener + value_parser)


def _tool(p: ChatBuilder, name: str, args: P) -> P:
    """` to=RECIPIENT<|message|><atem:function_calls><atem:invoke name="NAME">ARGS</atem:invoke>...`."""
    tool_open = p.tool_open(cpp_sum(
        lambda: p.literal(" to="), lambda: p.until("<|message|>"), lambda: p.literal("<|message|><atem:function_calls>"),
        p.space, lambda: p.literal('<atem:invoke name="'), lambda: p.tool_name(p.literal(name)), lambda: p.literal('">'),
        p.space))
    return p.tool(tool_open << p.tool_args(args) << p.tool_close(cpp_sum(
        lambda: p.literal("</atem:invoke>"), p.space, lambda: p.literal("</atem:function_calls>"))))


HANDLER = Handler("muse_glimmer", detect, generate)
