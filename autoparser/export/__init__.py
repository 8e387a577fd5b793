"""What the analysis derives, in the formats other engines consume: a Hugging Face `response_template` (here), and
per request an xgrammar structural tag and an llguidance Lark grammar (export/constrained.py).

Since transformers 5.13 a model may ship, in its tokenizer_config.json, a declarative description of where its
output puts reasoning, content and tool calls (`transformers.utils.chat_parsing`); transformers' `parse_response`
and vLLM's `hf` parser read it. `response_template(source)` builds one from the template's analysis, the same
record llama.cpp's autoparser derives its parser from:

- `start_anchor`: where the assistant's turn starts in the prompt (the template's generation prompt, with
  thinking on and off), so that a generation prompt that opens the reasoning (`<think>\\n`) opens it for the
  parser too;
- `thinking` (the name vLLM and transformers' templates use), between the reasoning markers;
- `content`, the implicit field: whatever no other field takes;
- `tool_calls`, one region per call (or per section, for a list), its name captured from the opener where the
  template writes it there, its arguments read by transformers' `json`, `xml-inline` or `python-call-list`
  parser and arranged as `{"type": "function", "function": {"name", "arguments"}}` by a transform;
- `markup`: markers that belong to no field (a call section's end).

A hand-written format (chat/handlers) carries its own fields (`FormatSpec.response_fields`), anchored the same
way. Where the format cannot be said in that language (a call whose name is a JSON key, calls as JSON objects
one after another with no list around them, a hand-written format without fields), `ExportError` says why in
one line: an export that parses wrongly would be worse than none.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from autoparser.analysis import fixtures as fx
from autoparser.analysis.model import (
    CallForm,
    CallIdPosition,
    ContentMode,
    ReasoningAnalysis,
    ReasoningMode,
    StringValues,
    TemplateAnalysis,
    ToolFormat,
    ToolsAnalysis,
)
from autoparser.chat.handlers import find_handler
from autoparser.chat.spec import (
    CALL_TRANSFORM,
    IMPLICIT_CONTENT,
    FormatSpec,
    call_transform,
    closers_pattern,
    markup_field,
    opened_by_its_end,
    thinking_field,
)
from autoparser.errors import ExportError, NothingToExport
from autoparser.export.constrained import lark_grammar, structural_tag
from autoparser.params import generate, strict_analysis
from autoparser.peg.nodes import C_SPACE
from autoparser.template.render import normalize_source
from autoparser.template.sandbox import time_budget

__all__ = ["READERS", "ExportError", "NothingToExport", "for_reader", "lark_grammar", "response_template",
           "structural_tag", "transformers_message", "vllm_fields"]

# A tool's name as templates write it; `name` is the capture the transform reads.
_NAME = r"(?P<name>[A-Za-z0-9_.:\-]+)"


def _lit(marker: str) -> str:
    """A marker as a regex: the template's text without its surrounding whitespace, which models vary."""
    return re.escape(marker.strip(C_SPACE))


def _seq(*parts: str) -> str:
    """Regex parts in order, whitespace allowed between them."""
    return r"\s*".join(p for p in parts if p)


# Who reads the response_template: transformers' `parse_response`, or vLLM's `hf` and `beam` parsers (its copy of
# transformers' parser, served under stricter rules: `vllm_fields`).
READERS = ("transformers", "vllm")


def response_template(source: str, reader: str = "transformers") -> dict[str, Any]:
    """The response_template of a chat template (its source text), for `reader` (READERS); ExportError when it
    cannot be expressed."""
    if reader not in READERS:
        raise ValueError(f"reader {reader!r}: one of {', '.join(READERS)}")
    with time_budget(phase="exporting"):
        spec = _response_template(normalize_source(source))
    return for_reader(spec, reader)


def for_reader(spec: Mapping[str, Any], reader: str) -> dict[str, Any]:
    """A response_template made for transformers (`response_template(source)`), as `reader` takes it; ExportError
    when that reader cannot take it."""
    return {**spec, "fields": vllm_fields(spec["fields"])} if reader == "vllm" else dict(spec)


