"""MiniCPM5 (`common_chat_params_init_minicpm5`, parsers/minicpm5.cpp).

`<think>...</think>` reasoning, then content, then XML calls
`<function name="NAME"><param name="ARG">value</param>...</function>`. A string value may be wrapped in
CDATA so that it can contain `</param>`; only the text inside the CDATA markers is the value. Why a handler: a
value in two spellings (CDATA or plain), which the analyzer's one value syntax per format cannot describe.
"""

from __future__ import annotations

from autoparser.chat.spec import Build, FormatSpec, Prefill, word
from autoparser.chat.tools import functions, parameters
from autoparser.peg.builder import P

ASSISTANT_START = "<|im_start|>assistant\n"


def detect(source: str) -> FormatSpec | None:
    found = "Tool usage guidelines:" in source and '<function name="' in source and '<param name="' in source
    return SPEC if found else None


def _build(b: Build) -> P:
    p = b.p
    # Operands of `+` chains are created in the C++ evaluation order (see cpp_sum) so that automaton rule ids
    # in the grammar match.
    gen_prompt = p.literal(ASSISTANT_START)
    reasoning = p.eps()
    if b.extract_reasoning:
        calls = ["<function"] if b.tool_calls else []
        # (relaxed: the block left out, which llama.cpp's parser requires: the text is content, and reasoning up
        # to an end marker, `missing_reasoning_start`)
        reasoning = p.written_otherwise(lambda: p.cpp_sum(lambda: p.reasoning_between(
            lambda: ("<think>" << p.reasoning(p.until("</think>"))) << "</think>", "<think>", "</think>", calls,
            spaced=True), p.space), p.eps, "", "missing_reasoning_block")

    if b.response_format:
        return gen_prompt + reasoning + p.content(p.schema(p.json(), "response-format", b.inputs.json_schema))

    if b.tool_calls:
        # CDATA lets a value contain "</param>"; only the text between the CDATA markers is the value.
        # (relaxed, spaced_marker and space_then: whitespace around the CDATA section, which the template
        # writes without)
        cdata = p.cpp_sum(lambda: p.spaced_marker("<![CDATA["),
                        lambda: p.ac(p.cpp_sum(lambda: p.tool_arg_string_value(p.until("]]>")),
                                             lambda: p.literal("]]>")), "]]>"),
                        lambda: p.tool_arg_close(p.space_then(p.value_closer("</param>"))))
        plain = p.cpp_sum(lambda: p.negate(p.literal("<![CDATA[")),
                        lambda: p.ac(p.cpp_sum(lambda: p.tool_arg_string_value(p.until("</param>")),
                                             lambda: p.tool_arg_close(p.value_closer("</param>"))), "</param>"))
        string_value = p.choice([cdata, plain])
        tool_choice = p.choice()
        for f in functions(b.inputs.tools):
            name = f.name
            arg_rules = [p.quoted_name_arg('<param name="', param, string_value, "</param>",
                                           f"tool-{f.name}-arg-{param.name}-schema", f.schema)
                         for param in parameters(f)]
            # (relaxed: an argument the tool does not declare, kept)
            args = p.args_any_order(arg_rules + p.undeclared_attribute_arg('<param name="', string_value, f.schema))
            tool_open = p.tool_open(p.cpp_sum(*p.name_attribute(
                '<function name="', lambda: p.tool_name(p.literal(name)))))  # noqa: B023 (called at once)
            tool_parser = p.tool(tool_open << p.tool_args(args) << p.tool_close(p.literal("</function>")))
            tool_choice |= p.rule(f"tool-{name}", tool_parser)

        max_calls = -1 if b.parallel else 1
        space = p.space()
        tool_calls = p.trigger_rule("tool-call", p.repeat(tool_choice + space, 1, max_calls))
        content = p.content(p.until("<function"))
        end = p.end()
        return gen_prompt + reasoning + content + tool_calls + end

    end = p.end()
    return gen_prompt + reasoning + p.content(p.rest()) + end


SPEC = FormatSpec(
    "minicpm5", _build, Prefill(ASSISTANT_START, "<think>\n", "\n</think>\n\n"), triggers=(word("<function"),),
    relaxes=True, calls_as_analysed=True,
    preserved_tokens=("<function", "<param", "</function>", "</param>", "<think>", "</think>"),
    supports_thinking=True, thinking_start_tag="<think>", thinking_end_tags=("</think>",),
    # a tool response is a user turn starting with <tool_response>: its delimiter must come first
    message_delimiters=(("assistant", "<|im_start|>assistant"), ("tool", "<|im_start|>user\n<tool_response>"),
                        ("user", "<|im_start|>user"), ("system", "<|im_start|>system")))
