"""MiniCPM5 (`common_chat_params_init_minicpm5`, parsers/minicpm5.cpp).

`<think>...</think>` reasoning, then content, then XML calls
`<function name="NAME"><param name="ARG">value</param>...</function>`. A string value may be wrapped in
CDATA so that it can contain `</param>`; only the text inside the CDATA markers is the value.
"""

from __future__ import annotations

from typing import Any

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
from autoparser.chat.handlers._params import Parameter, parameters
from autoparser.chat.handlers._support import cpp_sum, function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

ASSISTANT_START = "<|im_start|>assistant\n"


def detect(source: str) -> bool:
    return "Tool usage guidelines:" in source and '<function name="' in source and '<param name="' in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = ASSISTANT_START + "<think>\n" + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += "\n</think>\n\n" + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, response_format, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not (response_format or (tools and inputs.tool_choice == ToolChoice.REQUIRED))
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, "<function"),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=("<function", "<param", "</function>", "</param>", "<think>", "</think>"),
        supports_thinking=True, thinking_start_tag="<think>", thinking_end_tags=("</think>",),
        # a tool response is a user turn starting with <tool_response>: its delimiter must come first
        message_delimiters=(("assistant", "<|im_start|>assistant"), ("tool", "<|im_start|>user\n<tool_response>"),
                            ("user", "<|im_start|>user"), ("system", "<|im_start|>system")))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, response_format: bool,
           extract_reasoning: bool) -> P:
    # Operands of `+` chains are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids
    # in the grammar match.
    gen_prompt = p.literal(ASSISTANT_START)
    reasoning = p.eps()
    if extract_reasoning:
        reasoning = cpp_sum(lambda: ("<think>" << p.reasoning(p.until("</think>"))) << "</think>", p.space)

    if response_format:
        return gen_prompt + reasoning + p.content(p.schema(p.json(), "response-format", inputs.json_schema))

    if tools and inputs.tool_choice != ToolChoice.NONE:
        # CDATA lets a value contain "</param>"; only the text between the CDATA markers is the value.
        cdata = cpp_sum(lambda: p.literal("<![CDATA["),
                        lambda: p.ac(cpp_sum(lambda: p.tool_arg_string_value(p.until("]]>")),
                                             lambda: p.literal("]]>")), "]]>"),
                        lambda: p.tool_arg_close(p.literal("</param>")))
        plain = cpp_sum(lambda: p.negate(p.literal("<![CDATA[")),
                        lambda: p.ac(cpp_sum(lambda: p.tool_arg_string_value(p.until("</param>")),
                                             lambda: p.tool_arg_close(p.literal("</param>"))), "</param>"))
        string_value = p.choice([cdata, plain])
        tool_choice = p.choice()
        for function in function_defs(inputs.tools):
            name = str(function.get("name", ""))
            schema, props = parameters(function)
            arg_rules = [_arg(p, name, schema, param, string_value) for param in props]
            args = p.eps()
            if arg_rules:
                space = p.space()
                args = p.zero_or_more(p.choice(arg_rules) + space)
            tool_open = p.tool_open(cpp_sum(lambda: p.literal('<function name="'),
                                            lambda: p.tool_name(p.literal(name)),  # noqa: B023 (called at once)
                                            lambda: p.literal('">')))
            tool_parser = p.tool(tool_open << p.tool_args(args) << p.tool_close(p.literal("</function>")))
            tool_choice |= p.rule(f"tool-{name}", tool_parser)

        max_calls = -1 if inputs.parallel_tool_calls else 1
        space = p.space()
        tool_calls = p.trigger_rule("tool-call", p.repeat(tool_choice + space, 1, max_calls))
        content = p.content(p.until("<function"))
        end = p.end()
        return gen_prompt + reasoning + content + tool_calls + end

    end = p.end()
    return gen_prompt + reasoning + p.content(p.rest()) + end


def _arg(p: ChatBuilder, name: str, schema: Any, param: Parameter, string_value: P) -> P:
    """`<param name="ARG">value</param>`: raw text (or CDATA) when the schema allows a string, else JSON."""
    value_parser = p.eps()  # default-initialised in the C++ (it takes an id)
    if param.may_be_string:
        value_parser = string_value
    else:
        value_parser = cpp_sum(lambda: p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{param.name}-schema",
                                                                      schema, pointer=param.pointer)),
                               lambda: p.tool_arg_close(p.literal("</param>")))
    opener = p.tool_arg_open(cpp_sum(lambda: p.literal('<param name="'), lambda: p.tool_arg_name(p.literal(param.name)),
                                     lambda: p.literal('">')))
    return p.tool_arg(opener + value_parser)


HANDLER = Handler("minicpm5", detect, generate)
