"""The chat format a template's analysis describes (llama.cpp's `autoparser::build_parser` and the generic
branch of `common_chat_templates_apply_jinja`, common/chat-auto-parser-generator.cpp).

`derived_format(analysis)` is a FormatSpec like any specialised one: its build function reads the markers the
analyzer found (reasoning, content wrapper, tool-call format), its triggers are the call section's or the
first call's opener, and its prefill rebuilds a continued message around the reasoning markers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from autoparser.analysis.model import (
    CallForm,
    CallIdPosition,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    TypedArgument,
)
from autoparser.analysis.tools import call_id_word
from autoparser.chat.builder import ChatBuilder, DerivedReasoning, TaggedMarkers
from autoparser.chat.request import Continuation
from autoparser.chat.spec import Build, FormatSpec, GrammarTrigger, Prefill, Rendered, pattern, word
from autoparser.chat.tools import Function, Parameter, functions
from autoparser.gbnf.blocks import SPACE_PATTERN
from autoparser.peg.builder import P
from autoparser.peg.nodes import C_SPACE
from autoparser.template.diff import with_string_arguments

__all__ = ["derived_format"]



def _trim(s: str) -> str:
    return s.strip(C_SPACE)


def derived_format(analysis: TemplateAnalysis) -> FormatSpec:
    """The format of a template as its analysis describes it."""
    analysis = _markers_as_written(analysis)
    reasoning, fmt, form = analysis.reasoning, analysis.tools.format, analysis.call_form
    thinking = reasoning.mode is not ReasoningMode.NONE
    marker = fmt.section_start or fmt.per_call_start
    triggers = (word(marker),) + ((word('{"type": "function",'),) if fmt.openai_wrapper_trigger else ()) \
        if marker else ()
    tool_trigger = None
    if not marker and fmt.mode is ToolFormat.JSON_NATIVE:
        # Beyond the C++ (which has no marker to wake a lazy grammar, so builds none): where the calls begin
        if fmt.tools_array_wrapped:
            triggers = (pattern(r"(\[\s*\{)"),)  # a bare array of calls: its bracket
        else:
            triggers, tool_trigger = _bare_json_triggers(fmt)
    preserved = analysis.preserved_tokens
    if form is not None:  # a form beyond the C++ record: its markers, not the record's needle-laden ones
        triggers = (word(form.section_start),) if form.section_start else (pattern(_BARE_PYTHON_LIST),)
        tool_trigger = None
        preserved = tuple(dict.fromkeys(m for m in map(_trim, (
            reasoning.start, reasoning.end, analysis.content.start, analysis.content.end, form.section_start,
            form.section_end)) if m))
    delimiters = tuple((role, start) for role, start in (("assistant", analysis.assistant_start),
                                                          ("user", analysis.user_start)) if start)
    end_tag = _trim(reasoning.end)
    return FormatSpec(
        "autoparser", partial(_build, analysis), partial(_prefill, analysis), triggers=triggers,
        tool_trigger=tool_trigger,
        messages=_string_arguments if analysis.string_arguments else None,
        triggers_only_when_lazy=True, calls=fmt.mode is not ToolFormat.NONE or form is not None,
        reasoning=thinking, relaxes=True, relaxed_build=partial(_relaxed_build, analysis),
        preserved_tokens=preserved, additional_stops=analysis.additional_stops,
        supports_thinking=thinking, thinking_start_tag=_trim(reasoning.start) if thinking else "",
        thinking_end_tags=(end_tag,) if thinking and end_tag else (), message_delimiters=delimiters)


def _markers_as_written(analysis: TemplateAnalysis) -> TemplateAnalysis:
    """The record's markers as the model writes them, where the analysis found more than the record says (beyond
    the C++): no section opener where the generation prompt has written it (`section_start_in_prompt`: the calls
    come bare after it), and the name's own marker where the record's name prefix holds a call id
    (`call_id_in_name_prefix`: `_func` reads the id before it)."""
    tools = analysis.tools
    fmt, fn = tools.format, tools.function
    if analysis.section_start_in_prompt:
        fmt = replace(fmt, section_start="")
    if analysis.call_id_in_name_prefix is not None:
        fn = replace(fn, name_prefix=analysis.call_id_in_name_prefix[1])
    return replace(analysis, tools=replace(tools, format=fmt, function=fn))


def _string_arguments(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The messages with each call's arguments as JSON text: the template prints them as they come, and was
    analysed so (`TemplateAnalysis.string_arguments`)."""
    return [with_string_arguments(m) for m in messages]


