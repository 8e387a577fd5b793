"""GigaChat v3 (`common_chat_params_init_gigachat_v3`, parsers/gigachat-v3.cpp).

A tool call is a separate message part: `<|message_sep|>\\n\\nfunction call<|role_sep|>\\n` followed by
`{"name": ..., "arguments": {...}}`; one call at most. GigaChat 3.1 marks calls with `<|function_call|>` and is
left to the analyzer.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.generator import ChatParams, GenerationInputs, GrammarTrigger, TriggerType, generation_prompt, \
    render_prompt
from autoparser.chat.handlers import Handler
from autoparser.chat.handlers._support import has_continuation, has_tools, to_grammar
from autoparser.chat.request import ToolChoice, render_content
from autoparser.errors import GrammarError
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat, tool_parameters

ASSISTANT_START = "assistant<|role_sep|>\n"
TOOL_CALL_START_PREFIX = "<|message_sep|>\n\nfunction call<|role_sep|>\n"


def detect(source: str) -> bool:
    return "<|role_sep|>" in source and "<|message_sep|>" in source and "<|function_call|>" not in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    if has_continuation(inputs):
        gp = ASSISTANT_START + render_content(inputs.continue_msg or {})
        prompt += gp

    tools = has_tools(inputs) and inputs.tool_choice != ToolChoice.NONE
    p = ChatBuilder()
    arena = p.build(_build(p, inputs, tools))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if tools:
        lazy = inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, TOOL_CALL_START_PREFIX),)

    return ChatParams(format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena,
                      grammar=grammar, grammar_lazy=lazy, grammar_triggers=triggers,
                      preserved_tokens=("<|message_sep|>\n\n", "<|role_sep|>\n"))


def _build(p: ChatBuilder, inputs: GenerationInputs, tools: bool) -> P:
    if tools:
        tool_choice = p.choice()
        # every tool is taken as a function here (no type filter), as in the C++
        for tool in inputs.tools or ():
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                raise GrammarError(f"tool definition without a function name: {tool!r}")
            name = function["name"]
            schema = tool_parameters(function)
            tool_name = p.json_member("name", '"' + p.tool_name(p.literal(name)) + '"')
            tool_args = p.json_member("arguments", p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema)))
            tool_open = p.tool_open(p.literal("{") << tool_name)
            tool_choice |= p.rule(f"tool-{name}", tool_open << "," << tool_args << "}")

        min_calls = 1 if inputs.tool_choice == ToolChoice.REQUIRED else 0
        # the format has no way to write parallel calls
        tool_call = p.rule("tool-call", p.literal(TOOL_CALL_START_PREFIX) + tool_choice)
        tool_calls = p.trigger_rule("tool-call-root", p.repeat(tool_call, min_calls, 1))
        ret = p.content(p.until("<|message_sep|>\n\n")) << tool_calls
    else:
        ret = p.content(p.rest())
    return p.literal(ASSISTANT_START) + ret


HANDLER = Handler("gigachat_v3", detect, generate)
