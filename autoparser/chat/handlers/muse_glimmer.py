"""Muse Glimmer (`common_chat_params_init_muse_glimmer`, parsers/muse-glimmer.cpp).

An assistant turn is one or more messages `<|start|>assistant to=RECIPIENT<|message|>BODY END`, END being
`<|eom|>` (more follows) or `<|eot|>` (turn over): chain of thought goes `to=self`, the answer `to=user`, and a
tool call `to=TOOL` with an ATEM XML body:

    <atem:function_calls><atem:invoke name="NAME"><atem:parameter name="ARG">value</atem:parameter>...
    </atem:invoke></atem:function_calls>

The generation prompt is just `<|start|>assistant`; the model writes its own recipient.
"""

from __future__ import annotations

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.generator import ChatParams, GenerationInputs, GrammarTrigger, TriggerType, render_prompt
from autoparser.chat.handlers import Handler
from autoparser.chat.handlers._support import function_defs, has_continuation, has_response_format, has_tools, \
    parameters, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat, tool_parameters

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
    final_msg = p.rule("final", recipient + p.literal("<|message|>")
                       + p.content(p.until_one_of(["<|eot|>", "<|eom|>"])))

    if response_format:
        response_json = p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
        rf = p.rule("response-format", recipient + p.literal("<|message|>")
                    + ((p.literal("```json") + p.space() + response_json + p.space() + p.literal("```"))
                       | response_json))
        return p.zero_or_more(start + analysis) + start + rf

    if tools and inputs.tool_choice != ToolChoice.NONE:
        string_value = p.ac(p.tool_arg_string_value(p.until(PARAM_END)) + p.tool_arg_close(p.literal(PARAM_END)),
                            PARAM_END)
        tool_choice = p.choice()
        for function in function_defs(inputs.tools):
            name = str(function.get("name", ""))
            arg_rules: list[P] = []
            for prop, pointer, may_be_string in parameters(function):
                if may_be_string:
                    value_parser = string_value
                else:
                    value_parser = p.tool_arg_json_value(
                        p.schema(p.json(), f"tool-{name}-arg-{prop}-schema", tool_parameters(function),
                                 pointer=pointer)) + p.tool_arg_close(p.literal(PARAM_END))
                arg_rules.append(p.tool_arg(
                    p.tool_arg_open(p.literal('<atem:parameter name="') + p.tool_arg_name(p.literal(prop))
                                    + p.literal('">')) + value_parser))
            args = p.zero_or_more(p.choice(arg_rules) + p.space()) if arg_rules else p.eps()
            tool_parser = p.tool(
                p.tool_open(p.literal(" to=") + p.until("<|message|>") + p.literal("<|message|><atem:function_calls>")
                            + p.space() + p.literal('<atem:invoke name="') + p.tool_name(p.literal(name))
                            + p.literal('">') + p.space())
                << p.tool_args(args)
                << p.tool_close(p.literal("</atem:invoke>") + p.space() + p.literal("</atem:function_calls>")))
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


HANDLER = Handler("muse_glimmer", detect, generate)
