"""Request + template -> ChatParams: prompt, parser, grammar and triggers (`common_chat_templates_apply`).

Order of work, as in llama.cpp's `common_chat_templates_apply_jinja`: convert the request to the message and
tool JSON templates see, apply the message workarounds the template's capabilities call for, route to a
specialised handler if one claims the template, otherwise analyse the template (cached per source) and build
the PEG parser from the analysis (`build_parser`), then the GBNF grammar from the parser.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import IntEnum
from typing import Any

from autoparser.chat.builder import ChatBuilder
from autoparser.chat.mapper import peg_parse
from autoparser.chat.request import (
    ChatRequest,
    Continuation,
    ToolChoice,
    message_to_oaicompat,
    normalize_content_caps,
    render_content,
    tools_to_oaicompat,
)
from autoparser.chat.stream import StreamParser
from autoparser.errors import AnalysisError, AutoparserError
from autoparser.peg.arena import Arena
from autoparser.peg.builder import P
from autoparser.peg.serialize import save
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatFormat, ChatMessage


class TriggerType(IntEnum):
    TOKEN = 0
    WORD = 1
    PATTERN = 2
    PATTERN_FULL = 3


@dataclass(frozen=True)
class GrammarTrigger:
    type: TriggerType
    value: str
    token: int = -1

    def to_dict(self) -> dict[str, Any]:
        """The C++ record shape: `token` only for TOKEN triggers."""
        out: dict[str, Any] = {"type": int(self.type), "value": self.value}
        if self.type == TriggerType.TOKEN:
            out["token"] = self.token
        return out


@dataclass(frozen=True)
class ChatParams:
    """Everything a server needs for one request: the prompt to feed, how to constrain and how to parse."""

    format: ChatFormat = ChatFormat.CONTENT_ONLY
    prompt: str = ""
    generation_prompt: str = ""
    parser: Arena | None = None
    grammar: str = ""
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: tuple[str, ...] = ()
    message_delimiters: tuple[tuple[str, str], ...] = ()
    messages: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)  # as rendered (for reconstruction)
    tools: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    handler: str = "autoparser"

    @property
    def parser_json(self) -> str:
        """The parser serialised like the C++ `common_chat_params::parser`."""
        return save(self.parser) if self.parser is not None else ""

    def parse(self, text: str | bytes, *, is_partial: bool = False) -> ChatMessage:
        """Parse model output (generation prompt prepended internally). Mismatch -> ParseError."""
        return peg_parse(self.parser, text, is_partial=is_partial, generation_prompt=self.generation_prompt,
                         format=self.format)

    def stream(self, *, gen_tool_call_id: Callable[[], str] | None = None) -> StreamParser:
        """An incremental parser for this request's output, fed chunk by chunk (see chat/stream.py)."""
        return StreamParser(self.parser, generation_prompt=self.generation_prompt, format=self.format,
                            gen_tool_call_id=gen_tool_call_id)

    def to_dict(self) -> dict[str, Any]:
        """The fields the C++ test data records under `cpp` (for comparison and snapshots)."""
        return {
            "format": self.format.value,
            "prompt": self.prompt,
            "generation_prompt": self.generation_prompt,
            "grammar": self.grammar,
            "grammar_lazy": self.grammar_lazy,
            "grammar_triggers": [t.to_dict() for t in self.grammar_triggers],
            "preserved_tokens": list(self.preserved_tokens),
            "additional_stops": list(self.additional_stops),
            "thinking_start_tag": self.thinking_start_tag,
            "thinking_end_tags": list(self.thinking_end_tags),
        }