def _prefill(analysis: TemplateAnalysis, rendered: Rendered, msg: Mapping[str, Any],
             continuation: Continuation) -> str:
    """The rendered generation prompt up to the reasoning start marker, then the message's reasoning, and for
    a content continuation the end marker and the content."""
    start = analysis.reasoning.start
    if not start:
        return Prefill(None)(rendered, msg, continuation)
    gp = rendered.generation_prompt
    cut = gp.find(start)
    return Prefill(gp if cut < 0 else gp[:cut], start, analysis.reasoning.end)(rendered, msg, continuation)


@dataclass(frozen=True)
class _Derived:
    """One parser build: the request, the analysis, and the reasoning parser every body starts with."""

    b: Build
    a: TemplateAnalysis
    reasoning: P

    @property
    def p(self) -> ChatBuilder:
        return self.b.p


def _build(analysis: TemplateAnalysis, b: Build) -> P:
    """`autoparser::build_parser`: reasoning, then response format / tools / content, after the prompt prefix."""
    p, reasoning = b.p, analysis.reasoning
    p.eps()  # the C++ default-initialises the reasoning parser (ids follow it)
    d = _Derived(b, analysis, _reasoning(b, analysis))
    p.eps()  # the C++'s `auto parser = p.eps()` before the branches (it takes an id too)
    pure_content = reasoning.mode is ReasoningMode.NONE
    if b.response_format:
        rf = p.rule("response-format", p.content(p.schema(p.json(), "response-format-schema", b.inputs.json_schema)))
        body = d.reasoning + p.space() + p.choice([
            p.literal("```json") + p.space() + rf + p.space() + p.literal("```"),
            p.space() + rf + p.space(),
        ]) + p.end()
        pure_content = False
    elif b.tool_calls and analysis.caps.supports_tool_calls:
        body = _tools(d)
        pure_content = False
    else:
        body = _content(d)
    prefix = p.prefix(b.generation_prompt, _trim(reasoning.start))
    return prefix + body if pure_content else prefix << body


def _relaxed_build(analysis: TemplateAnalysis, b: Build) -> P:
    """The relaxed parser's build (`FormatSpec.relaxed_build`): `_build`, reading also a reasoning block the
    prompt leaves open where the strict (C++) parser reads none.

    - The generation prompt opens a block the C++ finds no end to (`TemplateAnalysis.prompt_reasoning`): it is
      read as the C++ reads a template's reasoning the prompt opens.
    - The prompt opens the template's block before the generation prompt begins (ERNIE 4.5 writes its
      assistant header whatever `add_generation_prompt` says: the generation prompt is empty, the prompt ends
      in `<think>`): the output starts inside it (`Build.reasoning_open`).

    Either way the block is `Build.prompt_opened` (a `repair:prompt_reasoning` of the relaxed parser, so that
    the recovery reads every output with it): one that never closes the block is reasoning, as a stream shows
    it while it is open.

    Where the prompt opens none, a block the template writes only from typed content (`TemplateAnalysis.
    typed_reasoning`: Apertus's `<|inner_prefix|>...<|inner_suffix|>`) is read where the output writes it
    (`Build.typed_reasoning`).

    A call opener the template's tool instructions spell otherwise than its calls render it is read in both
    spellings (`TemplateAnalysis.instructed_opener`, `ChatBuilder.also_spelled`)."""
    if analysis.instructed_opener is not None:
        b.p.also_spelled(*analysis.instructed_opener)
    if b.inputs.reasoning_format == "none":
        return _build(analysis, b)
    r = analysis.reasoning
    block = r if r.start and r.end else analysis.prompt_reasoning
    if block is not None:
        opener = _trim(block.start)
        if _trim(b.generation_prompt).endswith(opener):
            if block is r:
                return _build(analysis, b)  # (the C++ reads it: its parser's prefix stops before the opener)
            return _build(replace(analysis, reasoning=block), replace(b, extract_reasoning=True, prompt_opened=True))
        if opener not in b.generation_prompt and _trim(b.prompt).endswith(opener):
            return _build(replace(analysis, reasoning=block),
                          replace(b, extract_reasoning=True, prompt_opened=True, reasoning_open=True))
    return _build(analysis, replace(b, typed_reasoning=analysis.typed_reasoning))


