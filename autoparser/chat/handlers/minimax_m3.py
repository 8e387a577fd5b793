"""MiniMax-M3 (parsers/minimax-m3.cpp).

Every tool tag carries the namespace token `]<]minimax[>[`:
`NS<tool_call> NS<invoke name="NAME"> NS<param>value NS</param> ... NS</invoke> NS</tool_call>`. Argument
values are written out recursively in XML (objects as nested elements, arrays as `NS<item>` elements), so
the parser follows the parameter schema down; the PEG_MINIMAX_M3 mapper rebuilds JSON from the
`tool-arg-object` / `tool-arg-array` / `tool-arg-item` tags. Why a handler: the analyzer would read the
namespace token as markup, and it has no notion of values nested as elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.mapper import TOOL_ARG_ARRAY, TOOL_ARG_ITEM, TOOL_ARG_OBJECT
from autoparser.chat.spec import Build, FormatSpec, Prefill, SchemaRule, word
from autoparser.chat.tools import functions
from autoparser.gbnf.schema import SchemaNode, compile_schema
from autoparser.peg.builder import P
from autoparser.peg.builder import rule_name as peg_rule_name
from autoparser.types import ChatFormat

NS = "]<]minimax[>["
THINK_START = "<mm:think>"
THINK_END = "</mm:think>"
FC_START = NS + "<tool_call>"
FC_END = NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"


def detect(source: str) -> FormatSpec | None:
    return SPEC if NS in source and "<tool_call>" in source and "<invoke name=" in source else None


class _ArgsBuilder:
    """The parser of one tool's arguments, following its parameters schema (`value_of` / `members_of`).

    The walk reads each sub-schema's compiled node (kind, `may_be_string`) beside its JSON. Sub-schemas are
    addressed by JSON pointers into the parameters document, named like the C++ schema builder's paths
    (`/anyOf/0`, `/type/1`, `/items`), so grammar emission finds the same nodes.
    """

    def __init__(self, p: ChatBuilder, root: Any) -> None:
        self.p = p
        self.root = root

    def element(self, tag: str, schema: Any, node: SchemaNode, pointer: str, rule_name: str) -> P:
        p = self.p
        close = NS + "</" + tag + ">"
        # (operands made right to left, as GCC builds the C++ expression: grammar rule names embed node ids)
        value = self.value(schema, node, pointer, rule_name, close)
        gt = p.literal(">")
        name = p.tool_arg_name(p.literal(tag))
        return p.rule(rule_name, p.tool_arg(p.tool_arg_open(p.literal(NS + "<") + name + gt) + value))

    def value(self, schema: Any, node: SchemaNode, pointer: str, rule_name: str, close: str,
              alternative: bool = False) -> P:
        """An element's value and its closer `close` (`alternative`: one branch of a union, which the union's
        text fallback, `value_or_text`, follows only once every branch has failed)."""
        p = self.p
        close_tag = p.tool_arg_close(p.literal(close))

        def text() -> P:
            return p.tool_arg_string_value(p.until(close)) + p.tool_arg_close(p.literal(close))

        def or_text(value: P) -> P:
            return value if alternative else p.value_or_text(value, text)

        # a string takes any text, so a union with a string branch is read as a string
        if node.may_be_string():
            return p.ac(p.tool_arg_string_value(p.until(close)) + close_tag, close)

        if node.kind == "anyOf":
            # Typed alternatives stream their arguments; a delta may have to be taken back if a later
            # alternative wins, a risk the C++ accepts too.
            if "oneOf" in schema or "anyOf" in schema:
                key = "oneOf" if "oneOf" in schema else "anyOf"
                alts = [(alt, f"{pointer}/{key}/{i}") for i, alt in enumerate(schema[key])]
            else:  # a type list
                alts = [(dict(schema, type=t), f"{pointer}/type/{i}") for i, t in enumerate(schema["type"])]
            return or_text(p.choice([self.value(alt, child, alt_pointer, f"{rule_name}-{i}", close, True)
                                     for i, ((alt, alt_pointer), child) in enumerate(zip(alts, node.children))]))

        if node.kind == "object" and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
            space = p.space()
            return p.tag(TOOL_ARG_OBJECT, self.members(schema, node, pointer, rule_name)) + space + close_tag

        if node.kind == "array":  # a list of item schemas is a tuple, written as JSON
            key = "items" if "items" in schema else "prefixItems" if "prefixItems" in schema else ""
            items = schema[key] if key else {}
            item_close = NS + "</item>"
            item_pointer = f"{pointer}/{key}" if key else ""
            item_value = self.value(items, node.items, item_pointer, rule_name + "-item", item_close)
            item = p.rule(rule_name + "-item", p.tag(TOOL_ARG_ITEM, p.literal(NS + "<item>") + item_value))
            space = p.space()
            return p.tag(TOOL_ARG_ARRAY, p.repeat(p.space() + item, 0, -1)) + space + close_tag

        def json_value() -> P:
            if pointer or schema is self.root:
                value_schema = p.schema(p.json(), rule_name + "-schema", self.root, pointer=pointer)
            else:
                # the implicit item schema of an array without `items`: any value, outside the document
                value_schema = p.schema(p.json(), rule_name + "-schema", schema)
            return p.tool_arg_json_value(value_schema) + close_tag

        if node.kind == "object":  # (no properties: llama.cpp reads JSON text, the template writes elements)
            return or_text(p.nested_elements(json_value, lambda: self.any_value(rule_name + "-elements")))
        return or_text(json_value())

    def any_value(self, rule_name: str) -> P:
        """A value as the template's `to_xml` writes any value, whatever its schema (relaxed only, see
        `nested_elements`): a mapping as nested elements, a list as `NS<item>` elements, a scalar as its text
        (read as JSON where it is a JSON value: `to_xml` prints numbers and booleans so), each followed by its
        element's closer, whatever element it is."""
        p = self.p

        def build() -> P:
            value = p.ref(peg_rule_name(rule_name))  # (the name the rule is registered under)
            close = p.tool_arg_close(p.literal(NS + "</") + p.until(">") + p.literal(">"))
            name = p.tool_arg_name(p.until(">"))
            member = p.tool_arg(p.tool_arg_open(p.literal(NS + "<") + p.negate(p.literal("/") | "item>") + name
                                                + p.literal(">")) + value)
            item = p.tag(TOOL_ARG_ITEM, p.literal(NS + "<item>") + value)
            scalar = p.atomic(p.tool_arg_json_value(p.json()) + close) \
                | p.tool_arg_string_value(p.until(NS + "</")) + close
            return p.choice([p.tag(TOOL_ARG_ARRAY, p.one_or_more(p.space() + item)) + p.space() + close,
                             p.tag(TOOL_ARG_OBJECT, p.one_or_more(p.space() + member)) + p.space() + close,
                             scalar])

        return p.rule(rule_name, build)

    def members(self, schema: Mapping[str, Any], node: SchemaNode, pointer: str, rule_prefix: str) -> P:
        """Required properties in schema order, then optional ones in any order and number."""
        required: list[P] = []
        optional: list[P] = []
        for name, child, is_required in node.properties:
            prop_pointer = pointer + "/properties/" + name.replace("~", "~0").replace("/", "~1")
            element = self.element(name, schema["properties"][name], child, prop_pointer, f"{rule_prefix}-{name}")
            (required if is_required else optional).append(element)
        return self.p.args_in_order(required, optional)