@dataclass(frozen=True)
class GenerationInputs:
    """`generation_params`: the request after conversion and workarounds, as handlers and the generator see it."""

    request: ChatRequest
    messages: tuple[dict[str, Any], ...]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool
    continuation: Continuation
    continue_msg: Mapping[str, Any] | None
    extra_context: dict[str, Any]
    now: datetime | None

    @property
    def tool_choice(self) -> ToolChoice:
        return self.request.tool_choice

    @property
    def parallel_tool_calls(self) -> bool:
        return self.request.parallel_tool_calls

    @property
    def reasoning_format(self) -> str:
        return self.request.reasoning_format

    @property
    def enable_thinking(self) -> bool:
        return self.request.enable_thinking

    @property
    def json_schema(self) -> Any:
        return self.request.json_schema

    @property
    def has_continuation(self) -> bool:
        """`generation_params::has_continuation`: continuing a message that is not empty (the role alone
        does not count, as in `common_chat_msg::empty`)."""
        msg = self.continue_msg
        if self.continuation == Continuation.NONE or not msg:
            return False
        return any(msg.get(key) for key in ("content", "tool_calls", "reasoning_content", "tool_name", "name",
                                            "tool_call_id"))


@functools.lru_cache(maxsize=64)
def _template(source: str) -> ChatTemplate:
    return ChatTemplate(source)


@functools.lru_cache(maxsize=64)
def cached_caps(source: str) -> Any:
    """The template's capabilities, probed once per source (generate() and the corpus artefacts share it)."""
    from autoparser.template.caps import template_caps

    return template_caps(_template(source))


@functools.lru_cache(maxsize=64)
def cached_analysis(source: str) -> Any:
    """The (non-strict) template analysis, run once per source."""
    from autoparser.analysis.analyzer import analyze_template

    return analyze_template(_template(source), caps=cached_caps(source))


_UNSET: Any = object()


