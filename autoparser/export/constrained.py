"""What a request's output may be, for the engines that constrain decoding with xgrammar structural tags (vLLM,
SGLang, TensorRT-LLM) and llguidance Lark grammars (vLLM's `guidance` backend, llama.cpp's `%llguidance`).

One pass over the template's analysis (the record llama.cpp's autoparser builds its parser from) gives a
`Constraint`: the reasoning block, and the tool calls as the template writes them -- the marker that starts
them (the trigger), each tool's call with its arguments under the tool's JSON schema, the markers that close
them. Two writers turn it into each engine's language (`to_structural_tag`, `to_lark`; `structural_tag` and
`lark_grammar` do both steps). Markers are written as the template writes them but for the whitespace around
them, which models vary and which both languages leave free (as the parser does). A hand-written format says
how it writes calls (`FormatSpec.call_tags`) or that they are as analysed (`calls_as_analysed`). Where the form
cannot be said (another hand-written format, Python calls standing bare or with unescaped strings, calls without
a marker to trigger on), `ExportError` says why in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.analysis.model import (
    CallForm,
    CallIdPosition,
    ReasoningMode,
    StringValues,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.analysis.tools import call_id_word
from autoparser.chat.constraint import (
    Alt,
    CallTags,
    Json,
    Lit,
    Many,
    Opt,
    Pattern,
    Piece,
    Seq,
    Space,
    Tag,
    Text,
    arguments_schema,
    by_kind,
    json_member,
    python_calls,
    value_schema,
)
from autoparser.chat.handlers import find_handler
from autoparser.chat.request import ToolChoice
from autoparser.chat.tools import Function, Parameter, functions, parameters
from autoparser.errors import ExportError
from autoparser.params import generate, strict_analysis
from autoparser.peg.nodes import C_SPACE
from autoparser.template.render import normalize_source
from autoparser.template.sandbox import time_budget

__all__ = ["Constraint", "constraint", "lark_grammar", "structural_tag", "to_lark", "to_structural_tag"]


@dataclass(frozen=True)
class Reasoning:
    start: str
    """"" where the generation prompt opened the block: the output starts inside it."""
    end: str
    required: bool


@dataclass(frozen=True)
class Calls:
    form: CallTags
    """How the calls are written."""
    at_least_one: bool
    """`tool_choice` required: the output is calls (xgrammar's reading of `at_least_one`)."""
    stop_after_first: bool


@dataclass(frozen=True)
class Constraint:
    """What one request's output may be: reasoning (or none), then text and calls as the template writes them
    (`calls` None: text only)."""
    reasoning: Reasoning | None
    calls: Calls | None


# --- from the analysis ----------------------------------------------------------------------------------------

def constraint(source: str, tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice | str = "auto",
               thinking: bool = True, parallel_tool_calls: bool = True) -> Constraint:
    """The constraint of a request (its tools, tool choice, thinking, parallel calls) on a template's output;
    ExportError where the template's form cannot be said."""
    try:
        choice = tool_choice if isinstance(tool_choice, ToolChoice) else ToolChoice[tool_choice.strip().upper()]
    except KeyError:
        raise ExportError(f"unknown tool_choice {tool_choice!r}: auto, required or none") from None
    with time_budget(phase="exporting"):
        return _constraint(normalize_source(source), list(tools), choice, thinking, parallel_tool_calls)


def structural_tag(source: str, tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice | str = "auto",
                   thinking: bool = True, parallel_tool_calls: bool = True) -> dict[str, Any]:
    """The xgrammar structural tag of a request on a template's output (vLLM's `response_format:
    {"type": "structural_tag", ...}`, SGLang); ExportError where the template's form cannot be said."""
    return to_structural_tag(constraint(source, tools, tool_choice, thinking, parallel_tool_calls))


def lark_grammar(source: str, tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice | str = "auto",
                 thinking: bool = True, parallel_tool_calls: bool = True) -> str:
    """The llguidance Lark grammar of a request on a template's output (vLLM's `guidance` backend, llama.cpp's
    `%llguidance`); ExportError where the template's form cannot be said."""
    return to_lark(constraint(source, tools, tool_choice, thinking, parallel_tool_calls))


def _constraint(source: str, tools: list[Mapping[str, Any]], tool_choice: ToolChoice, thinking: bool,
                parallel: bool) -> Constraint:
    handler = find_handler(source)
    if handler is not None and not handler.calls_as_analysed and handler.call_tags is None:
        # (its analysis may miss what the handler knows: `[ARGS]`, a call's index)
        raise ExportError(f"the format is hand-written ({handler.name}): its structural tag is not derived "
                          "yet (chat/handlers/)")
    analysis = strict_analysis(source).effective
    params = generate(source, {"messages": [{"role": "user", "content": "Hi"}], "tools": tools or None,
                               "reasoning_format": "auto", "enable_thinking": thinking})
    reasoning = _reasoning(analysis, params.generation_prompt)
    if handler is not None and handler.reasoning and handler.thinking_end_tags and (
            reasoning is None or any(reasoning.end in _t(end) and reasoning.end != _t(end)
                                     for end in handler.thinking_end_tags)):
        # (a handler's reasoning markers, where the analysis sees none, `[THINK]` in typed blocks, or only part of
        # the handler's end marker: of Kimi K3's `<|close|>think<|sep|>`, the `<|close|>` every section ends with)
        reasoning = _block(handler.thinking_start_tag, handler.thinking_end_tags[0], params.generation_prompt)
    if tool_choice is ToolChoice.NONE or not tools:
        return Constraint(reasoning, None)
    fns = functions(tools)
    if handler is not None and handler.call_tags is not None:
        form = handler.call_tags(fns, parallel)
    else:
        form = _analysed_calls(analysis, fns, parallel)
    return Constraint(reasoning, Calls(form, at_least_one=tool_choice is ToolChoice.REQUIRED,
                                       stop_after_first=not parallel))


def _analysed_calls(a: TemplateAnalysis, fns: list[Function], parallel: bool) -> CallTags:
    if a.call_form is None and a.tools.format.mode is ToolFormat.NONE:
        raise ExportError("the template shows no tool-call format")
    if a.call_form is not None:
        return _python_calls(a.call_form, fns, parallel)
    match a.tools.format.mode:
        case ToolFormat.JSON_NATIVE:
            return _json_calls(a, fns, parallel)
        case ToolFormat.TAG_WITH_JSON:
            return _tagged_calls(a, fns, parallel, json_arguments=True)
        case _:
            return _tagged_calls(a, fns, parallel, json_arguments=False)


def _python_calls(form: CallForm, fns: list[Function], parallel: bool) -> CallTags:
    """Python calls (`name(k="v", n=1)`, `python_call`) in the template's section, as a list or one per line;
    each value a Python literal, or JSON under the parameter's schema."""
    if form.strings is not StringValues.LITERAL:
        raise ExportError("string values are written without escaping (`city=Paris`, `\"say \"hi\"\"`): where one "
                          "ends is not expressed")
    start, end = _t(form.section_start), _t(form.section_end)
    if not start:
        raise ExportError("the calls stand bare (`[name(k=v)]`): their `[` is no trigger, free text holds it too")
    if not end:
        raise ExportError(f"the calls' section {start!r} has no end marker: a tag needs one")
    return python_calls(fns, parallel, start, end, list_wrapped=form.list_wrapped,
                        separator=form.separator.strip(C_SPACE))


def _t(s: str) -> str:
    return s.strip(C_SPACE)


def _reasoning(a: TemplateAnalysis, generation_prompt: str) -> Reasoning | None:
    r = a.output_reasoning
    if r.mode is ReasoningMode.NONE and a.prompt_reasoning is None:
        return None
    return _block(r.start, r.end, generation_prompt)


def _block(start: str, end: str, generation_prompt: str) -> Reasoning | None:
    """A reasoning block between two markers, as the generation prompt leaves it: opened (the output starts in
    it), closed (none), or neither (optional: thinking off, a template may still write an empty one)."""
    start, end = _t(start), _t(end)
    if not start or not end:
        return None
    if generation_prompt.rstrip(C_SPACE).endswith(start):
        return Reasoning("", end, required=True)
    if start in generation_prompt:  # (closed by the prompt: `<think></think>`)
        return None
    return Reasoning(start, end, required=False)


def _markers(*texts: str) -> tuple[str, ...]:
    """The markers among `texts` (none for ""), each once: what free text may not hold."""
    return tuple(dict.fromkeys(t for t in texts if t))


def _json_calls(a: TemplateAnalysis, fns: list[Function], parallel: bool) -> CallTags:
    """`{"name": NAME, "arguments": {...}}` calls: one per marker pair, or a list (or one) in a section, or bare
    (the object's first key is then the trigger; also where the generation prompt ends with the section's start,
    which the model then never writes: `TemplateAnalysis.section_start_in_prompt`)."""
    fmt = a.tools.format
    if fmt.fun_name_is_key and not _t(fmt.section_start):
        raise ExportError("a call is `{NAME: arguments}` with no section marker: its `{` is no trigger")
    nested = a.nested_call
    if nested is None and ((fmt.function_field and fmt.function_field != "function") or "." in fmt.name_field):
        raise ExportError(f"the name is nested under {fmt.function_field!r}: not expressed yet")
    order = list(fmt.parameter_order) or [fmt.name_field, fmt.args_field]
    constants: dict[str, str] = {}
    if nested is not None:  # (beyond the C++: the id, the constant members, the member holding name and arguments)
        constants = dict(nested.constants)
        order = [*(k for k in order if k in (fmt.id_field, fmt.gen_id_field)), *constants, nested.member]

    def call(f: Function, head: bool = True) -> Piece:
        """One call object; without its `{"first key"` where that is the tag's begin (`head` False)."""
        if fmt.fun_name_is_key:  # (`{NAME: arguments}`: the name is the object's one key; always in a section)
            return Seq((Lit("{"), Space(), *json_member(f.name, Json(arguments_schema(f))), Space(), Lit("}")))
        members: list[Piece] = []
        for key in order:
            if nested is not None and key == nested.member:
                value: Piece = Seq((Lit("{"), Space(), *json_member(nested.name_key, Lit(json.dumps(f.name, ensure_ascii=False))),
                                    Space(), Lit(","), Space(), *json_member(nested.args_key, Json(arguments_schema(f))),
                                    Space(), Lit("}")))
            elif key in constants:
                value = Lit(constants[key])
            elif key == fmt.name_field:
                value = Lit(json.dumps(f.name, ensure_ascii=False))
            elif key == fmt.args_field:
                value = Json(arguments_schema(f))
            elif key in (fmt.id_field, fmt.gen_id_field):
                value = Json({"type": "string"})
            else:
                raise ExportError(f"a call's member {key!r} is not expressed yet")
            if members:
                members += [Space(), Lit(","), Space()]
            members += json_member(key, value)
        if not head:
            return Seq((*members[1:], Space(), Lit("}")))
        return Seq((Lit("{"), Space(), *members, Space(), Lit("}")))

    def calls(head: bool) -> Piece:
        return Alt(tuple(call(f, head) for f in fns))

    first_key = "{" + json.dumps(order[0])
    section_start = "" if a.section_start_in_prompt else _t(fmt.section_start)
    section_end = _t(fmt.section_end)
    per_call = not section_start and bool(_t(fmt.per_call_start))
    if per_call:
        tag = Tag(_t(fmt.per_call_start), Seq((Space(), calls(True), Space())), _t(fmt.per_call_end))
        return CallTags(tag.begin, (tag,), _markers(tag.end))
    begin = section_start
    if fmt.tools_array_wrapped:
        # (a list without a section marker begins with its bracket and the first call's first key)
        begin = begin or "[" + first_key
        first = calls(head=bool(section_start))
        more = Opt(Many(Seq((Space(), Lit(","), Space(), calls(True))))) if parallel else Seq(())
        lead = (Space(), Lit("["), Space()) if section_start else ()
        # (the list's bracket ends the calls where the template writes no section end)
        body: Piece = Seq((*lead, first, more, Space(), *((Lit("]"), Space()) if section_end else ())))
        return CallTags(begin, (Tag(begin, body, section_end or "]"),), _markers(section_end))
    if not section_start:  # bare calls: each begins with its first key and ends with its object's brace
        return CallTags(first_key, (Tag(first_key, _without_close(calls(head=False), "}"), "}"),))
    # (several calls in one section, one per line: MiniMax-M1's `<tool_calls>`; a section without an end holds one)
    more = Opt(Many(Seq((Space(), calls(True))))) if parallel and section_end else Seq(())
    body = Seq((Space(), calls(True), more, Space()))
    return CallTags(begin, (Tag(begin, body, section_end),), _markers(section_end))


def _tagged_calls(a: TemplateAnalysis, fns: list[Function], parallel: bool, *, json_arguments: bool) -> CallTags:
    """`<marker>NAME ... </marker>` calls, the arguments one JSON object or one tag per argument."""
    t = a.tools
    fmt, fn, args = t.format, t.function, t.arguments
    cid = t.call_id
    # (an id between the name and the arguments, up to the marker after it, may be left out, as the parser reads it:
    # Mistral's `NAME[CALL_ID]ID[ARGS]{...}`)
    id_between = cid.pos is CallIdPosition.BETWEEN_FUNC_AND_ARGS and bool(_t(cid.prefix)) and bool(_t(cid.suffix))
    if cid.pos is not CallIdPosition.NONE and not id_between:
        raise ExportError("calls carry an id between their markers: not expressed yet")
    id_in_prefix = a.call_id_in_name_prefix
    # (beyond the C++: the record's name prefix holds an id the model makes up, before the name's own marker)
    name_prefix = fn.name_prefix if id_in_prefix is None else id_in_prefix[1]
    # (calls in a section with no marker of their own each begin with their name's prefix, inside the section)
    in_section = bool(_t(fmt.section_start)) and not _t(fmt.per_call_start)
    opener = _t(fmt.per_call_start) or ("" if in_section else _t(name_prefix))
    if not opener and not (in_section and _t(name_prefix)):
        raise ExportError("a call begins with its bare name: no marker to trigger on")
    if id_in_prefix is not None and not _t(fmt.per_call_start):
        raise ExportError("a call begins with the id the model makes up: no marker to trigger on")

    def head(f: Function) -> list[Piece]:
        parts: list[Piece] = []
        prefix = _t(name_prefix)
        if id_in_prefix is not None:  # (the id, as the parser reads it: a word up to the name's marker)
            if _t(id_in_prefix[0]):
                parts += [Space(), Lit(_t(id_in_prefix[0]))]
            parts.append(Pattern(call_id_word(name_prefix) + "+"))
        if prefix and prefix != opener:
            parts += [Space(), Lit(prefix)]
        parts += [Lit(f.name) if prefix else Seq((Space(), Lit(f.name)))]
        if id_between:
            parts += [Opt(Seq((Space(), Lit(_t(cid.prefix)), Pattern(f"[^{re.escape(_t(cid.suffix)[0])}]*")))),
                      Space(), Lit(_t(cid.suffix))]
        for marker in (fn.name_suffix, fn.args_separator):
            if _t(marker):
                parts += [Space(), Lit(_t(marker))]
        return parts

    def tagged(f: Function) -> list[Piece]:
        if not _t(args.name_prefix):  # (no marker before a key: the template's separator stands between arguments)
            return [_unmarked_arguments(a, f)]
        out: list[Piece] = []
        for param in parameters(f):
            arg = _argument(a, f, param)
            out.append(Seq((Space(), arg)) if param.required else Opt(Seq((Space(), arg))))
        return out

    def marker(text: str) -> list[Piece]:  # (a marker the template writes, after whitespace; none if it writes none)
        return [Space(), Lit(_t(text))] if _t(text) else []

    def call(f: Function) -> Piece:
        parts = head(f)
        if json_arguments:
            parts += [*marker(args.start), Space(), Json(arguments_schema(f)), *marker(args.end)]
        else:
            parts += [*marker(args.start), *tagged(f), *marker(args.end)]
        return Seq((*parts, *marker(fn.close), Space()))

    one = Alt(tuple(call(f) for f in fns))
    end = _t(fmt.per_call_end)
    section_end = _t(fmt.section_end) if _t(fmt.section_start) else ""  # (an end alone is no marker of ours)
    excludes = _markers(end, _t(fn.close), section_end)
    if in_section:
        if not section_end:
            raise ExportError(f"the calls' section {_t(fmt.section_start)!r} has no end marker: a tag needs one")
        more = Opt(Many(one)) if parallel else Seq(())
        return CallTags(_t(fmt.section_start), (Tag(_t(fmt.section_start), Seq((one, more, Space())), section_end),),
                        excludes)
    if end:
        tag = Tag(opener, one, end)
    else:  # (the name's prefix opens the call, its close ends it; without one, it ends with its arguments)
        close = _t(fn.close)
        tag = Tag(opener, _without_close(one, close), close) if close else Tag(opener, one, "")
        if not section_end:  # (a section without an end: each call a tag of its own)
            # (an end with no section opener is what the template writes after the last call, handing the turn
            # over to the tool: FunctionGemma's `<start_function_response>`)
            hand_over = (_t(fmt.section_end),) if _t(fmt.section_end) and not _t(fmt.section_start) else ()
            return CallTags(opener, (tag,), excludes, hand_over=hand_over)
    if _t(fmt.section_start):
        section = Tag(_t(fmt.section_start), Seq((Space(), tag, Opt(Many(Seq((Space(), tag)))) if parallel
                                                   else Seq(()), Space())), _t(fmt.section_end))
        if not section.end:
            raise ExportError(f"the calls' section {section.begin!r} has no end marker: a tag needs one")
        return CallTags(section.begin, (section,), excludes)
    return CallTags(opener, (tag,), excludes)


def _without_close(p: Piece, close: str) -> Piece:
    """A call's pieces without its closing literal (the tag's end says it)."""
    if isinstance(p, Alt):
        return Alt(tuple(_without_close(i, close) for i in p.items))
    if isinstance(p, Seq):
        items = list(p.items)
        for i in range(len(items) - 1, -1, -1):
            if items[i] == Lit(close):
                del items[i]
                break
        return Seq(tuple(items))
    return p


def _argument(a: TemplateAnalysis, f: Function, param: Parameter) -> Piece:
    """One tagged argument: `<name marker>KEY<suffix><value prefix> value <value suffix>`, the value any text
    for a string, JSON under its schema otherwise."""
    args, typed = a.tools.arguments, a.typed_argument
    begin = _t(args.name_prefix) + param.name + args.name_suffix.rstrip(C_SPACE)
    between = _t(args.value_prefix)
    end = _t(args.value_suffix)
    if typed is not None and _t(typed.closer) and param.types and not param.may_be_string:
        # (beyond the C++: the markers the template writes around a value that is no string, `string="false">`)
        begin, between, end = _t(args.name_prefix) + param.name, _t(typed.opener), _t(typed.closer)
    if not _t(args.name_prefix) or not end:
        raise ExportError("a tagged argument without a name marker or a value closer: not expressed yet")
    schema = value_schema(param)
    string = param.types <= {"string"} and bool(param.types)
    value: Piece = Text() if string else Seq((Space(), Json(schema), Space()))
    if not between:
        return Tag(begin, value, end)
    if string:  # (the value's own opener begins the tag its text runs in: `<arg_value>` ... `</arg_value>`)
        return Seq((Lit(begin), Space(), Tag(between, Text(), end)))
    return Tag(begin, Seq((Space(), Lit(between), value)), end)


def _unmarked_arguments(a: TemplateAnalysis, f: Function) -> Piece:
    """Tagged arguments with no marker before a key, the template's separator between two (FunctionGemma's
    `{city:<escape>Paris<escape>,days:3}`), in the template's order (by name where it sorts them:
    `TemplateAnalysis.arguments_sorted`); an optional one may be left out, with its separator."""
    args = a.tools.arguments
    separator = _t(args.separator)
    if not separator or not _t(args.value_suffix):
        raise ExportError("a tagged argument without a name marker or a value closer: not expressed yet")
    params = parameters(f)
    if a.arguments_sorted:
        params = sorted(params, key=lambda param: param.name)
    items = [Seq((Space(), _unmarked_argument(a, param))) for param in params]
    between = Seq((Space(), Lit(separator)))

    def rest(after: int) -> list[Piece]:
        return [Seq((between, items[i])) if params[i].required else Opt(Seq((between, items[i])))
                for i in range(after + 1, len(params))]

    # (the first argument written is one whose arguments before it are all optional and left out)
    firsts: list[Piece] = []
    for i, param in enumerate(params):
        firsts.append(Seq((items[i], *rest(i))))
        if param.required:
            break
    else:
        firsts.append(Seq(()))  # (every argument optional: none written)
    return firsts[0] if len(firsts) == 1 else Alt(tuple(firsts))


def _unmarked_argument(a: TemplateAnalysis, param: Parameter) -> Piece:
    """`KEY<suffix>value<value suffix>`: a string any text up to the closer; another value JSON, between the string's
    markers or, where the template writes it otherwise (`TemplateAnalysis.typed_argument`: `days:3`), so."""
    args, typed = a.tools.arguments, a.typed_argument
    begin, end = param.name + _t(args.name_suffix), _t(args.value_suffix)
    string = Tag(begin, Text(), end)
    if param.types <= {"string"} and param.types:
        return string
    if typed is None:
        other: Piece = Tag(begin, Seq((Space(), Json(value_schema(param)), Space())), end)
    elif param.types & {"object", "array"}:
        # (FunctionGemma writes an object or a list in its own syntax, `{k:<escape>v<escape>}`, which no JSON
        # schema says)
        raise ExportError("a value in the format's own syntax (an object or a list): not expressed yet")
    else:
        closer = (Lit(_t(typed.closer)),) if _t(typed.closer) else ()
        other = Seq((Lit(param.name + _t(typed.opener)), Json(value_schema(param)), *closer))
    return by_kind(param, string, other)


# --- xgrammar structural tag ----------------------------------------------------------------------------------

_WS = r"[ \t\r\n]*"


def to_structural_tag(c: Constraint) -> dict[str, Any]:
    """The xgrammar structural tag of a constraint (`{"type": "structural_tag", "format": ...}`)."""
    elements: list[dict[str, Any]] = []
    if c.reasoning is not None:
        if c.reasoning.start:
            elements.append({"type": "regex", "pattern": _WS})  # (a line break before the block)
        think = {"type": "tag", "begin": c.reasoning.start,
                 "content": {"type": "any_text", "excludes": [m for m in (c.reasoning.start, c.reasoning.end) if m]},
                 "end": c.reasoning.end}
        elements.append(think if c.reasoning.required else {"type": "optional", "content": think})
    if (c.calls is not None and c.calls.at_least_one) or c.reasoning is not None:
        # (the blank line before the calls; where the output is calls, the markup that may lead them)
        lead = c.calls.form.lead if c.calls is not None and c.calls.at_least_one else ()
        elements.append({"type": "regex", "pattern": _WS + "(" + "|".join(_regex_escape(m) for m in lead) + ")?"
                         + _WS if lead else _WS})
    if c.calls is None:
        elements.append({"type": "any_text"})
    else:
        calls, form = c.calls, c.calls.form
        elements.append({"type": "triggered_tags", "triggers": [form.trigger],
                         "tags": [_st(tag) for tag in form.tags], "at_least_one": calls.at_least_one,
                         "stop_after_first": calls.stop_after_first, "excludes": list(form.excludes)})
        if calls.stop_after_first:  # (the grammar ends at the call's end: but for whitespace and the hand-over)
            elements.append({"type": "regex", "pattern": _WS + "(" + "|".join(
                _regex_escape(m) for m in form.hand_over) + ")?" + _WS if form.hand_over else _WS})
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}
            if len(elements) > 1 else elements[0]}


