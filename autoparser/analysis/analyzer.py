"""`analyze_template`: the whole differential analysis of one chat template (C++ `autoparser::analyze_template`).

Order: caps -> reasoning -> content -> tools -> assistant/user start markers -> preserved tokens -> workarounds;
then, beyond the C++, the same on the template as transformers renders a request, where llama.cpp renders none
of it, no call, or calls its tag reading takes apart wrongly (`TemplateAnalysis.transformers_reading`).
"""

from __future__ import annotations

import dataclasses

from autoparser.analysis import fixtures as fx
from autoparser.analysis.content import analyze_content
from autoparser.analysis.forms import (
    arguments_unrendered,
    derive_call_form,
    opener_before_name,
    retag_from_needles,
    values_misread,
)
from autoparser.analysis.model import ReasoningAnalysis, TemplateAnalysis, ToolFormat, ToolsAnalysis
from autoparser.analysis.reasoning import analyze_reasoning, prompt_opened_reasoning, typed_block_reasoning
from autoparser.analysis.tools import (
    analyze_tools,
    arguments_sorted,
    call_id_in_name_prefix,
    call_separator,
    instructed_opener,
    nested_call,
    section_start_in_prompt,
    typed_argument,
)
from autoparser.analysis.workarounds import apply_workarounds
from autoparser.errors import AnalysisError, AutoparserError, TemplateError
from autoparser.peg.nodes import C_SPACE
from autoparser.template.caps import TemplateCaps, template_caps
from autoparser.template.cpp import CppTemplate, compile_cpp, transformers_reading
from autoparser.template.diff import (
    DiffRenderer,
    SegmentType,
    TemplateParams,
    segmentize_markers,
    trim_whitespace,
)
from autoparser.template.render import ChatTemplate, normalize_source
from autoparser.template.sandbox import time_budget

__all__ = ["analyze_template", "collect_preserved_tokens"]


def analyze_template(template: str | ChatTemplate, name: str = "<template>", *, strict: bool = False,
                     caps: TemplateCaps | None = None) -> TemplateAnalysis:
    """Analyse a chat template (source text or ChatTemplate).

    Raises TemplateError for a template that does not compile and AnalysisError when the analysis cannot
    complete (the cases where the C++ throws). A template that raises on every analysis conversation gets
    the all-default analysis, as in the C++, unless `strict` (then TemplateError with the template's error).
    `caps` are the template's capabilities when the caller has probed them already (generate() has).
    """
    if isinstance(template, ChatTemplate):
        # C++ `tmpl.src`: newlines normalised, one trailing newline dropped (jinja2 does the same on compile).
        source, compiled = template.source, template.cpp
    else:
        source, compiled = normalize_source(template), compile_cpp(template, name)
    try:
        with time_budget(phase="analysing"):
            return _analyze(compiled, source, strict, caps)
    except AutoparserError:
        raise
    except RecursionError as err:
        raise AnalysisError(f"{compiled.name}: analysis recursion too deep") from err
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        raise AnalysisError(f"{compiled.name}: analysis failed: {type(err).__name__}: {err}") from err


def _analyze(compiled: CppTemplate, source: str, strict: bool, caps: TemplateCaps | None) -> TemplateAnalysis:
    if caps is None:
        caps = template_caps(compiled)
    analysis, r = _analyze_rendered(compiled, source, caps)
    beyond = not r.rendered_any or (not caps.supports_tool_calls and "tool_calls" in source) \
        or (analysis.call_form is None and _misread(r, analysis.tools)) \
        or (not analysis.string_arguments and arguments_unrendered(r, analysis.tools))
    reading = _transformers_reading(compiled, source, r) if beyond else None
    if strict and not r.rendered_any and reading is None:
        # Not one conversation rendered: every field would be a meaningless default.
        name = compiled.name or "<template>"
        detail = (r.first_error or "").removeprefix(f"{name}: ")
        raise TemplateError(f"{name}: template fails on every analysis conversation: {detail}")
    return dataclasses.replace(_finished(source, analysis), transformers_reading=reading)