def vllm_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields as vLLM serves them (vLLM 0.33 `validate_response_template_for_serving`: only `thinking`,
    `content` and `tool_calls`, text without `join`; its copy of the parser has no `python-call-list`). Its
    server assembles the content from every piece the parser emits, so the implicit content needs no `join`; a
    section's end after the last call becomes an optional part of the call's closer (a whole output is read
    right; vLLM's stream, like transformers', may commit the closer before that end arrives and show it as
    content)."""
    out = {k: copy.deepcopy(v) for k, v in fields.items() if k != "markup"}
    if out.get("content") == IMPLICIT_CONTENT:
        out["content"] = {}
    calls = out.get("tool_calls")
    if calls is None:
        return out
    if calls.get("content") == "python-call-list":
        raise ExportError("the calls are a Python list: vLLM's copy of transformers' parser has no python-call-list")
    ends = list(fields.get("markup", {}).get("open", ()))
    if ends:
        close = calls.pop("close_pattern", None) or "|".join(map(re.escape, _as_list(calls.pop("close", []))))
        calls["close_pattern"] = f"(?:{close})(?:{'|'.join(map(re.escape, ends))})?"
    return out


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _response_template(source: str) -> dict[str, Any]:
    handler = find_handler(source)
    if handler is not None:
        return _with_anchor(source, _hand_written(handler), (handler.thinking_start_tag,))
    analysis = strict_analysis(source).effective  # (the generator's, analysed once per source)
    fields: dict[str, Any] = {}
    reasoning = analysis.output_reasoning  # (transformers reads a block the prompt opens like any other)
    thinking = _thinking(reasoning)
    if thinking:
        fields["thinking"] = thinking
    fields["content"] = _content(analysis)
    calls = _tool_calls(analysis)
    if calls:
        fields["tool_calls"] = calls
        # a section's end after the last call (its opener goes with the first call's): no content
        section = analysis.tools.format
        if section.section_end.strip(C_SPACE) and (section.per_call_start.strip(C_SPACE)
                                               or analysis.tools.function.name_prefix.strip(C_SPACE)):
            fields["markup"] = markup_field([section.section_end])
    if len(fields) == 1 and fields["content"] == IMPLICIT_CONTENT:
        raise NothingToExport("no reasoning, content markers or tool calls to describe: the whole output is content")
    return _with_anchor(source, fields, (reasoning.start, analysis.content.start), analysis.assistant_start)


def _with_anchor(source: str, fields: dict[str, Any], openers: tuple[str, ...],
                 assistant_start: str = "") -> dict[str, Any]:
    """The response_template of `fields`, anchored where the template's generation prompt begins (`_anchors`)."""
    calls = fields.get("tool_calls", {})
    if "(?P<name>" in calls.get("open_pattern", ""):
        # The whitespace before a call is the call's: vLLM's `beam` parser makes a structural tag of the reasoning,
        # then of each call's opener (a regex, its name filled in) and arguments, and only the opener can take the
        # newlines a template writes after the reasoning or between calls.
        fields = {**fields, "tool_calls": {**calls, "open_pattern": r"\s*" + calls["open_pattern"]}}
    spec: dict[str, Any] = {"version": 1}
    anchors = _anchors(source, openers, assistant_start)
    if anchors:
        spec["start_anchor"] = anchors if len(anchors) > 1 else anchors[0]
    else:  # the prompt shows no assistant start: the output alone is parsed
        spec["start_anchor_pattern"] = r"\Z"
        if "thinking" in fields:
            fields = {**fields, "thinking": opened_by_its_end(fields["thinking"])}
    spec["fields"] = fields
    return spec