def _st(p: Piece) -> dict[str, Any]:
    if isinstance(p, Lit):
        return {"type": "const_string", "value": p.text}
    if isinstance(p, Space):
        return {"type": "regex", "pattern": _WS}
    if isinstance(p, Json):
        return {"type": "json_schema", "json_schema": p.schema}
    if isinstance(p, Pattern):
        return {"type": "regex", "pattern": p.regex}
    if isinstance(p, Text):
        return {"type": "any_text"}
    if isinstance(p, Seq):
        elements = _markup_runs(_flat(p))
        if len(elements) == 1:
            return elements[0]
        return {"type": "sequence", "elements": elements} if elements else {"type": "const_string", "value": ""}
    if isinstance(p, Alt):
        return _st(p.items[0]) if len(p.items) == 1 else {"type": "or", "elements": [_st(i) for i in p.items]}
    if isinstance(p, Opt):
        return {"type": "optional", "content": _st(p.item)}
    if isinstance(p, Many):
        return {"type": "plus", "content": _st(p.item)}
    return {"type": "tag", "begin": p.begin, "content": _st(p.content), "end": p.end}


def _markup_runs(items: list[Piece]) -> list[dict[str, Any]]:
    """A sequence's elements, each run of markup with whitespace in it said as one regex (`\\{[ \\t\\r\\n]*"name"`)."""
    out: list[dict[str, Any]] = []
    run: list[Lit | Space] = []

    def flush() -> None:
        if len(run) > 1 and any(isinstance(i, Space) for i in run):
            out.append({"type": "regex", "pattern": "".join(_WS if isinstance(i, Space) else _regex_escape(i.text)
                                                            for i in run)})
        else:
            out.extend(_st(i) for i in run)
        run.clear()

    for item in items:
        if isinstance(item, (Lit, Space)):
            if not (isinstance(item, Space) and run and isinstance(run[-1], Space)):
                run.append(item)
            continue
        flush()
        out.append(_st(item))
    flush()
    return out


