"""MiniMax-M3 (parsers/minimax-m3.cpp).

Every tool tag carries the namespace token `]<]minimax[>[`, which the analyzer would mistake for markup:
`NS<tool_call> NS<invoke name="NAME"> NS<param>value NS</param> ... NS</invoke> NS</tool_call>`. Argument
values are written out recursively in XML (objects as nested elements, arrays as `NS<item>` elements), so
the parser follows the parameter schema down; the PEG_MINIMAX_M3 mapper rebuilds JSON from the
`tool-arg-object` / `tool-arg-array` / `tool-arg-item` tags.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from autoparser.chat.handlers._params import TYPE_ARRAY, TYPE_OBJECT, kind_of, may_be_string
from autoparser.chat.handlers._support import function_defs, has_continuation, has_tools, to_grammar
from autoparser.chat.mapper import TOOL_ARG_ARRAY, TOOL_ARG_ITEM, TOOL_ARG_OBJECT
from autoparser.chat.request import Continuation, ToolChoice, render_content
from autoparser.peg.builder import P
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat, tool_parameters

NS = "]<]minimax[>["
THINK_START = "<mm:think>"
THINK_END = "</mm:think>"
FC_START = NS + "<tool_call>"
FC_END = NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"


def detect(source: str) -> bool:
    return NS in source and "<tool_call>" in source and "<invoke name=" in source


def generate(tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    base_gp = gp

    tools = has_tools(inputs)
    response_format = isinstance(inputs.json_schema, dict)
    extract_reasoning = inputs.reasoning_format != "none"
    include_grammar = response_format or (tools and inputs.tool_choice != ToolChoice.NONE)

    if has_continuation(inputs):
        msg = inputs.continue_msg or {}
        gp = base_gp + THINK_START + str(msg.get("reasoning_content") or "")
        if inputs.continuation == Continuation.CONTENT:
            gp += THINK_END + render_content(msg)
        prompt += gp

    p = ChatBuilder()
    arena = p.build(_build(p, inputs, base_gp, tools, response_format, extract_reasoning))

    grammar = ""
    lazy = False
    triggers: tuple[GrammarTrigger, ...] = ()
    if include_grammar:
        lazy = not (response_format or (tools and inputs.tool_choice == ToolChoice.REQUIRED))
        grammar = to_grammar(arena, lazy)
        triggers = (GrammarTrigger(TriggerType.WORD, FC_START),)

    return ChatParams(
        format=ChatFormat.PEG_MINIMAX_M3, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=(NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END),
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,),
        message_delimiters=(("assistant", "]~b]ai"), ("user", "]~b]user"), ("tool", "]~b]tool"),
                            ("system", "]~b]developer"), ("system", "]~b]system")))


class _ArgsBuilder:
    """The parser of one tool's arguments, following its parameters schema (`value_of` / `members_of`).

    Sub-schemas are addressed by JSON pointers into the parameters document, named like the C++ schema
    builder's paths (`/anyOf/0`, `/type/1`, `/items`), so grammar emission finds the same nodes.
    """

    def __init__(self, p: ChatBuilder, root: Any) -> None:
        self.p = p
        self.root = root

    def element(self, tag: str, schema: Any, pointer: str, rule_name: str) -> P:
        p = self.p
        close = NS + "</" + tag + ">"
        return p.rule(rule_name, p.tool_arg(p.tool_arg_open(p.literal(NS + "<") + p.tool_arg_name(p.literal(tag))
                                                            + p.literal(">"))
                                            + self.value(schema, pointer, rule_name, close)))

    def alternatives(self, schema: Mapping[str, Any], pointer: str, kind: str) -> list[tuple[Any, str]]:
        if kind == "type_list":
            return [(dict(schema, type=t), f"{pointer}/type/{i}") for i, t in enumerate(schema["type"])]
        key = "oneOf" if "oneOf" in schema else "anyOf"
        return [(alt, f"{pointer}/{key}/{i}") for i, alt in enumerate(schema[key])]

    def value(self, schema: Any, pointer: str, rule_name: str, close: str) -> P:
        p = self.p
        close_tag = p.tool_arg_close(p.literal(close))

        # a string takes any text, so a union with a string branch is read as a string
        if may_be_string(schema, self.root, "#" + pointer):
            return p.ac(p.tool_arg_string_value(p.until(close)) + close_tag, close)

        kind = kind_of(schema, "#" + pointer)
        if kind in ("any_of", "type_list"):
            # Typed alternatives stream their arguments; a delta may have to be taken back if a later
            # alternative wins, a risk the C++ accepts too.
            choices = [self.value(alt, alt_pointer, f"{rule_name}-{i}", close)
                       for i, (alt, alt_pointer) in enumerate(self.alternatives(schema, pointer, kind))]
            return p.choice(choices)

        if kind == TYPE_OBJECT and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
            return p.tag(TOOL_ARG_OBJECT, self.members(schema, pointer, rule_name)) + p.space() + close_tag

        if kind == TYPE_ARRAY:
            key = "items" if "items" in schema else "prefixItems" if "prefixItems" in schema else ""
            items = schema[key] if key else {}
            if not isinstance(items, list):  # a list of item schemas is a tuple, written as JSON
                item_close = NS + "</item>"
                item_pointer = f"{pointer}/{key}" if key else ""
                item = p.rule(rule_name + "-item", p.tag(TOOL_ARG_ITEM, p.literal(NS + "<item>") + self.value(
                    items, item_pointer, rule_name + "-item", item_close)))
                return p.tag(TOOL_ARG_ARRAY, p.repeat(p.space() + item, 0, -1)) + p.space() + close_tag

        if pointer or schema is self.root:
            value_schema = p.schema(p.json(), rule_name + "-schema", self.root, pointer=pointer)
        else:
            # the implicit item schema of an array without `items`: any value, outside the document
            value_schema = p.schema(p.json(), rule_name + "-schema", schema)
        return p.tool_arg_json_value(value_schema) + close_tag

    def members(self, schema: Mapping[str, Any], pointer: str, rule_prefix: str) -> P:
        """Required properties in schema order, then optional ones in any order and number."""
        p = self.p
        required = schema.get("required")
        required_names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        required_elements: list[P] = []
        optional_elements: list[P] = []
        for name, prop in schema.get("properties", {}).items():
            prop_pointer = pointer + "/properties/" + name.replace("~", "~0").replace("/", "~1")
            element = self.element(name, prop, prop_pointer, f"{rule_prefix}-{name}")
            (required_elements if name in required_names else optional_elements).append(element)
        members = p.eps()
        for i, element in enumerate(required_elements):
            if i > 0:
                members = members + p.space()
            members = members + element
        if optional_elements:
            any_optional = p.choice()
            for element in optional_elements:
                any_optional |= element
            members = members + p.repeat(p.space() + any_optional, 0, -1)
        return members


def _build(p: ChatBuilder, inputs: GenerationInputs, base_gp: str, tools: bool, response_format: bool,
           extract_reasoning: bool) -> P:
    gen_prompt = p.prefix(base_gp, THINK_START)
    end = p.end()

    reasoning = p.eps()
    if extract_reasoning:
        if inputs.enable_thinking:
            block = p.literal(THINK_START) + p.space() + p.ac(p.reasoning(p.until(THINK_END)) + p.literal(THINK_END),
                                                              THINK_END)
        else:
            block = p.literal(THINK_START) + p.ac(p.until(THINK_END) + p.literal(THINK_END), THINK_END)
        # a turn without reasoning opens with a bare `</mm:think>`, from the generation prompt or the model
        reasoning = p.optional(p.choice([block, p.literal(THINK_END)]))

    if response_format:
        rf = p.rule("response-format", p.literal("```json") + p.space()
                    + p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema))
                    + p.space() + p.literal("```"))
        return gen_prompt + reasoning + rf + end

    if not tools or inputs.tool_choice == ToolChoice.NONE:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    tool_choice = p.choice()
    for function in function_defs(inputs.tools):
        name = str(function.get("name", ""))
        params = tool_parameters(function)
        args = _ArgsBuilder(p, params)
        invoke_body = p.eps()
        if kind_of(params, "#") == TYPE_OBJECT:
            invoke_body = args.members(params, "", f"tool-{name}-arg")
        func = p.tool(p.tool_open(p.literal(NS + '<invoke name="') + p.tool_name(p.literal(name)) + p.literal('">'))
                      + p.space() + invoke_body + p.space() + p.tool_close(p.literal(INVOKE_END)))
        tool_choice |= p.rule(f"tool-{name}", func)

    if inputs.parallel_tool_calls:
        tool_calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + tool_choice
                                    + p.zero_or_more(p.space() + tool_choice) + p.space() + p.literal(FC_END))
    else:
        tool_calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + tool_choice + p.space()
                                    + p.literal(FC_END))
    if inputs.tool_choice != ToolChoice.REQUIRED:
        tool_calls = p.optional(tool_calls)

    return gen_prompt + reasoning + p.content(p.until(FC_START)) + tool_calls + end


HANDLER = Handler("minimax_m3", detect, generate)
