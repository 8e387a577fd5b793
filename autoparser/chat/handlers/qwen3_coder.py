"""Qwen3-Coder family: Qwen3-Coder, Qwen3.5, Nemotron-3-Nano, StepFun-3.5 (parsers/qwen3-coder.cpp).

Calls are XML with one parameter per element and a newline after every tag:
`<tool_call>\\n<function=NAME>\\n<parameter=K>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>`. Values are
typed by the parameter schema: JSON when the schema excludes strings, raw text when only strings fit, and
"JSON if it parses, else raw text" for mixed schemas. The thinking members of the family end reasoning at
`</think>` or straight at `<tool_call>`; Qwen3-Coder (no `<think>` in its template) sometimes drops the
`<tool_call>` line, so a bare `<function=NAME>` also opens a call there. Some templates of the family write a
value without the newlines around it (`<parameter=K>VALUE</parameter>`, MiMo-V2): the handler takes that
whitespace from the template's analysis (`_fit`), where the C++ builds Qwen3-Coder's for all. Why a handler:
values typed per parameter (raw or JSON) and required arguments in any order, which the analyzer's tagged
format does not know.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from autoparser.analysis.model import TemplateAnalysis, ToolFormat
from autoparser.chat.builder import ChatBuilder, TaggedMarkers
from autoparser.chat.spec import (
    CALL_TRANSFORM,
    Build,
    FormatSpec,
    Laziness,
    Prefill,
    closers_pattern,
    response_fields,
    word,
)
from autoparser.chat.tools import Function, Parameter, functions
from autoparser.peg.builder import P

GEN_PREFIX = "<|im_start|>assistant\n"
ARG_CLOSE = "\n</parameter>\n"
MARKERS = TaggedMarkers("<function=", ">\n", "<parameter=", ">\n", ARG_CLOSE, "</function>\n", "</tool_call>",
                        "<tool_call>")


def detect(source: str) -> FormatSpec | None:
    # Templates writing `<tool_call><function=NAME>` without newlines between the tags belong to the analyzer.
    found = ("<tool_call>" in source and "<function=" in source and "<parameter=" in source
             and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in source)
    if not found:
        return None
    return THINKING if "<think>" in source else CODER


def _fit(spec: FormatSpec, analysis: TemplateAnalysis, *, coder: bool) -> FormatSpec:
    """The spec with the whitespace this template writes around a parameter's value (its analysis' argument
    markers), where it is all that differs from Qwen3-Coder's `<parameter=K>\nVALUE\n</parameter>\n`."""
    args = analysis.tools.arguments
    if analysis.tools.format.mode is not ToolFormat.TAG_WITH_TAGGED or args.name_prefix != MARKERS.arg_prefix \
            or args.value_prefix or args.name_suffix.strip() != MARKERS.arg_suffix.strip() \
            or args.value_suffix.strip() != ARG_CLOSE.strip():
        return spec
    markers = replace(MARKERS, arg_suffix=args.name_suffix, value_suffix=args.value_suffix)
    return spec if markers == MARKERS else replace(spec, build=partial(_build, coder=coder, markers=markers))