def _regex_escape(text: str) -> str:
    """A text as a regex matching it (only the metacharacters escaped: a consumer's regex reads no other escape)."""
    escaped = re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)
    return escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def _flat(p: Seq) -> list[Piece]:
    """A sequence's pieces, the sequences inside it (and a choice of one) spliced in."""
    out: list[Piece] = []
    for item in p.items:
        while isinstance(item, Alt) and len(item.items) == 1:
            item = item.items[0]
        out.extend(_flat(item) if isinstance(item, Seq) else [item])
    return out


# --- llguidance Lark ------------------------------------------------------------------------------------------

def to_lark(c: Constraint) -> str:
    """The llguidance Lark grammar of a constraint."""
    rules: dict[str, str] = {}
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def lark(p: Piece) -> str:
        if isinstance(p, Lit):
            return json.dumps(p.text, ensure_ascii=False) if p.text else '""'
        if isinstance(p, Space):
            return "WS?"
        if isinstance(p, Json):
            rule = name("json")
            rules[rule] = "%json " + json.dumps(p.schema, ensure_ascii=False)
            return rule
        if isinstance(p, Pattern):
            return "/" + p.regex.replace("/", "\\/") + "/"
        if isinstance(p, Text):
            raise ExportError("free text outside a tag")  # (a Text is always a tag's content)
        if isinstance(p, Seq):
            parts = [lark(i) for i in p.items]
            return " ".join(x for x in parts if x) or '""'
        if isinstance(p, Alt):
            return lark(p.items[0]) if len(p.items) == 1 else "(" + " | ".join(lark(i) for i in p.items) + ")"
        if isinstance(p, Opt):
            return "(" + lark(p.item) + ")?"
        if isinstance(p, Many):
            return "(" + lark(p.item) + ")+"
        if isinstance(p.content, Text):
            rule = name("text")
            rules[rule] = f"[suffix={json.dumps(p.end, ensure_ascii=False)}]: /(?s:.*)/"
            return f"{json.dumps(p.begin, ensure_ascii=False)} {rule}"
        return " ".join(x for x in (_lark_lit(p.begin), lark(p.content), _lark_lit(p.end)) if x)

    start: list[str] = []
    if c.reasoning is not None:
        body = name("think_text")
        rules[body] = f"[suffix={json.dumps(c.reasoning.end, ensure_ascii=False)}]: /(?s:.*)/"
        think = (json.dumps(c.reasoning.start, ensure_ascii=False) + " " if c.reasoning.start else "") + body
        rules["think"] = think
        start.append("think" if c.reasoning.required else "WS? think?")
    if c.calls is None:
        start.append("TEXT")
    else:
        calls = c.calls
        head = "call_head"
        rules[head + "[lazy]"] = "TEXT " + json.dumps(calls.form.trigger, ensure_ascii=False)
        alternatives = []
        for tag in calls.form.tags:
            rest = tag.begin[len(calls.form.trigger):]
            inner = lark(tag.content)
            alternatives.append(" ".join(x for x in (_lark_lit(rest), inner, _lark_lit(tag.end)) if x))
        body = "(" + " | ".join(alternatives) + ")" if len(alternatives) > 1 else alternatives[0]
        rules["call"] = f"{head} {body}"
        if calls.at_least_one:  # the output is calls (as xgrammar reads `at_least_one`): the first one at once
            lead = " | ".join(_lark_lit(m) for m in calls.form.lead)
            rules["first_call"] = f"WS? {f'({lead})? ' if lead else ''}{_lark_lit(calls.form.trigger)} {body}"
            start.append("first_call" if calls.stop_after_first else "first_call call*")
        else:
            start.append("call?" if calls.stop_after_first else "call*")
        start.append("TEXT")
    lines = ["%llguidance {}", "start: " + " ".join(start)]
    for rule, body in rules.items():  # (`name[suffix="..."]: /regex/`: a rule with attributes)
        lines.append(f"{rule}{body}" if body.startswith("[") else f"{rule}: {body}")
    lines += [f"TEXT: {_text_regex(c)}", r"WS: /[ \t\r\n]+/"]
    return "\n".join(lines) + "\n"


def _lark_lit(text: str) -> str:
    """A literal in Lark ("" for no text: Lark has no empty literal)."""
    return json.dumps(text, ensure_ascii=False) if text else ""


def _text_regex(c: Constraint) -> str:
    """Free text: anything (the closers excluded, so that an output that lost a call's opener is rejected)."""
    if c.calls is None or not c.calls.form.excludes:
        return "/(?s:.*)/"
    words = "|".join(_lark_escape(e) for e in c.calls.form.excludes)
    return f"/(?s:.*)/ & ~/(?s:.*({words}).*)/"


def _lark_escape(text: str) -> str:
    """A text as a Lark regex matching it (`/` ends the regex, a line break cannot stand in it)."""
    special = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "/": "\\/"}
    return "".join(special.get(ch) or re.escape(ch) for ch in text)