def _reasoning(b: Build, a: TemplateAnalysis) -> P:
    """The reasoning parser every body starts with: llama.cpp's (`_cpp_reasoning`), through the builder's hook
    where the relaxed parser reads more (`ChatBuilder.derived_reasoning`)."""
    r, fmt = a.reasoning, a.tools.format
    # (without tools too: a model that writes a call while reasoning has ended its reasoning there, and the
    # call's text, which no tool can answer, is content)
    markers = tuple(m for m in (_trim(fmt.section_start), _trim(fmt.per_call_start)) if m) \
        if fmt.mode is not ToolFormat.NONE else ()
    if b.typed_reasoning is not None:  # (a relaxed build's: only the reasoning parser reads it)
        typed = b.typed_reasoning
        block = DerivedReasoning(typed.start, typed.end, shown=True, read=True, extracted=True, call_markers=markers,
                                 typed=True)
        return b.p.derived_reasoning(lambda: _cpp_reasoning(b, a), block)
    read = b.extract_reasoning and r.mode in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) and bool(r.end)
    block = DerivedReasoning(r.start, r.end, shown=r.mode is not ReasoningMode.NONE, read=read,
                             extracted=b.inputs.reasoning_format != "none", call_markers=markers,
                             prompt_opened=b.prompt_opened, open_before_prompt=b.reasoning_open)
    return b.p.derived_reasoning(lambda: _cpp_reasoning(b, a), block)


def _cpp_reasoning(b: Build, a: TemplateAnalysis) -> P:
    p, r = b.p, a.reasoning
    if not b.extract_reasoning or r.mode not in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) or not r.end:
        return p.eps()
    if r.start:  # (node creation order as in the C++: grammar rule names embed node ids)
        return p.optional(p.optspace(r.start) + p.reasoning(p.until(_trim(r.end))) + p.optspace(r.end))
    return p.optional(p.reasoning(p.until(_trim(r.end))) + p.optspace(r.end))


def _content(d: _Derived) -> P:
    p, c = d.p, d.a.content
    if c.is_always_wrapped():
        if d.b.extract_reasoning:
            return d.reasoning + c.start + p.content(p.until(c.end)) + c.end + p.end()
        return p.content(p.until(c.start)) + c.start + p.content(p.until(c.end)) + c.end + p.end()
    return d.reasoning + p.content(p.rest()) + p.end()


def _optional_wrapped(d: _Derived) -> P:
    p, c = d.p, d.a.content
    if c.is_always_wrapped():
        return p.optional(c.start + p.content(p.until(c.end)) + c.end)
    return p.eps()


def _tools(d: _Derived) -> P:
    if d.a.call_form is not None:
        return _pythonic(d, d.a.call_form)
    match d.a.tools.format.mode:
        case ToolFormat.JSON_NATIVE:
            return _json_native(d)
        case ToolFormat.TAG_WITH_JSON:
            return _tag_with_json(d)
        case ToolFormat.TAG_WITH_TAGGED:
            return _tag_with_tagged(d)
        case ToolFormat.NONE:
            # The template can call tools but the analyzer found no format: the C++ logs and parses nothing.
            return d.p.eps()