def _anchors(source: str, openers: tuple[str, ...], assistant_start: str = "") -> list[str]:
    """Where the assistant's turn begins in a prompt: the generation prompts the template appends (with thinking
    on and off: they may differ, `<think>\\n` against `<think></think>`), each up to the reasoning or content
    opener it may write (which then opens that field for the parser, from the prefix). Not the analysis's
    assistant start, which can hold the end of the probe's user turn -- except where the generation prompt is
    empty because the template writes its assistant header whatever `add_generation_prompt` says (ERNIE 4.5,
    in llama.cpp's context): then the prompt's tail from its last assistant start."""
    anchors: list[str] = []
    for thinking in (True, False):
        params = generate(source, {"messages": [{"role": "user", "content": "Hi"}], "reasoning_format": "auto",
                                   "enable_thinking": thinking})
        gp = params.generation_prompt
        at = params.prompt.rfind(assistant_start) if assistant_start.strip(C_SPACE) else -1
        if not gp.strip(C_SPACE) and at >= 0:
            gp = params.prompt[at:]
        for marker in (m.strip(C_SPACE) for m in openers):
            if marker and marker in gp:
                gp = gp[:gp.rindex(marker)]
        if gp.strip(C_SPACE) and gp.strip(C_SPACE) not in anchors:
            anchors.append(gp.strip(C_SPACE))
    return anchors


def _hand_written(spec: FormatSpec) -> dict[str, Any]:
    """A hand-written format's own fields (its handler module writes them beside its parser)."""
    if spec.response_fields is None:
        raise ExportError(f"the format is hand-written ({spec.name}) and has no response_template: its handler "
                          "does not say one (chat/handlers/)")
    fields = copy.deepcopy(dict(spec.response_fields))
    if not spec.reasoning:
        fields.pop("thinking", None)
    return fields


def _thinking(r: ReasoningAnalysis) -> dict[str, Any]:
    if r.mode is ReasoningMode.NONE or not r.end.strip(C_SPACE):
        return {}
    if not r.start.strip(C_SPACE):
        raise ExportError("the reasoning has an end marker but no start: a response_template field needs an opener "
                          "(only the content may go without one)")
    return thinking_field(r.start, r.end)


def _content(a: TemplateAnalysis) -> dict[str, Any]:
    c = a.content
    if not (c.start.strip(C_SPACE) and c.end.strip(C_SPACE)):
        return dict(IMPLICIT_CONTENT)
    if c.mode is not ContentMode.ALWAYS_WRAPPED:
        raise ExportError(f"the content is wrapped in {c.start.strip(C_SPACE)!r} only after reasoning: a field is "
                          "either opened by a marker or the implicit one, not both")
    return {"open": c.start.strip(C_SPACE), "close": c.end.strip(C_SPACE)}


# The analysis's own probe values: a marker that holds one is a misreading, no format to export.
_NEEDLES = (fx.FUN_FIRST, fx.FUN_SECOND, fx.ARG_FIRST, fx.ARG_SECOND, fx.USER_MSG, fx.ASSISTANT_MSG,
            fx.THINKING_CONTENT, fx.VALUE_FIRST, fx.VALUE_SECOND)


def _tool_calls(a: TemplateAnalysis) -> dict[str, Any]:
    if not a.caps.supports_tool_calls:
        return {}
    if a.call_form is not None:  # (the C++'s tag reading of such calls holds the probe values: see forms.py)
        return _pythonic(a.call_form)
    markers = json.dumps(a.tools.to_dict())
    if any(needle in markers for needle in _NEEDLES):
        raise ExportError("the analysis's tool markers hold its own probe values: it misread how the template "
                          "renders a call")
    t = a.tools
    match t.format.mode:
        case ToolFormat.JSON_NATIVE:
            return _json_native(t, a.caps.supports_parallel_tool_calls)
        case ToolFormat.TAG_WITH_JSON:
            return _tagged(t, {"content": "json"})
        case ToolFormat.TAG_WITH_TAGGED:
            return _tagged(t, _xml_arguments(t))
    return {}


