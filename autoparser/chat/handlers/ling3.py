"""Ling 3.0 / Bailing V3 (parsers/ling3.cpp).

Turns are `<role>X</role>` sections; calls are GLM-like,
`<tool_call>NAME<arg_key>k</arg_key>\\n<arg_value>v</arg_value>...</tool_call>`. With thinking on, the generation
prompt already opens `<think>`, so the model never writes it and may start a call before `</think>`: reasoning
then ends at `</think>` or `<tool_call>`. With thinking off the template closes the block itself and all output
is content. The model sometimes spells `<|role_end|>` out as text, hence the extra stop string.
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
from autoparser.chat.handlers._params import TYPE_STRING, parameters
from autoparser.chat.handlers._support import function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

ROLE = "<role>ASSISTANT</role>"
THINK_START = "<think>"
THINK_END = "</think>"
CALL_START = "<tool_call>"
CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VAL = "<arg_value>"
ROLE_END = "<|role_end|>"
ARG_VAL_END = "</arg_value>"


def detect(source: str) -> bool:
    # `<role>` sections set this family apart from the other `<arg_key>` templates (GLM)
    return ROLE in source and ARG_KEY in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = ROLE + "\n" + THINK_START + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += THINK_END + render_content(msg)
        prompt += gp

    # is a think block left open for the model (by the generation prompt or the continued message)?
    if has_continuation(inputs):
        think_open = inputs.continuation != Continuation.CONTENT
    else:
        last_open = gp.rfind(THINK_START)
        last_close = gp.rfind(THINK_END)
        think_open = last_open >= 0 and (last_close < 0 or last_open > last_close)

    tools = has_tools(inputs)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = tools and inputs.tool_choice != ToolChoice.NONE

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools, extract_reasoning, think_open))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = inputs.tool_choice != ToolChoice.REQUIRED
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, CALL_START),)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=(THINK_START, THINK_END, CALL_START, CALL_END, ARG_KEY, ARG_KEY_END, ARG_VAL, ARG_VAL_END,
                          ROLE_END),
        additional_stops=(ROLE_END,), supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END, CALL_START),
        message_delimiters=(("assistant", ROLE), ("user", "<role>HUMAN</role>"),
                            ("tool", "<role>OBSERVATION</role>"), ("system", "<role>SYSTEM</role>")))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool, extract_reasoning: bool, think_open: bool) -> P:
    end = p.end()
    # the parse input starts with the generation prompt, whose assistant opener is consumed here
    opener = p.optional(p.literal(ROLE) + p.optional(p.space()))

    body_end = p.until_one_of([THINK_END, CALL_START]) if think_open else p.until_one_of([THINK_END])
    think_body = p.reasoning(body_end) if extract_reasoning else p.content(body_end)
    reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END)))

    content = p.optional(p.content(p.until_one_of([CALL_START])))
    # a trailing end-of-turn token is eaten rather than left in the content
    tail = p.optional(p.content(p.until(ROLE_END))) + p.optional(p.literal(ROLE_END))

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        return opener + reasoning + tail + end

    tool_choices = p.choice()
    arg_close = p.tool_arg_close(p.literal(ARG_VAL_END))
    arg_string = p.rule("ling3-arg-string", p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close)

    for function in function_defs(inputs.tools):
        name = str(function.get("name", ""))
        params, props = parameters(function)
        required_args: list[P] = []
        optional_args: list[P] = []
        for param in props:
            rule_name = f"ling3-arg-{name}-{param.name}"
            types = param.types
            # each alternative takes the closing tag too, so a JSON prefix cannot decide the choice early
            if TYPE_STRING not in types:
                arg_value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", params,
                                                           pointer=param.pointer)) + arg_close
            elif types == {TYPE_STRING}:
                arg_value = arg_string
            else:
                # JSON first, so the value comes out typed; the grammar only keeps the raw string
                arg_value = p.gbnf(p.atomic(p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", params,
                                                                           pointer=param.pointer)) + arg_close)
                                   | arg_string, "ling3-arg-string")
            # the model puts newlines between arguments, the template's history does not
            arg = p.rule(rule_name, p.optional(p.space())
                         + p.tool_arg(p.tool_arg_open(p.literal(ARG_KEY) + p.tool_arg_name(p.literal(param.name))
                                                      + p.literal(ARG_KEY_END))
                                      + p.optional(p.space()) + p.literal(ARG_VAL) + arg_value))
            (required_args if param.required else optional_args).append(arg)

        args = p.permute(f"ling3-{name}-args", required_args)
        if optional_args:
            args = args + p.zero_or_more(p.choice(optional_args))
        call = p.tool(p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(name)) + p.optional(p.space()))
                      + p.tool_args(args) + p.tool_close(p.optional(p.space()) + p.literal(CALL_END)))
        tool_choices |= p.rule(f"ling3-tool-{name}", call)

    calls = tool_choices + p.zero_or_more(p.space() + tool_choices) if inputs.parallel_tool_calls else tool_choices
    tools_section = p.trigger_rule("ling3-tool-call", calls + p.space() + p.optional(p.content(p.until(ROLE_END)))
                                   + p.optional(p.literal(ROLE_END)))
    tool_calls = tools_section if inputs.tool_choice == ToolChoice.REQUIRED else p.optional(tools_section)
    return opener + reasoning + content + tool_calls + tail + end


HANDLER = Handler("ling3", detect, generate)