def _json_native(d: _Derived) -> P:
    p, fmt, b = d.p, d.a.tools.format, d.b
    name_field, args_field, nested = fmt.name_field, fmt.args_field, d.a.nested_call
    if nested is not None:  # (beyond the C++, which takes the member for the arguments)
        name_field, args_field = f"{nested.member}.{nested.name_key}", f"{nested.member}.{nested.args_key}"
    elif fmt.function_field and fmt.function_field != "function" and "." not in name_field:
        name_field = f"{fmt.function_field}.{name_field}"
        args_field = f"{fmt.function_field}.{args_field}"
    common: dict[str, Any] = {
        "name_key": name_field, "args_key": args_field, "array_wrapped": fmt.tools_array_wrapped,
        "function_is_key": fmt.fun_name_is_key, "call_id_key": fmt.id_field, "gen_call_id_key": fmt.gen_id_field,
        "parameters_order": list(fmt.parameter_order), "accept_openai_wrapper": fmt.openai_wrapper_trigger,
        "separator": d.a.call_separator, "constant_members": nested.constants if nested is not None else ()}
    per_call = not fmt.section_start and bool(fmt.per_call_start)
    start, end = (fmt.per_call_start, fmt.per_call_end) if per_call else (fmt.section_start, fmt.section_end)
    if per_call:
        single = p.standard_json_tools(start, end, b.inputs.tools, b.parallel, b.required, **common)
        tools = p.trigger_rule("tool-calls", p.one_or_more(single + p.space()))
    else:
        tools = p.standard_json_tools(start, end, b.inputs.tools, b.parallel, b.required, **common)
        if start.strip(C_SPACE):  # (a section written again holds a call: it is read as a required one)
            tools = p.call_sections(tools, lambda: p.standard_json_tools(start, end, b.inputs.tools, b.parallel,
                                                                         True, **common), [start])
    if d.a.content.is_always_wrapped():
        return d.reasoning + _optional_wrapped(d) + tools + p.end()
    # (a bare array of calls begins with its bracket: llama.cpp stops the content at the first `{`, inside it)
    tool_start = fmt.section_start or fmt.per_call_start or (_BARE_JSON_LIST if fmt.tools_array_wrapped else "{")
    if start.strip():
        # (a call the model wrote without its opener: relaxed, content stops where one follows)
        content = p.content_until_calls([tool_start], _bare_json_openers(d), lambda: p.standard_json_tools(
            start, end, b.inputs.tools, b.parallel, True, **common))
    else:
        p.calls_begin_at(_bare_json_openers(d))  # calls without markers: each begins so
        content = p.content(p.until(tool_start))
    return d.reasoning + p.optional(content) + tools + p.end()


def _bare_json_openers(d: _Derived) -> list[str]:
    """How a JSON call begins without its opener: its first key (`{"name"`), or the function name when the
    name is the key (`{"get_weather"`); or OpenAI's wrapper around it (`{"type"`), which the relaxed parser
    reads (`loose_json_calls`)."""
    fmt = d.a.tools.format
    if fmt.fun_name_is_key:
        keys = [f.name for f in functions(d.b.inputs.tools)]
    else:
        first = _first_json_key(fmt)
        keys = list(dict.fromkeys([first, "type"])) if first else []
    lead = "[" if fmt.tools_array_wrapped else ""
    return [f'{lead}{{"{k}"' for k in keys]


def _first_json_key(fmt: ToolFormatAnalysis) -> str:
    """The key a JSON call's object opens with (the outer one of a nested `function.name`), or ""."""
    first = fmt.parameter_order[0] if fmt.parameter_order else fmt.name_field
    return first.split(".")[0]


def _bare_json_triggers(fmt: ToolFormatAnalysis) -> tuple[tuple[GrammarTrigger, ...], GrammarTrigger | None]:
    """The lazy grammar's triggers for JSON calls written with no marker (`{"name": "get_weather", ...}`): the
    opening `_bare_json_openers` reads a call at, as a pattern that allows JSON whitespace where the grammar
    does (`space`), and, where the object opens with the name, the tool's name too, so that a JSON object in
    the content that calls no tool does not wake the grammar. Returns (triggers, per-tool trigger)."""
    s = SPACE_PATTERN  # (a trigger that matched more whitespace would wake a grammar that rejects it)
    if fmt.fun_name_is_key:
        return (), pattern(rf'(\{{{s}"{{name}}"{s}:)')
    first = _first_json_key(fmt)
    if not first:
        return (), None
    if first != fmt.name_field:  # (the name comes later in the object: its first key is all a pattern has)
        return (pattern(rf'(\{{{s}"{re.escape(first)}"{s}:)'),), None
    # the grammar's optional `"type": "function",` before the name (`accept_openai_wrapper`)
    wrapper = rf'(?:"type"{s}:{s}"function"{s},{s})?' if fmt.openai_wrapper_trigger else ""
    return (), pattern(rf'(\{{{s}{wrapper}"{re.escape(first)}"{s}:{s}"{{name}}")')