def _context(inputs: GenerationInputs, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    ctx = dict(inputs.extra_context)
    if extra:
        ctx.update(extra)
    return ctx


def render_prompt(tmpl: ChatTemplate, inputs: GenerationInputs, *, add_generation_prompt: bool | None = None,
                  messages: Any = None, tools: Any = _UNSET, extra: Mapping[str, Any] | None = None) -> str:
    """`common_chat_template_direct_apply(_impl)`: C++ context rules, empty bos/eos.

    Handlers that rewrite messages or tools pass them as overrides; `extra` adds context variables.
    """
    return tmpl.render(list(inputs.messages if messages is None else messages),
                       tools=inputs.tools if tools is _UNSET else tools,
                       add_generation_prompt=inputs.add_generation_prompt if add_generation_prompt is None
                       else add_generation_prompt,
                       enable_thinking=inputs.enable_thinking, extra_context=_context(inputs, extra),
                       now=inputs.now, cpp_context=True)


def generation_prompt(tmpl: ChatTemplate, inputs: GenerationInputs, *, messages: Any = None, tools: Any = _UNSET,
                      extra: Mapping[str, Any] | None = None) -> str:
    """The suffix `add_generation_prompt` adds (continuation forced off), byte-prefix diff as in the C++."""
    return tmpl.generation_prompt(list(inputs.messages if messages is None else messages),
                                  tools=inputs.tools if tools is _UNSET else tools,
                                  enable_thinking=inputs.enable_thinking, extra_context=_context(inputs, extra),
                                  now=inputs.now, cpp_context=True)


def prepare_inputs(source: str, request: ChatRequest) -> GenerationInputs:
    caps = cached_caps(source)
    raw = list(request.messages)
    if "You have access to the following functions in JSONSchema format" in source:
        # StepFun: leftover whitespace in history drives the model into loops; the C++ trims it.
        raw = [_trim_message(m) for m in raw]
    messages = [message_to_oaicompat(m) for m in raw]
    messages = normalize_content_caps(messages, caps.supports_string_content, caps.supports_typed_content)
    add_gp = request.add_generation_prompt
    continuation = request.continue_final_message
    continue_msg: Mapping[str, Any] | None = None
    if continuation != Continuation.NONE:
        add_gp = False
        if request.messages:
            continue_msg = request.messages[-1]
            messages = messages[:-1]
        if continuation == Continuation.AUTO and continue_msg is not None:
            continuation = Continuation.CONTENT
            if continue_msg.get("reasoning_content") and not continue_msg.get("content"):
                continuation = Continuation.REASONING
    if "<|channel|>" not in source:
        for m in messages:
            if m.get("role") == "developer":
                m["role"] = "system"
    if not caps.supports_system_role and messages and messages[0].get("role") == "system":
        first = messages.pop(0)
        if messages:
            messages[0] = dict(messages[0], content=f"{first.get('content', '')}\n{messages[0].get('content', '')}")
    if caps.supports_tool_calls:
        for m in messages:
            if "tool_calls" in m and "content" not in m:
                m["content"] = ""
    if caps.supports_object_arguments:
        for m in messages:
            for tc in m.get("tool_calls", []):
                args = tc["function"].get("arguments")
                if isinstance(args, str):
                    try:
                        tc["function"]["arguments"] = json.loads(args)
                    except json.JSONDecodeError as e:
                        raise AutoparserError(f"Failed to parse tool call arguments as JSON: {e}") from None
    now = request.now
    stamp = now or datetime.now()
    extra: dict[str, Any] = {"datetime": stamp.strftime("%b %d %Y"), "date_string": stamp.strftime("%d %b %Y")}
    extra.update(request.chat_template_kwargs)
    tools = tools_to_oaicompat(request.tools)
    if tools and request.tool_choice != ToolChoice.NONE and request.grammar:
        raise AutoparserError("Cannot specify grammar with tools")
    return GenerationInputs(request, tuple(messages), tools, add_gp, continuation, continue_msg, extra, now)


def _trim_message(m: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(m)
    ws = " \t\n\v\f\r"
    if isinstance(out.get("content"), str):
        out["content"] = out["content"].strip(ws)
    elif isinstance(out.get("content"), list):
        out["content"] = [dict(p, text=p["text"].strip(ws)) if p.get("type") == "text" else p for p in out["content"]]
    if isinstance(out.get("reasoning_content"), str):
        out["reasoning_content"] = out["reasoning_content"].strip(ws)
    return out


def generate(source: str, request: Mapping[str, Any] | ChatRequest) -> ChatParams:
    """Prompt, parser and grammar for one request on one template (`common_chat_templates_apply`)."""
    req = ChatRequest.from_dict(request)
    tmpl = _template(source)
    inputs = prepare_inputs(source, req)
    from autoparser.chat.handlers import find_handler

    handler = find_handler(source)
    if handler is not None:
        params = handler.generate(tmpl, inputs)
        return replace(params, messages=inputs.messages, tools=tuple(inputs.tools or ()), handler=handler.name)
    try:
        analysis = cached_analysis(source)
    except AutoparserError as e:
        raise AnalysisError(f"Unable to generate parser for this template. Automatic parser generation failed: {e}") \
            from e
    params = generate_from_analysis(tmpl, inputs, analysis)
    return replace(params, messages=inputs.messages, tools=tuple(inputs.tools or ()))


# --- the autoparser path ------------------------------------------------------------------------------------------

def _name(x: Any) -> str:
    return str(getattr(x, "name", x))


def _ws_trim(s: str) -> str:
    return s.strip(" \t\n\v\f\r")


def generate_from_analysis(tmpl: ChatTemplate, inputs: GenerationInputs, analysis: Any) -> ChatParams:
    from autoparser.gbnf.from_peg import arena_to_gbnf

    prompt = render_prompt(tmpl, inputs)
    gp = generation_prompt(tmpl, inputs)
    parser_gp = gp
    reasoning = analysis.reasoning
    if inputs.has_continuation:
        msg = inputs.continue_msg or {}
        if reasoning.start:
            cut = gp.find(reasoning.start)
            gp = (gp if cut < 0 else gp[:cut]) + reasoning.start + str(msg.get("reasoning_content") or "")
            if inputs.continuation == Continuation.CONTENT:
                gp += reasoning.end
        if inputs.continuation == Continuation.CONTENT:
            gp += render_content(msg)
        prompt += gp
    arena = build_parser(analysis, inputs, parser_gp)
    fmt = analysis.tools.format
    has_tools = _name(fmt.mode) != "NONE" and bool(inputs.tools)
    trigger_marker = fmt.section_start or fmt.per_call_start
    has_response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    include_grammar = has_response_format or (has_tools and (
        (inputs.tool_choice == ToolChoice.AUTO and bool(trigger_marker)) or inputs.tool_choice == ToolChoice.REQUIRED))
    grammar = ""
    lazy = False
    triggers: list[GrammarTrigger] = []
    if include_grammar:
        lazy = not has_response_format and inputs.tool_choice == ToolChoice.AUTO
        grammar = arena_to_gbnf(arena, lazy=lazy)
        if lazy:
            triggers.append(GrammarTrigger(TriggerType.WORD, trigger_marker))
            if fmt.openai_wrapper_trigger:
                triggers.append(GrammarTrigger(TriggerType.WORD, '{"type": "function",'))
    delimiters = []
    if analysis.assistant_start:
        delimiters.append(("assistant", analysis.assistant_start))
    if analysis.user_start:
        delimiters.append(("user", analysis.user_start))
    supports_thinking = _name(reasoning.mode) != "NONE"
    end_tag = _ws_trim(reasoning.end)
    return ChatParams(
        format=ChatFormat.PEG_NATIVE, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=tuple(triggers), preserved_tokens=tuple(analysis.preserved_tokens),
        additional_stops=tuple(analysis.additional_stops), supports_thinking=supports_thinking,
        thinking_start_tag=_ws_trim(reasoning.start) if supports_thinking else "",
        thinking_end_tags=(end_tag,) if supports_thinking and end_tag else (), message_delimiters=tuple(delimiters))


@dataclass
class _Ctx:
    p: ChatBuilder
    inputs: GenerationInputs
    analysis: Any
    extracting_reasoning: bool
    reasoning_parser: P


def build_parser(analysis: Any, inputs: GenerationInputs, generation_prompt: str) -> Arena:
    """`autoparser::build_parser`: reasoning, then response format / tools / content, after the prompt prefix."""
    p = ChatBuilder()
    reasoning = analysis.reasoning
    extracting = inputs.reasoning_format != "none" and _name(reasoning.mode) != "NONE"
    ctx = _Ctx(p, inputs, analysis, extracting, p.eps())
    ctx.reasoning_parser = _reasoning_parser(ctx)
    has_tools = bool(inputs.tools)
    has_response_format = isinstance(inputs.json_schema, dict) and bool(inputs.json_schema)
    pure_content = _name(reasoning.mode) == "NONE"
    if has_response_format:
        rf = p.rule("response-format", p.content(p.schema(p.json(), "response-format-schema", inputs.json_schema)))
        body = ctx.reasoning_parser + p.space() + p.choice([
            p.literal("```json") + p.space() + rf + p.space() + p.literal("```"),
            p.space() + rf + p.space(),
        ]) + p.end()
        pure_content = False
    elif has_tools and inputs.tool_choice != ToolChoice.NONE and analysis.caps.supports_tool_calls:
        body = _tools_parser(ctx)
        pure_content = False
    else:
        body = _content_parser(ctx)
    start = _ws_trim(reasoning.start)
    root = p.prefix(generation_prompt, start) + body if pure_content else p.prefix(generation_prompt, start) << body
    return p.build(root)


def _reasoning_parser(ctx: _Ctx) -> P:
    p, r = ctx.p, ctx.analysis.reasoning
    if not ctx.extracting_reasoning:
        return p.eps()
    if _name(r.mode) in ("TAG_BASED", "TOOLS_ONLY") and r.end:
        if r.start:
            return p.optional(p.optspace(r.start) + p.reasoning(p.until(_ws_trim(r.end))) + p.optspace(r.end))
        return p.optional(p.reasoning(p.until(_ws_trim(r.end))) + p.optspace(r.end))
    return p.eps()


def _always_wrapped(ctx: _Ctx) -> bool:
    c = ctx.analysis.content
    return _name(c.mode) == "ALWAYS_WRAPPED" and bool(c.start) and bool(c.end)


def _content_parser(ctx: _Ctx) -> P:
    p, c = ctx.p, ctx.analysis.content
    start: str = c.start
    end: str = c.end
    if _always_wrapped(ctx):
        if ctx.extracting_reasoning:
            return ctx.reasoning_parser + start + p.content(p.until(end)) + end + p.end()
        return p.content(p.until(start)) + start + p.content(p.until(end)) + end + p.end()
    return ctx.reasoning_parser + p.content(p.rest()) + p.end()


def _optional_wrapped(ctx: _Ctx) -> P:
    p, c = ctx.p, ctx.analysis.content
    if _always_wrapped(ctx):
        return p.optional(c.start + p.content(p.until(c.end)) + c.end)
    return p.eps()


def _tools_parser(ctx: _Ctx) -> P:
    mode = _name(ctx.analysis.tools.format.mode)
    if mode == "JSON_NATIVE":
        return _json_native(ctx)
    if mode == "TAG_WITH_JSON":
        return _tag_with_json(ctx)
    if mode == "TAG_WITH_TAGGED":
        return _tag_with_tagged(ctx)
    # The template can call tools but the analyzer found no format: the C++ logs and parses nothing.
    return ctx.p.eps()


def _json_native(ctx: _Ctx) -> P:
    p, fmt, inputs = ctx.p, ctx.analysis.tools.format, ctx.inputs
    name_field, args_field = fmt.name_field, fmt.args_field
    if fmt.function_field and fmt.function_field != "function" and "." not in name_field:
        name_field = f"{fmt.function_field}.{name_field}"
        args_field = f"{fmt.function_field}.{args_field}"
    force = inputs.tool_choice == ToolChoice.REQUIRED
    common = {"name_key": name_field, "args_key": args_field, "array_wrapped": fmt.tools_array_wrapped,
              "function_is_key": fmt.fun_name_is_key, "call_id_key": fmt.id_field, "gen_call_id_key": fmt.gen_id_field,
              "parameters_order": list(fmt.parameter_order), "accept_openai_wrapper": fmt.openai_wrapper_trigger}
    if not fmt.section_start and fmt.per_call_start:
        single = p.standard_json_tools(fmt.per_call_start, fmt.per_call_end, inputs.tools, inputs.parallel_tool_calls,
                                       force, **common)
        tools = p.trigger_rule("tool-calls", p.one_or_more(single + p.space()))
    else:
        tools = p.standard_json_tools(fmt.section_start, fmt.section_end, inputs.tools, inputs.parallel_tool_calls,
                                      force, **common)
    if _always_wrapped(ctx):
        return ctx.reasoning_parser + _optional_wrapped(ctx) + tools + p.end()
    tool_start = fmt.section_start or fmt.per_call_start or "{"
    return ctx.reasoning_parser + p.optional(p.content(p.until(tool_start))) + tools + p.end()


def _func_parser(ctx: _Ctx, name: str, call_id_section: P, have_call_id: bool, args: P,
                 atomic_peek: P | None) -> P:
    p, tools = ctx.p, ctx.analysis.tools
    fn, fmt = tools.function, tools.format
    # operand order as in the C++ expression `name_prefix + tool_name(literal(name)) + name_suffix`
    name_node = p.tool_name(p.literal(name))
    open_ = p.tool_open(fn.name_prefix + name_node + fn.name_suffix)
    matched_atomic = True
    if fn.args_separator:
        open_ = open_ + p.space() + p.literal(fn.args_separator)
    if fn.name_suffix:
        func = open_ + call_id_section + p.space() + args
    elif have_call_id:
        func = p.atomic(open_ + call_id_section) + p.space() + args
    elif atomic_peek is not None:
        func = p.atomic(open_ + call_id_section + p.space() + atomic_peek) + args
    else:
        func = open_ + call_id_section + p.space() + args
        matched_atomic = False
    if fn.close:
        func = func + p.space() + p.tool_close(p.literal(fn.close))
    elif fmt.per_call_end:
        # Close only once the end marker is visible, so a half-seen "</" does not close the call early.
        peek = p.peek(p.space() + p.literal(fmt.per_call_end)) if tools.arguments.tolerate_intertag_whitespace \
            else p.peek(p.literal(fmt.per_call_end))
        func = func + p.tool_close(peek)
    else:
        func = func + p.tool_close(p.space())  # a close node, so the mapper closes the argument braces
    if not matched_atomic:
        func = p.atomic(func)
    return func


def _functions(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [t["function"] for t in tools or [] if t.get("type") == "function" and "function" in t]


def _tool_parameters(function: Mapping[str, Any]) -> Any:
    params = function.get("parameters")
    if params is None or params == {}:
        return {"type": "object", "properties": {}}
    return params


def _call_id_section(ctx: _Ctx, inside: bool) -> tuple[P, bool]:
    p, tools = ctx.p, ctx.analysis.tools
    cid, args = tools.call_id, tools.arguments
    if _name(getattr(cid, "pos", getattr(cid, "position", "NONE"))) == "BETWEEN_FUNC_AND_ARGS" and cid.prefix \
            and (cid.suffix or args.start):
        if cid.suffix:
            if inside:
                return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix)) + cid.suffix), True
            return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix))) + cid.suffix, True
        return p.optional(cid.prefix + p.tool_id(p.until(args.start))), True
    return p.eps(), False


