"""Request + template -> ChatParams: prompt, parser, grammar and triggers (`common_chat_templates_apply`).

Order of work, as in llama.cpp's `common_chat_templates_apply_jinja`: prepare the request for the template
(chat/inputs.py), take the specialised format that claims the template if there is one (chat/handlers/),
otherwise the format the template's analysis describes (chat/generic.py), and assemble the result
(`assemble`: the format's parser and grammar, and its relaxed parser for the recovery). The template is
compiled, probed and analysed once per source and kept for the next request.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from autoparser.analysis.analyzer import analyze_template
from autoparser.analysis.model import TemplateAnalysis
from autoparser.chat.builder import ChatBuilder
from autoparser.chat.generic import derived_format
from autoparser.chat.handlers import find_handler
from autoparser.chat.inputs import GenerationInputs, prepare_inputs
from autoparser.chat.request import ChatRequest
from autoparser.chat.spec import Build, FormatSpec, TriggerType, render
from autoparser.chat.tools import functions
from autoparser.errors import AnalysisError, AutoparserError
from autoparser.gbnf.from_peg import arena_to_gbnf
from autoparser.params.result import ChatParams
from autoparser.peg.nodes import C_SPACE
from autoparser.recovery import RelaxedBuilder, plan_of
from autoparser.recovery.coverage import SPECIAL_TOKEN
from autoparser.template.caps import TemplateCaps, template_caps
from autoparser.template.render import ChatTemplate
from autoparser.template.sandbox import time_budget as budget

__all__ = ["assemble", "cached_analysis", "cached_caps", "format_name", "generate", "strict_analysis"]


@functools.lru_cache(maxsize=64)
def _template(source: str) -> ChatTemplate:
    return ChatTemplate(source)


@functools.lru_cache(maxsize=64)
def cached_caps(source: str) -> TemplateCaps:
    """The template's capabilities, probed once per source (generate() and the corpus artefacts share it)."""
    return template_caps(_template(source))


@functools.lru_cache(maxsize=64)
def cached_analysis(source: str) -> TemplateAnalysis:
    """The (non-strict) template analysis, run once per source on the capabilities already probed."""
    return analyze_template(_template(source), caps=cached_caps(source))


def strict_analysis(source: str) -> TemplateAnalysis:
    """The strict analysis (`autoparser analyze --json`), without analysing twice: the cached one differs from
    it only when no analysis conversation rendered (every field but the caps a default), and only then is the
    strict one run, to get the same result (or the same error) as the command line."""
    analysis = cached_analysis(source)
    if replace(analysis, caps=TemplateAnalysis().caps) == TemplateAnalysis():
        analysis = analyze_template(source, strict=True)
    return analysis


@functools.lru_cache(maxsize=64)
def _format(source: str) -> FormatSpec:
    """The template's chat format: a specialised one, or the one its analysis describes."""
    spec = find_handler(source)
    if spec is not None:
        if spec.fit is None:
            return spec
        try:
            return spec.fit(spec, cached_analysis(source))
        except AutoparserError:
            return spec  # (the handler reads the template without its analysis, as the C++ does)
    try:
        analysis = cached_analysis(source)
    except AutoparserError as e:
        raise AnalysisError(f"Unable to generate parser for this template. Automatic parser generation failed: {e}") \
            from e
    return derived_format(analysis.effective)


@functools.lru_cache(maxsize=64)
def _request_caps(source: str) -> TemplateCaps:
    """The capabilities a request is prepared with (the C++ workarounds they switch): the probed ones, or, where
    the parser comes from the template as transformers renders it (`TemplateAnalysis.transformers_reading`), the
    caps of that reading, so that the prompt is rendered as the parser was derived."""
    if find_handler(source) is None:
        reading = cached_analysis(source).transformers_reading
        if reading is not None:
            return reading.caps
    return cached_caps(source)


def format_name(source: str) -> str:
    """Which format parses this template's output: a specialised handler's name, or "autoparser" for the
    analyzer's generic path (what the nightly report calls the handler choice)."""
    return _format(source).name