def _func(d: _Derived, name: str | P, call_id_section: P, have_call_id: bool, args: P, atomic_peek: P | None,
          name_suffix: Callable[[str], P] | None = None) -> P:
    """A call of the tool `name` (or whose name `name` reads: `undeclared_call`). `name_suffix` makes the marker
    after the name (`call_part_marker`; `arguments_marker` where JSON arguments follow it)."""
    p, tools = d.p, d.a.tools
    fn, fmt = tools.function, tools.format
    # Nodes are made in the order GCC builds each C++ expression (the operands of `a + b` right to left), as
    # grammar rule names embed node ids: a new node on the right is made before the left's.
    name_node = p.tool_name(p.literal(name)) if isinstance(name, str) else name
    prefix: P | str = fn.name_prefix
    if d.a.call_id_in_name_prefix is not None:  # (beyond the C++: the id the template writes before the prefix)
        prefix = d.a.call_id_in_name_prefix[0] + p.tool_id(p.chars(call_id_word(fn.name_prefix))) + fn.name_prefix
    elif fn.name_prefix.strip(C_SPACE):
        # (relaxed, `joined_markers`: the prefix's markers with any whitespace between them, or none, as models
        # write on one line markers the template breaks)
        prefix = p.joined_markers(fn.name_prefix)
    # (relaxed, `call_part_marker`: the whitespace of the name's suffix and of the call's close any, or none)
    open_ = p.tool_open(prefix + name_node + (name_suffix or p.call_part_marker)(fn.name_suffix))
    p.eps()  # `func_parser` is default-initialised in the C++
    matched_atomic = True
    if fn.args_separator:
        separator = p.literal(fn.args_separator)
        open_ = open_ + p.space() + separator
    space = p.space()
    if fn.name_suffix:
        func = open_ + call_id_section + space + args
    elif have_call_id:
        func = p.atomic(open_ + call_id_section) + space + args
    elif atomic_peek is not None:
        func = p.atomic(open_ + call_id_section + space + atomic_peek) + args
    else:
        func = open_ + call_id_section + space + args
        matched_atomic = False
    if fn.close:
        close = p.tool_close(p.call_part_marker(fn.close))
        func = func + p.space() + close
    elif fmt.per_call_end:
        # Close only once the end marker is visible, so a half-seen "</" does not close the call early.
        # (relaxed, space_then: whitespace before the end marker, where the template writes none)
        closer = fmt.per_call_end, fmt.per_call_start
        peek = p.peek(p.space() + p.block_closer(*closer)) if tools.arguments.tolerate_intertag_whitespace \
            else p.peek(p.space_then(p.block_closer(*closer)))
        func = func + p.tool_close(peek)
    else:
        func = func + p.tool_close(p.space())  # a close node, so the mapper closes the argument braces
    if not matched_atomic:
        func = p.atomic(func)
    return func


def _call_id_section(d: _Derived, inside: bool) -> tuple[P, bool]:
    p, cid, args = d.p, d.a.tools.call_id, d.a.tools.arguments
    none = p.eps()  # default-initialised in the C++ whether or not a call id follows (node ids: rule names)
    if cid.pos is CallIdPosition.BETWEEN_FUNC_AND_ARGS and cid.prefix and (cid.suffix or args.start):
        if cid.suffix:
            if inside:
                return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix)) + cid.suffix), True
            return p.optional(cid.prefix + p.tool_id(p.call_id_text(cid.suffix))) + p.arguments_marker(cid.suffix), True
        return p.optional(cid.prefix + p.tool_id(p.until(args.start))), True
    return none, False