def _tag_with_json(ctx: _Ctx) -> P:
    p, tools, inputs = ctx.p, ctx.analysis.tools, ctx.inputs
    fmt, args_m = tools.format, tools.arguments
    choice = p.choice()
    for func in _functions(inputs.tools):
        name = func["name"]
        schema = _tool_parameters(func)
        call_id_section, have_call_id = _call_id_section(ctx, inside=False)
        args = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))
        if args_m.start:
            args = p.literal(args_m.start) + args
        if args_m.end:
            args = args + p.literal(args_m.end)
        peek = p.peek(p.literal(args_m.start)) if args_m.start else None
        choice = choice | p.rule(f"tool-{name}", _func_parser(ctx, name, call_id_section, have_call_id, args, peek))
    if fmt.per_call_start:
        wrapped = fmt.per_call_start + choice + fmt.per_call_end
        if inputs.parallel_tool_calls:
            calls = p.trigger_rule("tool-call", wrapped + p.zero_or_more(p.space() + wrapped))
        else:
            calls = p.trigger_rule("tool-call", wrapped)
        if fmt.section_start:
            calls = p.trigger_rule("tool-calls", p.literal(fmt.section_start) + p.space() + calls + p.space()
                                   + (p.literal(fmt.section_end) if fmt.section_end else p.end()))
    elif inputs.parallel_tool_calls:
        calls = p.trigger_rule("tool-call", fmt.section_start + choice + p.zero_or_more(", " + choice)
                               + fmt.section_end)
    else:
        calls = p.trigger_rule("tool-call", fmt.section_start + choice + fmt.section_end)
    if inputs.tool_choice != ToolChoice.REQUIRED:
        calls = p.optional(calls)
    marker = fmt.section_start or fmt.per_call_start
    before = p.until(marker) if marker else p.eps()
    return ctx.reasoning_parser + p.optional(p.content(before)) + calls + p.end()