def generate(source: str, request: Mapping[str, object] | ChatRequest, *,
             time_budget: float | None = None) -> ChatParams:
    """Prompt, parser and grammar for one request on one template (`common_chat_templates_apply`). Every render
    it makes shares one wall-clock budget (`time_budget` seconds, default DEFAULT_TIME_BUDGET: 10 s, or
    AUTOPARSER_TIME_BUDGET): a template that outlasts it raises TemplateError naming what was being done."""
    req = ChatRequest.from_dict(request)
    with budget(time_budget, "generating"):
        tmpl = _template(source)
        fmt = _format(source)
        inputs = prepare_inputs(tmpl, _request_caps(source), req)
        with budget(phase="rendering the prompt"):
            params = assemble(fmt, tmpl, inputs)
    return replace(params, messages=inputs.messages, tools=tuple(inputs.tools or ()))


_TURN_PROBE = "Probe of the turn's end."


@functools.lru_cache(maxsize=64)  # (per template: `_template` keeps one per source)
def turn_end_tokens(tmpl: ChatTemplate) -> tuple[str, ...]:
    """The special token that ends an assistant's turn, as a render shows it: the last one of what the template
    writes after the message's text (`<|im_end|>`, `<|END_OF_TURN_TOKEN|>` after `<|END_TEXT|>`); none where
    that ends otherwise, or the template cannot render such a turn. (Only the last: the tokens before it may
    separate parts of the turn, Kimi K3's `<|sep|>`.)"""
    try:
        text = tmpl.render([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _TURN_PROBE}],
                           add_generation_prompt=False)
    except AutoparserError:
        return ()
    at = text.rfind(_TURN_PROBE)
    suffix = text[at + len(_TURN_PROBE):].rstrip(C_SPACE) if at >= 0 else ""
    last = list(SPECIAL_TOKEN.finditer(suffix))
    return (last[-1].group(),) if last and last[-1].end() == len(suffix) else ()


def assemble(spec: FormatSpec, tmpl: ChatTemplate, inputs: GenerationInputs) -> ChatParams:
    """Prompt, parser, grammar and triggers of one request in one format (each C++ `common_chat_params_init_*`)."""
    rendered = render(spec, tmpl, inputs)
    prompt, gp = rendered.prompt, rendered.generation_prompt
    if inputs.has_continuation:
        gp = spec.prefill(rendered, inputs.continue_msg or {}, inputs.continuation)
        prompt += gp
    p = ChatBuilder()
    b = Build(p, inputs, rendered.generation_prompt, spec.response_format.given(inputs.json_schema),
              spec.reasoning and inputs.reasoning_format != "none", prompt=rendered.prompt)
    arena = p.build(spec.build(b))
    triggers = spec.grammar_triggers(inputs)
    lazy = spec.lazy(b)
    tool_calls = b.tool_calls and spec.calls
    # Without a trigger a lazy grammar would never apply: the C++ then emits none.
    include_grammar = b.response_format or (tool_calls and (not lazy or bool(triggers)))
    grammar = ""
    if include_grammar:
        grammar = arena_to_gbnf(arena, lazy=lazy)
        if spec.triggers_only_when_lazy and not lazy:
            triggers = ()
    else:
        lazy, triggers = False, ()
    markers = tuple(dict.fromkeys(t.value.strip() for t in spec.grammar_triggers(inputs)
                                  if t.type is TriggerType.WORD and t.value.strip())) if tool_calls else ()
    relaxed = arena
    if spec.relaxes:  # the same build on the relaxed builder (recovery/relax.py)
        rb = RelaxedBuilder()
        relaxed = rb.build((spec.relaxed_build or spec.build)(replace(b, p=rb)))
    recovery = plan_of(relaxed, reasoning_start=spec.thinking_start_tag.strip(C_SPACE),
                       # (where the request extracts reasoning: with reasoning_format "none" it stays in the content)
                       reasoning_end=next((e.strip(C_SPACE) for e in spec.thinking_end_tags if e.strip(C_SPACE)), "")
                       if b.extract_reasoning else "",
                       # (reasoning without its start is read only where the request asks for reasoning)
                       reasoning_requested=inputs.enable_thinking,
                       tools=tuple(functions(inputs.tools, typed=False)) if tool_calls else (), call_markers=markers,
                       turn_end=turn_end_tokens(tmpl))
    return ChatParams(
        format=spec.format, prompt=prompt, generation_prompt=gp, parser=arena, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=spec.preserved_tokens,
        additional_stops=spec.additional_stops, supports_thinking=spec.supports_thinking,
        thinking_start_tag=spec.thinking_start_tag, thinking_end_tags=spec.thinking_end_tags,
        message_delimiters=spec.message_delimiters, handler=spec.name, recovery=recovery,
        template_context=rendered.context)