def _tag_with_json(d: _Derived) -> P:
    p, tools, b = d.p, d.a.tools, d.b
    fmt, args_m = tools.format, tools.arguments
    choice = p.choice()
    for f in functions(b.inputs.tools):
        call_id_section, have_call_id = _call_id_section(d, inside=False)
        args = p.fenced_arguments(p.tool_args(p.schema(p.arguments_value(), f"tool-{f.name}-schema", f.schema)))
        if args_m.start:
            args = p.literal(args_m.start) + args
        if args_m.end:
            args = args + p.literal(args_m.end)
        peek = p.peek(p.literal(args_m.start)) if args_m.start else None
        choice = choice | p.rule(f"tool-{f.name}", _func(d, f.name, call_id_section, have_call_id, args, peek,
                                                         p.arguments_marker))

    def undeclared(name: P) -> P:
        call_id_section, have_call_id = _call_id_section(d, inside=False)
        args = p.fenced_arguments(p.tool_args(p.arguments_value()))
        if args_m.start:
            args = p.literal(args_m.start) + args
        if args_m.end:
            args = args + p.literal(args_m.end)
        peek = p.peek(p.literal(args_m.start)) if args_m.start else None
        return _func(d, name, call_id_section, have_call_id, args, peek, p.arguments_marker)

    if (tools.function.name_suffix + args_m.start).strip(C_SPACE):
        # (relaxed: a call to a tool the request does not declare, where a marker ends its name,
        # `NAME<｜tool▁sep｜>{...}`)
        for call in p.undeclared_call(undeclared):
            choice = choice | p.rule("tool-undeclared", call)  # (a rule of its own, as each tool's call)
    p.eps()  # `tool_calls` is default-initialised in the C++ (node ids: rule names)
    if fmt.per_call_start:
        # (relaxed, space_then: whitespace before the call's end marker, where the template writes none)
        wrapped = p.opened(fmt.per_call_start, p.grouped_calls(choice)) \
            + p.space_then(p.block_closer(fmt.per_call_end, fmt.per_call_start))
        if b.parallel:
            calls = p.trigger_rule("tool-call", wrapped + p.zero_or_more(p.space() + wrapped))
        else:
            calls = p.trigger_rule("tool-call", p.extra_calls(wrapped, wrapped))
        if fmt.section_start:
            calls = p.trigger_rule("tool-calls", p.call_opener(fmt.section_start) + p.space() + calls + p.space()
                                   + (p.literal(fmt.section_end) if fmt.section_end else p.end()))
    elif b.parallel:
        calls = p.trigger_rule("tool-call", p.opened(fmt.section_start, choice)
                               + p.zero_or_more(_between_calls(d) + choice) + fmt.section_end)
    else:
        calls = p.trigger_rule("tool-call", p.extra_calls(p.opened(fmt.section_start, choice), choice)
                               + fmt.section_end)
    return _after_content(d, calls)


def _between_calls(d: _Derived) -> P:
    """What separates two calls in one section: what the template writes there (`call_separator`), else
    llama.cpp's `, `."""
    p, sep = d.p, d.a.call_separator
    return p.call_separator(p.literal(", ") if sep is None else p.written_separator(sep))


def _bare_tag_openers(d: _Derived) -> list[str]:
    """How a tagged call begins without its opener: the function name's prefix and the name (`<function=f`), or
    the name and what follows it (`f[CALL_ID]`) when the name stands alone; and, where names follow the opener
    at once, a JSON call object naming a tool (the family's JSON dialect, which the relaxed calls read)."""
    return [*_bare_tagged_openers(d), *_bare_json_call_openers(d)]


def _bare_json_call_openers(d: _Derived) -> list[str]:
    fn = d.a.tools.function
    if fn.name_prefix.strip(C_SPACE) or d.a.tools.format.mode is not ToolFormat.TAG_WITH_TAGGED:
        return []
    return [f'{{"name":{space}"{f.name}"' for f in functions(d.b.inputs.tools) for space in ("", " ")]


def _bare_tagged_openers(d: _Derived) -> list[str]:
    tools = d.a.tools
    fmt, fn, cid = tools.format, tools.function, tools.call_id
    if fmt.section_start.strip(C_SPACE) and fmt.per_call_start.strip(C_SPACE):
        return [fmt.per_call_start]  # the section opener missing: the first call's marker starts the calls
    names = [f.name for f in functions(d.b.inputs.tools)]
    if fn.name_prefix.strip(C_SPACE):
        return [fn.name_prefix.lstrip(C_SPACE) + name for name in names]
    # what the template writes after the name, up to the first argument's marker: `\n<arg_key>`, `[CALL_ID]`
    a = tools.arguments
    follow = fn.name_suffix + (cid.prefix if cid.pos is CallIdPosition.BETWEEN_FUNC_AND_ARGS else "")
    for part in (fn.args_separator, a.start, a.name_prefix):
        if follow.strip(C_SPACE):
            break
        follow += part
    return [name + follow for name in names] if follow.strip(C_SPACE) else []