def _build(b: Build, *, coder: bool, markers: TaggedMarkers = MARKERS) -> P:
    p = b.p
    gen_prefix = p.literal(GEN_PREFIX)

    reasoning = p.eps()
    openers = [f"<function={f.name}>" for f in functions(b.inputs.tools)] if b.tool_calls else []
    if b.extract_reasoning:
        # nodes made in the order GCC builds the C++ expression (operands right to left), as grammar rule names
        # embed node ids: the closing choice, then the reasoning, then the space and `<think>`
        close = p.peek(p.literal("<tool_call>"))
        # (relaxed: a call written without its `<tool_call>` line also ends the reasoning)
        close = p.reasoning_ended_by_call(p.literal("</think>") | close, openers)
        body = p.reasoning(p.until_one_of(["</think>", "<tool_call>", *p.bare_call_starts(openers)]))
        reasoning = p.optional("<think>" + p.space() + body + close)

    if b.response_format:
        return gen_prefix + (reasoning << p.content(p.schema(p.json(), "response-format", b.inputs.json_schema)))

    if b.tool_calls:
        value_close = markers.value_suffix
        arg_close = p.tool_arg_close(p.literal(value_close))
        arg_string = p.rule("xml-arg-string", p.ac(p.tool_arg_string_value(p.until(value_close)) + arg_close,
                                                   value_close))
        def strict_choice() -> P:
            tool_choice = p.choice()
            def arg(f: Function, param: Parameter) -> P:
                rule_name = f"tool-{f.name}-arg-{param.name}"
                arg_open = p.tool_arg_open(markers.arg_prefix + p.tool_arg_name(p.literal(param.name))
                                           + markers.arg_suffix)
                arg_value = p.typed_value(param, rule_name + "-schema", f.schema, arg_close, arg_string,
                                          partial(_mixed_value, p, param.types, arg_close, arg_string))
                return p.rule(rule_name, p.tool_arg(arg_open + arg_value))

            for f in functions(b.inputs.tools):
                name = f.name
                required_args, optional_args = p.args_by_requirement(f, arg)

                # Qwen does not always keep the declared order of required arguments.
                args = p.args_permuted(f"tool-{name}-args", required_args, optional_args)
                func = p.tool(p.tool_open("<function=" + p.tool_name(p.literal(name)) + ">\n") + p.tool_args(args)
                              + p.tool_close(p.literal("</function>\n")))
                tool_choice |= p.rule(f"tool-{name}", func)
            return tool_choice

        tool_choice = p.tagged_call_choice(strict_choice, markers, functions(b.inputs.tools),
                                           lambda param: param.types != {"string"})
        min_calls = 1 if b.required else 0
        tool_call_body = p.grouped_calls(tool_choice) + p.block_closer("</tool_call>", "<tool_call>") + p.space()
        tool_call = p.rule("tool-call", p.call_opener("<tool_call>\n") + tool_call_body)
        # Qwen3-Coder may drop the first `<tool_call>` line (llama.cpp reads it so)
        tool_call_first = p.rule("tool-call-first", p.optional(p.call_opener("<tool_call>\n")) + tool_call_body) \
            if coder else tool_call
        calls = tool_call_first + p.zero_or_more(tool_call) if b.parallel else tool_call_first
        tool_calls = p.trigger_rule("tool-call-root", p.repeat(calls, min_calls, 1))
        tool_calls = p.call_sections(tool_calls, lambda: calls, ["<tool_call>"])
        # (relaxed: content also stops where a call written without its `<tool_call>` line begins)
        content = p.content_until_calls(["<tool_call>", *(openers if coder else [])], openers, lambda: calls)
        return gen_prefix + (reasoning << content << tool_calls)

    return gen_prefix + (reasoning << p.content(p.rest()))


def _mixed_value(p: ChatBuilder, types: frozenset[str], close: P, raw: P) -> P:
    """Any text is a string here, so the grammar keeps only the raw string rule; the parser still tries the
    JSON shapes first so that the value comes out typed."""
    json_value = p.choice()
    if "object" in types:
        json_value |= p.json_object()
    if "array" in types:
        json_value |= p.json_array()
    if "number" in types or "integer" in types:
        json_value |= p.json_number()
    if "boolean" in types:
        json_value |= p.json_bool()
    if "null" in types:
        json_value |= p.json_null()
    return p.gbnf(p.atomic(p.tool_arg_json_value(json_value) + close) | raw, "xml-arg-string")


# The calls for transformers' parser: `<function=NAME>` opens one (after `<tool_call>`, which Qwen3-Coder may
# drop), its parameters read by `xml-inline`, their values cast by the tools' schemas.
_CALLS = {"open_pattern": r"(?:<tool_call>\s*)?<function=(?P<name>[^>\s]+)>",
          "close_pattern": closers_pattern("</function>", "</tool_call>", newline_before=True), "content": "xml-inline",
          "content_args": {"tag_pattern": r"<parameter=(?P<key>[^>\s]+)>(?P<value>.*?)</parameter>",
                           "value_parser": {"name": "text"}},
          "repeats": True, "transform": CALL_TRANSFORM}

THINKING = FormatSpec(
    "qwen3_coder", partial(_build, coder=False), Prefill(GEN_PREFIX, "<think>\n", "\n</think>\n\n"),
    laziness=Laziness.TOOLS_AUTO, relaxes=True, fit=partial(_fit, coder=False), triggers=(word("<tool_call>"),),
    triggers_only_when_lazy=True,
    response_fields=response_fields(_CALLS, thinking=("<think>", "</think>")), calls_as_analysed=True,
    preserved_tokens=("<tool_call>", "</tool_call>", "<think>", "</think>"), supports_thinking=True,
    # the newline variant first, so a forced close writes it
    thinking_start_tag="<think>", thinking_end_tags=("\n</think>", "</think>", "<tool_call>"),
    message_delimiters=(
        ("assistant", "<|im_start|>assistant"),
        ("tool", "<|im_start|>user\n<tool_response>"),  # Qwen3-Coder, Qwen3.5, Nemotron-3-Nano
        ("tool", "<|im_start|>tool_response"),  # StepFun-3.5
        ("user", "<|im_start|>user"),
        ("system", "<|im_start|>system"),
    ))

# Qwen3-Coder: no reasoning; the whole `<function=NAME>` opener also triggers (never a bare `<function`, which
# ordinary code contains).
CODER = replace(THINKING, build=partial(_build, coder=True), fit=partial(_fit, coder=True),
                prefill=Prefill(GEN_PREFIX), reasoning=False, tool_trigger=word("<function={name}>"),
                preserved_tokens=("<tool_call>", "</tool_call>"), supports_thinking=False, thinking_start_tag="", thinking_end_tags=())