def _pythonic(form: CallForm) -> dict[str, Any]:
    """`[get_weather(city="Paris"), get_time()]`: transformers' `python-call-list` reads the list."""
    if not form.list_wrapped:
        raise ExportError("the calls are Python calls one per line, not a list: transformers' python-call-list "
                          "reads a list")
    if form.strings is not StringValues.LITERAL:
        raise ExportError("the template prints string values as they are, not as Python literals "
                          f"({form.strings.value.lower()}): transformers' python-call-list reads literals")
    field: dict[str, Any] = {"content": "python-call-list", "transform": call_transform("{name}", "{arguments}"),
                             "transform_each": True}
    if form.section_start.strip(C_SPACE):
        field["open_pattern"] = _lit(form.section_start) + r"\s*(?=\[)"
        if form.section_end.strip(C_SPACE):
            field["close"] = form.section_end.strip(C_SPACE)
    else:  # a bare list: it begins where `[name(` does (the bracket stays in the region)
        field["open_pattern"] = r"(?=\[\s*[A-Za-z_][A-Za-z0-9_.\-]*\()"
    return field


def _json_native(t: ToolsAnalysis, parallel: bool) -> dict[str, Any]:
    fmt = t.format
    if fmt.fun_name_is_key:
        raise ExportError("the call's name is its JSON key (`{\"get_weather\": {...}}`): a transform can only read "
                          "values")
    name, args = fmt.name_field, fmt.args_field
    if fmt.function_field and fmt.function_field != "function" and "." not in name:
        name, args = f"{fmt.function_field}.{name}", f"{fmt.function_field}.{args}"
    elif args == fmt.function_field:  # an OpenAI-style wrapper read by llama.cpp as the arguments' key
        name, args = f"{fmt.function_field}.name", f"{fmt.function_field}.arguments"
    field: dict[str, Any] = {"content": "json"}
    if fmt.per_call_start.strip(C_SPACE):
        # one region per call: the section's markers, if any, go with the first call's opener and the last's closer
        opener = _seq(f"(?:{_lit(fmt.section_start)})?" if fmt.section_start.strip(C_SPACE) else "",
                      _lit(fmt.per_call_start))
        close = fmt.per_call_end.strip(C_SPACE)
        if not close:
            raise ExportError("each call has an opener but no closer: a region of JSON would run into the next")
        field["repeats"] = True
        if fmt.parameter_order == (name, args):
            return field | _named_json_call(opener, name, args, close)
        field["open_pattern"], field["close"] = opener, close
        field["transform"] = call_transform(f"{{content.{name}}}", f"{{content.{args}}}")
        return field
    if fmt.section_start.strip(C_SPACE):
        field["open"] = fmt.section_start.strip(C_SPACE)
        if fmt.section_end.strip(C_SPACE):
            field["close"] = fmt.section_end.strip(C_SPACE)
    else:  # calls without markers begin with their first key
        first = (fmt.parameter_order or (name.split(".")[0],))[0]
        field["open_pattern"] = rf'(?=\[?\s*\{{\s*"{re.escape(first)}"\s*:)'
    if fmt.tools_array_wrapped:
        field["transform"] = call_transform(f"{{{name}}}", f"{{{args}}}")
        field["transform_each"] = True
        return field
    if parallel:
        raise ExportError("the calls are JSON objects one after another with no list around them: transformers' "
                          "json parser reads one value")
    # the template renders one call only: one object, which runs to the section's end or the output's
    field["transform"] = call_transform(f"{{content.{name}}}", f"{{content.{args}}}")
    field["repeats"] = True  # (a list of one)
    return field


def _named_json_call(opener: str, name: str, args: str, close: str) -> dict[str, Any]:
    """`<tool_call>{"name": "NAME", "arguments": {...}}</tool_call>`, where the template writes the name's key first
    and the arguments' second: the opener runs up to the arguments' value, capturing the name, and the region is
    that value, closed by the object's brace and the call's closer. transformers reads it as it reads the whole
    object; vLLM's `beam` parser derives a structural tag only from a name its opener captures (EXPORT-FORMATS.md
    §2)."""
    key = r'"{}"\s*:\s*'.format
    return {"open_pattern": _seq(opener, r"\{", key(re.escape(name)) + f'"{_NAME}"', ",", key(re.escape(args))),
            "close_pattern": closers_pattern("}", close), "transform": dict(CALL_TRANSFORM)}