def _after_content(d: _Derived, calls: P) -> P:
    """Reasoning, then content up to the first call marker, then the calls (optional unless required)."""
    p, fmt = d.p, d.a.tools.format
    marker = fmt.section_start or fmt.per_call_start
    section = p.call_sections(calls, lambda: calls, [marker])
    section = section if d.b.required else p.optional(section)
    if marker.strip(C_SPACE):
        # (a call the model wrote without its opener: relaxed, content stops where one follows)
        content = p.content_until_calls([marker], _bare_tag_openers(d), lambda: calls)
    else:
        content = p.content(p.until(marker) if marker else p.eps())
    return d.reasoning + p.optional(content) + section + p.end()


def _typed_arg(d: _Derived, f: Function, param: Parameter, typed: TypedArgument) -> P:
    """Beyond the C++: an argument that is no string, where the template writes it otherwise than a string
    (`TemplateAnalysis.typed_argument`): its opener and closer, the value as JSON writes it (`max_results:3`,
    `string="false">3`), an object or a list also in the format's own syntax where strings alone are quoted
    (`cfg:{k:<escape>v<escape>}`)."""
    p, a = d.p, d.a.tools.arguments
    value = p.tool_arg_json_value(p.schema(p.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema,
                                           pointer=param.pointer))
    if typed.quote and param.types & {"object", "array"}:
        value = value | p.syntax_value(typed.quote)
    opener = p.tool_arg_open(a.name_prefix + p.tool_arg_name(p.literal(param.name)) + typed.opener)
    return p.tool_arg(opener + value + p.tool_arg_close(p.literal(typed.closer)))


def _tagged_args(d: _Derived, f: Function, until_suffix: P) -> tuple[P, bool]:
    """One function's tagged arguments (required in order, the schema's or, where the template sorts them, their
    names'; then optional ones), and whether any is required."""
    p, a, typed = d.p, d.a.tools.arguments, d.a.typed_argument

    def arg(f: Function, param: Parameter) -> P:
        name = f"tool-{f.name}-arg-{param.name}"
        if typed is not None and param.types and not param.may_be_string:
            return p.rule(name, p.string_marked_value(_typed_arg(d, f, param, typed), lambda: as_string(f, param)))
        arg = p.rule(name, as_string(f, param))
        if param.may_be_string or a.value_prefix:
            return arg
        # (relaxed: a typed value without the quotes the template puts around string values)
        return p.typed_value_unquoted(arg, f, param, a.name_prefix, a.name_suffix, a.value_suffix)

    def as_string(f: Function, param: Parameter) -> P:
        """The argument as the C++ reads it: its value between the markers the analysis found around a string."""
        # Nodes in the order GCC builds the C++ expression `tool_arg(open + value_prefix + value)`, operands right
        # to left (grammar rule names embed node ids): the value, its close first, then the opener.
        close = p.tool_arg_close(p.literal(a.value_suffix))
        if param.may_be_string:
            value = p.ac(p.tool_arg_string_value(until_suffix) + close, a.value_suffix)
        else:
            value = p.tool_arg_json_value(p.schema(p.json(), f"tool-{f.name}-arg-{param.name}-schema", f.schema,
                                                   pointer=param.pointer)) + close
        opener = p.tool_arg_open(a.name_prefix + p.tool_arg_name(p.literal(param.name)) + a.name_suffix)
        return p.tool_arg(opener + a.value_prefix + value)

    required, optional = p.args_by_requirement(f, arg, by_name=d.a.arguments_sorted)
    return p.args_in_order(required, optional, d.a.argument_separator), bool(required)


def _tagged_markers(d: _Derived) -> TaggedMarkers:
    tools, typed = d.a.tools, d.a.typed_argument
    fn, a, fmt = tools.function, tools.arguments, tools.format
    typed_suffix = typed.opener if typed is not None and typed.closer.strip(C_SPACE) == a.value_suffix.strip(C_SPACE) \
        else ""
    return TaggedMarkers(fn.name_prefix, fn.name_suffix + fn.args_separator, a.name_prefix, a.name_suffix + a.value_prefix,
                         a.value_suffix, fn.close, fmt.per_call_end or fmt.section_end, fmt.per_call_start,
                         typed_suffix)