def _schema_properties(schema: Any) -> list[tuple[str, Any, bool, str]]:
    """(name, property schema, required, JSON pointer) in schema order; the root must be an object schema."""
    if not isinstance(schema, Mapping):
        return []
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    required = set(schema.get("required") or [])
    return [(k, v, k in required, "/properties/" + k.replace("~", "~0").replace("/", "~1")) for k, v in props.items()]


def _may_be_string(schema: Any, root: Any) -> bool:
    from autoparser.gbnf.from_schema import compile_schema

    try:
        doc = compile_schema(root)
        node = doc.resolve_pointer(schema) if hasattr(doc, "resolve_pointer") else None
    except AutoparserError:
        return False
    if node is None:
        return False
    return bool(node.may_be_string())


def _tag_with_tagged(ctx: _Ctx) -> P:
    p, tools, inputs = ctx.p, ctx.analysis.tools, ctx.inputs
    fmt, a = tools.format, tools.arguments
    until_suffix = p.rule("until-suffix", p.until(a.value_suffix))
    choice = p.choice()
    for func in _functions(inputs.tools):
        name = func["name"]
        params = func.get("parameters")
        required_ps: list[P] = []
        optional_ps: list[P] = []
        for prop, _schema, required, pointer in _schema_properties(params):
            arg_name = p.tool_arg_name(p.literal(prop))
            opener = p.tool_arg_open(a.name_prefix + arg_name + a.name_suffix)
            head = opener + a.value_prefix
            if _may_be_string(pointer, params):
                value = p.ac(p.tool_arg_string_value(until_suffix) + p.tool_arg_close(p.literal(a.value_suffix)),
                             a.value_suffix)
            else:
                value = p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{prop}-schema", params,
                                                       pointer=pointer)) + p.tool_arg_close(p.literal(a.value_suffix))
            arg = p.tool_arg(head + value)
            named = p.rule(f"tool-{name}-arg-{prop}", arg)
            (required_ps if required else optional_ps).append(named)
        seq = p.eps()
        for i, rp in enumerate(required_ps):
            if i > 0:
                seq = seq + p.space()
            seq = seq + rp
        if optional_ps:
            any_opt = p.choice()
            for op in optional_ps:
                any_opt = any_opt | op
            seq = seq + p.repeat(p.space() + any_opt, 0, -1)
        if a.start:
            seq = p.literal(a.start) + seq
        if a.end:
            seq = seq + p.literal(a.end)
        call_id_section, have_call_id = _call_id_section(ctx, inside=True)
        peek = p.peek(p.literal(a.name_prefix)) if a.name_prefix and required_ps else None
        choice = choice | p.rule(f"tool-{name}", _func_parser(ctx, name, call_id_section, have_call_id, seq, peek))
    if fmt.per_call_start:
        wrapped = fmt.per_call_start + p.space() + choice + p.space() + fmt.per_call_end
        if inputs.parallel_tool_calls:
            calls = p.trigger_rule("tool-call", wrapped + p.zero_or_more(p.space() + wrapped) + p.space())
        else:
            calls = p.trigger_rule("tool-call", wrapped + p.space())
        if fmt.section_start:
            calls = p.trigger_rule("tool-calls", p.literal(fmt.section_start) + p.space() + calls + p.space()
                                   + (p.literal(fmt.section_end) + p.space() if fmt.section_end else p.end()))
    elif inputs.parallel_tool_calls:
        calls = p.trigger_rule("tool-call", fmt.section_start + p.space() + choice + p.zero_or_more(", " + choice)
                               + p.space() + fmt.section_end)
    else:
        calls = p.trigger_rule("tool-call", fmt.section_start + p.space() + choice + p.space() + fmt.section_end)
    if inputs.tool_choice != ToolChoice.REQUIRED:
        calls = p.optional(calls)
    marker = fmt.section_start or fmt.per_call_start
    before = p.until(marker) if marker else p.eps()
    return ctx.reasoning_parser + p.optional(p.content(before)) + calls + p.end()