def _build(b: Build) -> P:
    p = b.p
    gen_prompt = p.prefix(b.generation_prompt, THINK_START)
    end = p.end()

    # Nodes are made in the order GCC builds the C++ expressions (the operands of `a + b` right to left), as
    # grammar rule names embed node ids.
    reasoning = p.eps()
    if b.extract_reasoning:
        if b.inputs.enable_thinking:
            def thought() -> P:
                close = p.literal(THINK_END)
                body = p.ac(p.reasoning(p.until(THINK_END)) + close, THINK_END)
                space = p.space()
                return p.literal(THINK_START) + space + body

            # (relaxed: a call ends a block never closed)
            block = p.reasoning_between(thought, THINK_START, THINK_END, [FC_START] if b.tool_calls else [],
                                        spaced=True)
        else:
            def dropped() -> P:
                close = p.literal(THINK_END)
                body = p.ac(p.until(THINK_END) + close, THINK_END)
                return p.literal(THINK_START) + body

            # (llama.cpp drops a block the model writes with thinking off; relaxed: read as reasoning)
            block = p.dropped_reasoning(dropped, THINK_START, THINK_END)
        # a turn without reasoning opens with a bare `</mm:think>`, from the generation prompt or the model
        reasoning = p.optional(p.choice([block, p.literal(THINK_END)]))

    if b.response_format:
        return gen_prompt + reasoning + p.fenced_json(b.inputs.json_schema) + end

    if not b.tool_calls:
        return gen_prompt + reasoning + p.content(p.rest()) + end

    tool_choice = p.choice()
    for f in functions(b.inputs.tools):
        root = compile_schema(f.schema).root
        invoke_body = p.eps()
        if root.kind == "object":
            invoke_body = _ArgsBuilder(p, f.schema).members(f.schema, root, "", f"tool-{f.name}-arg")
        close = p.tool_close(p.literal(INVOKE_END))
        after = p.space()
        before = p.space()
        tail = p.literal('">')
        name = p.tool_name(p.literal(f.name))
        func = p.tool(p.tool_open(p.literal(NS + '<invoke name="') + name + tail) + before + invoke_body + after + close)
        tool_choice |= p.rule(f"tool-{f.name}", func)

    tool_calls = p.call_block(FC_START, tool_choice, FC_END, parallel=b.parallel, required=b.required)
    # (relaxed: the section opener may be left out, call_block; the first call then begins `<invoke name="NAME">`)
    bare = [f'{NS}<invoke name="{f.name}">' for f in functions(b.inputs.tools)]
    content = p.content_until_calls([FC_START], bare, lambda: tool_calls)  # (the C++'s `content_before_tools`)
    return gen_prompt + reasoning + content + tool_calls + end


SPEC = FormatSpec(
    "minimax_m3", _build, Prefill(None, THINK_START, THINK_END), format=ChatFormat.PEG_MINIMAX_M3,
    response_format=SchemaRule.OBJECT, triggers=(word(FC_START),), relaxes=True,
    preserved_tokens=(NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END),
    supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,),
    message_delimiters=(("assistant", "]~b]ai"), ("user", "]~b]user"), ("tool", "]~b]tool"),
                        ("system", "]~b]developer"), ("system", "]~b]system")))