def _tag_with_tagged(d: _Derived) -> P:
    p, tools, b = d.p, d.a.tools, d.b
    fmt, a = tools.format, tools.arguments
    until_suffix = p.rule("until-suffix", p.until(a.value_suffix))

    def strict_choice() -> P:
        choice = p.choice()
        for f in functions(b.inputs.tools):
            seq, any_required = _tagged_args(d, f, until_suffix)
            if a.start:
                seq = p.literal(a.start) + seq
            if a.end:
                seq = seq + p.literal(a.end)
            call_id_section, have_call_id = _call_id_section(d, inside=True)
            peek = p.peek(p.literal(a.name_prefix)) if a.name_prefix and any_required else None
            choice = choice | p.rule(f"tool-{f.name}", _func(d, f.name, call_id_section, have_call_id, seq, peek))
        return choice

    markers = _tagged_markers(d)
    loose = markers.readable and not (a.start or a.end) \
        and tools.call_id.pos is not CallIdPosition.BETWEEN_FUNC_AND_ARGS
    choice = p.tagged_call_choice(strict_choice, markers if loose else None, functions(b.inputs.tools),
                                  lambda param: not param.may_be_string)
    p.eps()  # `tool_calls` is default-initialised in the C++ (node ids: rule names)
    if fmt.per_call_start:
        wrapped = p.opened(fmt.per_call_start, p.space()) + p.grouped_calls(choice) + p.space() \
            + p.block_closer(fmt.per_call_end, fmt.per_call_start)
        if b.parallel:
            calls = p.trigger_rule("tool-call", wrapped + p.zero_or_more(p.space() + wrapped) + p.space())
        else:
            calls = p.trigger_rule("tool-call", p.extra_calls(wrapped, wrapped) + p.space())
        if fmt.section_start:
            calls = p.trigger_rule("tool-calls", p.call_opener(fmt.section_start) + p.space() + calls + p.space()
                                   + (p.literal(fmt.section_end) + p.space() if fmt.section_end else p.end()))
        elif fmt.section_end:
            # (only the calls read from where the needles sit have this: what the template writes after the last
            # call, where the model hands over to the tool; a server may have stopped on it, so it may be absent)
            calls = p.trigger_rule("tool-calls", calls + p.optional(p.literal(fmt.section_end) + p.space()))
    elif b.parallel:
        calls = p.trigger_rule("tool-call", p.opened(fmt.section_start, p.space()) + choice
                               + p.zero_or_more(_between_calls(d) + choice) + p.space()
                               + fmt.section_end)
    else:
        calls = p.trigger_rule("tool-call", p.opened(fmt.section_start, p.space()) + p.extra_calls(choice, choice)
                               + p.space() + fmt.section_end)
    return _after_content(d, calls)


# Where a bare JSON array of calls begins, as templates render it.
_BARE_JSON_LIST = "[{"

# Where a bare list of Python calls begins (`[get_weather(`): the lazy grammar's trigger when no marker opens it.
_BARE_PYTHON_LIST = r"(\[\s*[A-Za-z_][A-Za-z0-9_.\-]*\()"


def _pythonic(d: _Derived, form: CallForm) -> P:
    """Python calls (analysis/forms.py): content up to the calls' opener (the section marker, else the first
    call's `[name(`), then the calls, in their section when the template writes one."""
    p, b = d.p, d.b
    calls = p.python_style_tool_calls(b.inputs.tools, b.parallel, allow_json_literals=True, form=form)
    # how a readable call list begins without a section marker: `[get_weather(` (or `get_weather(`)
    bare = [("[" if form.list_wrapped else "") + f.name + "(" for f in functions(b.inputs.tools)]
    if form.section_start:
        section = p.opened(form.section_start, p.space() + calls) + p.space()
        if form.section_end:
            section = section + p.literal(form.section_end) + p.space()
    else:
        section = calls + p.space()
    calls = p.trigger_rule("tool-calls", section)
    markers = [form.section_start] if form.section_start else bare
    if not form.section_start.strip(C_SPACE):
        p.calls_begin_at(bare)  # calls without a marker: each list begins so
    if not form.section_start.strip(C_SPACE) and form.list_wrapped and bare:
        content = p.content_until_call_list(markers, bare, lambda: calls)
    elif form.section_start or bare:
        # (relaxed: calls written without the section marker; content stops where they follow)
        content = p.content_until_calls(markers, bare if form.section_start.strip(C_SPACE) else [], lambda: calls)
    else:
        content = p.content(p.rest())
    sections = p.call_sections(calls, lambda: calls, markers)
    return d.reasoning + p.optional(content) + (sections if b.required else p.optional(sections)) + p.end()
