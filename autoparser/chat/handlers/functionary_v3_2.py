"""Functionary v3.2 (`common_chat_params_init_functionary_v3_2`, parsers/functionary-v3-2.cpp).

Every message part names its recipient after `>>>`: `>>>all\\n` + content, or `>>>NAME\\n` + JSON arguments.
The generation prompt ends with `>>>`, so the model's output starts with the recipient.
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
from autoparser.chat.handlers._support import cpp_sum, functions, has_continuation, has_tools, to_grammar
from autoparser.chat.request import ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

ASSISTANT_HEADER = "<|start_header_id|>assistant<|end_header_id|>\n\n"


def detect(source: str) -> bool:
    return ">>>all" in source and ">>>${recipient}" in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    tools = has_tools(inputs)
    include_grammar = tools and inputs.tool_choice != ToolChoice.NONE

    if has_continuation(inputs):
        gp = ASSISTANT_HEADER + ">>>all\n" + render_content(inputs.continue_msg or {})
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        # any recipient other than "all" starts a tool call
        triggers = (GrammarTrigger(TriggerType.PATTERN, ">>>(?!all)"),)

    return ChatParams(format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena,
                      grammar=grammar, grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=(">>>all",))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool) -> P:
    # With tools, content stops at the next ">>>" (a call); without, it runs to the end.
    # (operands in the C++ evaluation order, see cpp_sum, so that automaton rule ids match)
    content_until_tool = cpp_sum(lambda: p.literal("all\n"), lambda: p.content(p.until(">>>")))
    content_until_end = cpp_sum(lambda: p.literal("all\n"), lambda: p.content(p.rest()))
    gen_prompt = p.literal(ASSISTANT_HEADER + ">>>")

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        return gen_prompt + content_until_end + p.end()

    tool_choice = p.choice()
    for name, schema in functions(inputs.tools):
        tool_parser = p.tool(p.tool_open(p.tool_name(p.literal(name)) + p.literal("\n"))
                             + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema)))
        tool_choice |= p.rule(f"tool-{name}", tool_parser)

    content_only = content_until_end
    tools_only = p.trigger_rule("tools", p.one_or_more(tool_choice))
    content_and_tools = content_until_tool + tools_only

    if inputs.tool_choice == ToolChoice.REQUIRED:
        if inputs.parallel_tool_calls:
            ret = p.choice([content_and_tools, tools_only]) + p.end()
        else:
            ret = p.choice([content_until_tool + tool_choice, tools_only]) + p.end()
    elif inputs.parallel_tool_calls:
        ret = p.choice([content_and_tools, content_only, tools_only]) + p.end()
    else:
        content_and_tool = content_until_tool + tool_choice
        ret = p.choice([content_and_tool, content_only, tool_choice]) + p.end()
    return gen_prompt + ret


HANDLER = Handler("functionary_v3_2", detect, generate)