def _tagged(t: ToolsAnalysis, content: dict[str, Any]) -> dict[str, Any]:
    """One region per call, opened by the call's markers up to its name (captured), closed by its last closer."""
    fmt, fn, cid = t.format, t.function, t.call_id
    if not (fn.name_prefix.strip(C_SPACE) or fmt.per_call_start.strip(C_SPACE)):
        raise ExportError("the call's name has no marker before it: nothing tells a call from content")
    section = f"(?:{_lit(fmt.section_start)})?" if fmt.section_start.strip(C_SPACE) else ""
    per_call = _lit(fmt.per_call_start) if fmt.per_call_start.strip(C_SPACE) else ""
    # a call id the template writes around the name is read past (the message's ids are the caller's)
    call_id = _seq(_lit(cid.prefix), r".*?", _lit(cid.suffix)) if cid.prefix.strip(C_SPACE) else ""
    before = call_id if cid.pos is CallIdPosition.PRE_FUNC_NAME else ""
    between = call_id if cid.pos is CallIdPosition.BETWEEN_FUNC_AND_ARGS else ""
    # (the whitespace `_lit` strips from the name's suffix is whitespace the model may write: `NAME\n```json`)
    after_name = r"\s*" if fn.name_suffix[:1] in tuple(C_SPACE) else ""
    open_ = _seq(section, per_call, before, _lit(fn.name_prefix)) + _NAME + after_name + _seq(
        _lit(fn.name_suffix), between, _lit(fn.args_separator), _lit(t.arguments.start))
    closers = [c.strip(C_SPACE) for c in (t.arguments.end, fn.close, fmt.per_call_end) if c.strip(C_SPACE)]
    if closers:
        close = closers_pattern(*closers, newline_before=content["content"] == "xml-inline")
    else:  # a call without a closer ends where the next one begins, or with the output
        close = f"(?={_seq(per_call, _lit(fn.name_prefix))})"
    return {"open_pattern": open_, "close_pattern": close, **content, "repeats": True,
            "transform": dict(CALL_TRANSFORM)}


def _xml_arguments(t: ToolsAnalysis) -> dict[str, Any]:
    """Tagged arguments (`<parameter=K>V</parameter>`, `<arg_key>K</arg_key><arg_value>V</arg_value>`) by
    transformers' `xml-inline`; values are text, which transformers casts with the tools' schemas."""
    a = t.arguments
    if not a.name_prefix.strip(C_SPACE) or not (a.value_suffix.strip(C_SPACE)):
        raise ExportError("the arguments have no marker before their names or after their values")
    after_key = [m for m in (a.name_suffix, a.value_prefix) if m.strip(C_SPACE)]
    if not after_key:
        raise ExportError("nothing marks where an argument's name ends and its value begins")
    # (the markers between a name and its value with the newline a template writes between them, as literals:
    # vLLM's beam expands them into its tag's parameter openers)
    pattern = _lit(a.name_prefix) + r"(?P<key>[^<>\s\"']+?)" + r"\n?".join(map(_lit, after_key)) + \
        r"(?P<value>.*?)" + _lit(a.value_suffix)
    return {"content": "xml-inline", "content_args": {"tag_pattern": pattern, "value_parser": {"name": "text"}}}


def transformers_message(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """A message transformers' `parse_response` gave, in our record's shape (`thinking` as the reasoning, calls
    as name + arguments), for the same comparison rules as every other parse."""
    calls = []
    for call in parsed.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, Mapping) else {}
        calls.append({"name": fn.get("name", ""), "arguments": fn.get("arguments", {})})
    return {"content": parsed.get("content") or "", "reasoning_content": parsed.get("thinking") or "",
            "tool_calls": calls}