def _transformers_reading(compiled: CppTemplate, source: str, r: DiffRenderer) -> TemplateAnalysis | None:
    """Beyond the C++, for a template of which llama.cpp's jinja renders no conversation (the C++ gives up: an
    empty analysis), no call although the template reads `tool_calls`, or calls whose markers hold the
    analysis' own argument names: where that jinja refuses what jinja2 renders (an unknown test, a filter on an
    object, a string iterated), or the C++ passes objects where requests give JSON text, transformers may
    render the template, calls included. The analysis of the template as transformers renders it, where it
    renders at all (C++: nothing) or finds calls it can read (C++: none); else None, also where it fails (the
    C++ reading stands)."""
    try:
        with transformers_reading():
            beyond_caps = template_caps(compiled)
            if r.rendered_any and not beyond_caps.supports_tool_calls:
                return None
            beyond, br = _analyze_rendered(compiled, source, beyond_caps, requests_arguments=True)
    except (AnalysisError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None  # (what fails the whole analysis elsewhere fails only this reading here)
    found = _reads_calls(beyond.tools) or beyond.call_form is not None
    return _finished(source, beyond) if found or (br.rendered_any and not r.rendered_any) else None


def _finished(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis:
    """The analysis with its preserved tokens and the C++'s per-template workarounds."""
    analysis = dataclasses.replace(analysis, preserved_tokens=collect_preserved_tokens(analysis))
    analysis = apply_workarounds(source, analysis)
    if analysis.reasoning.end:  # (a workaround gave it its end)
        analysis = dataclasses.replace(analysis, prompt_reasoning=None, typed_reasoning=None)
    return analysis


def _analyze_rendered(compiled: CppTemplate, source: str, caps: TemplateCaps, *,
                      requests_arguments: bool = False) -> tuple[TemplateAnalysis, DiffRenderer]:
    """The analysis phases on one reading of the template (before preserved tokens and workarounds), and the
    renderer they rendered with (`requests_arguments`: see `_tools_phase`; `source`, the template's text, where
    a derived marker is looked for)."""
    r = DiffRenderer(compiled, caps)
    reasoning = analyze_reasoning(r, caps.supports_tool_calls)
    content = analyze_content(r, reasoning)
    tools, tools_r = ToolsAnalysis(), r
    if caps.supports_tool_calls:
        tools, tools_r = _tools_phase(compiled, caps, r, reasoning, requests_arguments)
    call_form = derive_call_form(tools_r, reasoning, cpp_reads_calls=_reads_calls(tools)) \
        if caps.supports_tool_calls else None
    analysis = TemplateAnalysis(caps=caps, reasoning=reasoning, content=content, tools=tools, call_form=call_form,
                                string_arguments=tools_r.string_arguments,
                                argument_separator=tools.arguments.separator if requests_arguments else "",
                                call_separator=call_separator(tools_r, tools)
                                if caps.supports_parallel_tool_calls and _reads_calls(tools) else None,
                                nested_call=nested_call(tools_r, tools),
                                call_id_in_name_prefix=call_id_in_name_prefix(tools),
                                instructed_opener=instructed_opener(tools_r, tools)
                                if caps.supports_tool_calls else None,
                                arguments_sorted=arguments_sorted(tools_r, tools),
                                typed_argument=typed_argument(tools_r, tools),
                                section_start_in_prompt=section_start_in_prompt(tools_r, tools),
                                assistant_start=_assistant_start(r, reasoning.start, reasoning.end),
                                user_start=_user_start(r),
                                prompt_reasoning=prompt_opened_reasoning(r, reasoning, source),
                                typed_reasoning=typed_block_reasoning(r, reasoning))
    return analysis, r


def _tools_phase(compiled: CppTemplate, caps: TemplateCaps, r: DiffRenderer, reasoning: ReasoningAnalysis,
                 requests_arguments: bool = False) -> tuple[ToolsAnalysis, DiffRenderer]:
    """The tool phase as the C++ runs it (calls with object arguments); where that fails (a template that
    prints its arguments as they come renders an object as a Python dict, or as nothing), once more with the
    arguments as JSON strings, as requests give them. With `requests_arguments` (the transformers reading),
    also where the object rendering gives markers that hold the analysis' own argument names (an object
    printed as a Python dict, `{'AA_ARG_FST_AA': 'XXXX'}`, read as tags) or show no argument at all (an object
    printed as nothing): the C++ keeps those, transformers renders the JSON text requests give (with the text
    each call writes before its name as its opener, where nothing else marks it: forms.opener_before_name); or,
    where the calls are tagged after all, their markers read again from where the needles sit
    (forms.retag_from_needles). The renderer the tools were found with comes back with them."""
    try:
        tools = analyze_tools(r, caps, reasoning)
    except AnalysisError as first:
        strings = DiffRenderer(compiled, caps, string_arguments=True)
        try:
            return analyze_tools(strings, caps, reasoning), strings
        except AnalysisError:
            raise first from None  # (the C++'s error: the object rendering is the one it reports)
    unrendered = requests_arguments and arguments_unrendered(r, tools)
    if requests_arguments and (_misread(r, tools) or unrendered):
        strings = DiffRenderer(compiled, caps, string_arguments=True)
        try:
            by_strings = analyze_tools(strings, caps, reasoning)
        except AnalysisError:
            by_strings = None
        if by_strings is not None and unrendered:
            by_strings = opener_before_name(strings, by_strings, reasoning) or by_strings
        if by_strings is not None and _reads_json_text(by_strings):
            return by_strings, strings
        # the arguments are printed tag by tag, in a way the C++'s reading takes apart wrongly
        retagged = retag_from_needles(r, tools, reasoning) if tools.format.mode is ToolFormat.TAG_WITH_TAGGED else None
        if retagged is not None and not _holds_needles(retagged):
            return retagged, r
    return tools, r


def _reads_json_text(tools: ToolsAnalysis) -> bool:
    """Whether the string rendering's tools read the arguments' JSON text printed as it comes: calls as JSON, or a
    marked name before JSON arguments (without a marker before the name, any text would be a call)."""
    fmt = tools.format
    if fmt.mode is ToolFormat.JSON_NATIVE:
        return True
    opener = fmt.section_start + fmt.per_call_start + tools.function.name_prefix
    return fmt.mode is ToolFormat.TAG_WITH_JSON and bool(opener.strip(C_SPACE)) and not _holds_needles(tools)


def _reads_calls(tools: ToolsAnalysis) -> bool:
    """Whether the tools describe a format a parser made from them reads calls with."""
    return tools.format.mode is not ToolFormat.NONE and not _holds_needles(tools)


def _misread(r: DiffRenderer, tools: ToolsAnalysis) -> bool:
    """Whether the C++'s tag reading took the template's calls apart wrongly: its markers hold the analysis' own
    argument names, or its value end is not what follows a value (forms.values_misread)."""
    return _holds_needles(tools) or values_misread(r, tools)


def _holds_needles(tools: ToolsAnalysis) -> bool:
    """Whether the tool markers hold the analysis' own argument names: the template printed the calls in a way
    the tag reading takes apart wrongly (a Python call or dict), and no parser made from them reads a call."""
    markers = (*dataclasses.astuple(tools.function), *dataclasses.astuple(tools.arguments))
    return any(isinstance(m, str) and (fx.ARG_FIRST in m or fx.ARG_SECOND in m) for m in markers)


def collect_preserved_tokens(a: TemplateAnalysis) -> tuple[str, ...]:
    t = a.tools
    candidates = (
        a.reasoning.start, a.reasoning.end, a.content.start, a.content.end,
        t.format.section_start, t.format.section_end, t.format.per_call_start, t.format.per_call_end,
        t.function.name_prefix, t.function.name_suffix, t.function.args_separator, t.function.close,
        t.arguments.start, t.arguments.end, t.arguments.name_prefix, t.arguments.name_suffix,
        t.arguments.separator, t.arguments.value_prefix, t.arguments.value_suffix,
        t.call_id.prefix, t.call_id.suffix,
    )
    out: list[str] = []
    for c in candidates:
        tok = trim_whitespace(c)
        if tok and tok not in out:
            out.append(tok)
    return tuple(out)


def _assistant_start(r: DiffRenderer, reasoning_start: str, reasoning_end: str) -> str:
    params = TemplateParams(messages=(fx.user_msg(),))
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(p, messages=(fx.user_msg(), fx.assistant())))
    if cmp is None:
        return ""
    right = cmp.diff.right
    pos = right.find(fx.ASSISTANT_MSG)
    # C++ substr(0, npos) keeps everything when the message is absent.
    prefix = right[:pos] if pos >= 0 else right
    for marker in (reasoning_start, reasoning_end):
        if marker:
            m = trim_whitespace(marker)
            cut = prefix.find(m)
            if cut >= 0:
                prefix = prefix[:cut]
    return trim_whitespace(prefix)


def _user_start(r: DiffRenderer) -> str:
    params = TemplateParams(messages=())
    cmp = r.compare_variants(params, lambda p: dataclasses.replace(p, messages=(fx.user_msg(),)))
    if cmp is None:
        two = {"role": "user", "content": fx.USER_MSG_TWO}
        params = TemplateParams(messages=(two, fx.assistant()))
        cmp = r.compare_variants(params, lambda p: dataclasses.replace(
            p, messages=(two, fx.assistant(), fx.user_msg())))
        if cmp is None:
            return ""
    usermsg = cmp.diff.right
    pos = usermsg.find(fx.ASSISTANT_MSG)
    if pos >= 0:
        usermsg = usermsg[pos + len(fx.ASSISTANT_MSG):]
    pos = usermsg.find(fx.USER_MSG)
    candidate = usermsg[:pos] if pos >= 0 else usermsg
    parts: list[str] = []
    seen_marker = False
    for seg in segmentize_markers(candidate):
        lower = seg.value.lower()
        if not seen_marker:
            if seg.type is SegmentType.MARKER and ("end" in lower or "close" in lower):
                continue
            if seg.type is SegmentType.TEXT and not trim_whitespace(seg.value):
                continue
        seen_marker |= seg.type is SegmentType.MARKER
        parts.append(seg.value)
    return trim_whitespace("".join(parts))

