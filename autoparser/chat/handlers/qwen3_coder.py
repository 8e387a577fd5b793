"""Qwen3-Coder family: Qwen3-Coder, Qwen3.5, Nemotron-3-Nano, StepFun-3.5 (parsers/qwen3-coder.cpp).

Calls are XML with one parameter per element and a newline after every tag:
`<tool_call>\\n<function=NAME>\\n<parameter=K>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>`. Values are
typed by the parameter schema: JSON when the schema excludes strings, raw text when only strings fit, and
"JSON if it parses, else raw text" for mixed schemas. The thinking members of the family end reasoning at
`</think>` or straight at `<tool_call>`; Qwen3-Coder (no `<think>` in its template) sometimes drops the
`<tool_call>` line, so a bare `<function=NAME>` also opens a call there.
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
from autoparser.chat.handlers._params import (
    TYPE_ARRAY,
    TYPE_BOOLEAN,
    TYPE_INTEGER,
    TYPE_NULL,
    TYPE_NUMBER,
    TYPE_OBJECT,
    TYPE_STRING,
    parameters,
)
from autoparser.chat.handlers._support import function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat

GEN_PREFIX = "<|im_start|>assistant\n"
ARG_CLOSE = "\n</parameter>\n"


def detect(source: str) -> bool:
    # Templates writing `<tool_call><function=NAME>` without newlines between the tags belong to the analyzer.
    return ("<tool_call>" in source and "<function=" in source and "<parameter=" in source
            and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in source)


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    supports_reasoning = "<think>" in tmpl.source
    is_qwen3_coder = not supports_reasoning

    preserved = ["<tool_call>", "</tool_call>"]
    thinking_start = ""
    thinking_end: tuple[str, ...] = ()
    if supports_reasoning:
        thinking_start = "<think>"
        # the newline variant first, so a forced close writes it
        thinking_end = ("\n</think>", "</think>", "<tool_call>")
        preserved += ["<think>", "</think>"]

    delimiters = (
        ("assistant", "<|im_start|>assistant"),
        ("tool", "<|im_start|>user\n<tool_response>"),  # Qwen3-Coder, Qwen3.5, Nemotron-3-Nano
        ("tool", "<|im_start|>tool_response"),  # StepFun-3.5
        ("user", "<|im_start|>user"),
        ("system", "<|im_start|>system"),
    )

    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = GEN_PREFIX
        if supports_reasoning:
            gp += "<think>\n" + str(msg.get("reasoning_content") or "")
            if inputs.continuation == Continuation.CONTENT:
                gp += "\n</think>\n\n"
        if inputs.continuation == Continuation.CONTENT:
            gp += render_content(msg)
        prompt += gp

    tool_call_starts = ["<tool_call>"]
    if is_qwen3_coder:
        # the whole `<function=NAME>` opener, never a bare `<function`, which ordinary code contains
        tool_call_starts += [f"<function={fn.get('name', '')}>" for fn in function_defs(inputs.tools)]

    p = ChatBuilder()
    root = _build(p, inputs, supports_reasoning, extract_reasoning, response_format, tools, is_qwen3_coder,
                  tool_call_starts)
    arena = p.build(root)

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = tools and inputs.tool_choice == ToolChoice.AUTO
        grammar = to_grammar(arena, lazy)
        if lazy:
            triggers = tuple(GrammarTrigger(TriggerType.WORD, s) for s in tool_call_starts)

    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=tuple(preserved),
        supports_thinking=supports_reasoning, thinking_start_tag=thinking_start, thinking_end_tags=thinking_end,
        message_delimiters=delimiters)


def _build(p: ChatBuilder, inputs: GenerationInputs, supports_reasoning: bool, extract_reasoning: bool,
           response_format: bool, tools: bool, is_qwen3_coder: bool, tool_call_starts: list[str]) -> P:
    gen_prefix = p.literal(GEN_PREFIX)

    reasoning = p.eps()
    if supports_reasoning and extract_reasoning:
        reasoning = p.optional("<think>" + p.space() + p.reasoning(p.until_one_of(["</think>", "<tool_call>"]))
                               + (p.literal("</think>") | p.peek(p.literal("<tool_call>"))))

    if response_format:
        return gen_prefix + (reasoning << p.content(p.schema(p.json(), "response-format", inputs.json_schema)))

    if tools and inputs.tool_choice != ToolChoice.NONE:
        arg_close = p.tool_arg_close(p.literal(ARG_CLOSE))
        arg_string = p.rule("xml-arg-string", p.ac(p.tool_arg_string_value(p.until(ARG_CLOSE)) + arg_close,
                                                   ARG_CLOSE))
        tool_choice = p.choice()
        for function in function_defs(inputs.tools):
            name = str(function.get("name", ""))
            params, props = parameters(function)
            required_args: list[P] = []
            optional_args: list[P] = []
            for param in props:
                rule_name = f"tool-{name}-arg-{param.name}"
                arg_open = p.tool_arg_open("<parameter=" + p.tool_arg_name(p.literal(param.name)) + ">\n")
                types = param.types
                if TYPE_STRING not in types:
                    arg_value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", params,
                                                               pointer=param.pointer)) + arg_close
                elif types == {TYPE_STRING}:
                    arg_value = arg_string
                else:
                    # Any text is a string here, so the grammar keeps only the raw string rule; the parser
                    # still tries the JSON shapes first so that the value comes out typed.
                    json_value = p.choice()
                    if TYPE_OBJECT in types:
                        json_value |= p.json_object()
                    if TYPE_ARRAY in types:
                        json_value |= p.json_array()
                    if TYPE_NUMBER in types or TYPE_INTEGER in types:
                        json_value |= p.json_number()
                    if TYPE_BOOLEAN in types:
                        json_value |= p.json_bool()
                    if TYPE_NULL in types:
                        json_value |= p.json_null()
                    arg_value = p.gbnf(p.atomic(p.tool_arg_json_value(json_value) + arg_close) | arg_string,
                                       "xml-arg-string")
                arg_rule = p.rule(rule_name, p.tool_arg(arg_open + arg_value))
                (required_args if param.required else optional_args).append(arg_rule)

            # Qwen does not always keep the declared order of required arguments.
            args = p.permute(f"tool-{name}-args", required_args)
            if optional_args:
                args = args + p.zero_or_more(p.choice(optional_args))
            func = p.tool(p.tool_open("<function=" + p.tool_name(p.literal(name)) + ">\n") + p.tool_args(args)
                          + p.tool_close(p.literal("</function>\n")))
            tool_choice |= p.rule(f"tool-{name}", func)

        min_calls = 1 if inputs.tool_choice == ToolChoice.REQUIRED else 0
        tool_call_body = tool_choice + "</tool_call>" + p.space()
        tool_call = p.rule("tool-call", "<tool_call>\n" + tool_call_body)
        tool_call_first = p.rule("tool-call-first", p.optional(p.literal("<tool_call>\n")) + tool_call_body) \
            if is_qwen3_coder else tool_call
        calls = tool_call_first + p.zero_or_more(tool_call) if inputs.parallel_tool_calls else tool_call_first
        tool_calls = p.trigger_rule("tool-call-root", p.repeat(calls, min_calls, 1))
        return gen_prefix + (reasoning << p.content(p.until_one_of(tool_call_starts)) << tool_calls)

    return gen_prefix + (reasoning << p.content(p.rest()))


HANDLER = Handler("qwen3_coder", detect, generate)
