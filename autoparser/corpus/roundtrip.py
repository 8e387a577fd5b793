"""Round-trip conformance for any chat template, with no hand-written expectations.

For each scenario an *intended* assistant message is rendered after the prompt (HF semantics: bos/eos empty,
clock pinned to 2024-07-26 12:00 UTC); the model's part is the full rendering minus the prompt rendered with
add_generation_prompt=True, with the end-of-turn suffix cut off. That text is parsed back with
`autoparser.generate(source, request).parse(output)` and compared with the intended message reduced to what
the output visibly holds (a template that drops reasoning from history cannot be blamed on the parser).

The requests and intended messages are those of the C++ goldens (conformance/roundtrip_*.jsonl), so our
outputs can be compared with theirs; `h_empty_arguments` is new (a call with `{}` arguments).

    results = run_roundtrip(source)          # one ScenarioResult per SCENARIOS entry, never raises
    built = build_output(source, "c_one_tool_call")
    built.request, built.output, built.expected, built.not_expressible
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from autoparser.chat.compare import as_message, message_differences
from autoparser.errors import AutoparserError
from autoparser.params import ChatParams, generate
from autoparser.template.render import ChatTemplate
from autoparser.types import ChatMessage

__all__ = [
    "NOW",
    "NOW_TEXT",
    "QUESTION_WEATHER",
    "SCENARIOS",
    "SEARCH_TOOL",
    "WEATHER_TOOL",
    "BuiltOutput",
    "ScenarioResult",
    "build_output",
    "expressible_scenarios",
    "generate_cached",
    "generator_request",
    "run_roundtrip",
    "scenario_request",
]

SCENARIOS: tuple[str, ...] = (
    "a_plain",
    "a2_plain_thinking_on",
    "b_reasoning",
    "c_one_tool_call",
    "d_parallel_tool_calls",
    "e_tool_call_reasoning",
    "f_tool_call_escapes",
    "g_tool_call_with_content",
    "h_empty_arguments",
)

# The goldens pinned the template clock here; the request's `now` says the same to the generator.
NOW = datetime(2024, 7, 26, 12, 0, tzinfo=timezone.utc)
NOW_TEXT = "2024-07-26"

WEATHER_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
        "required": ["city"]}}}
SEARCH_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "The search query"},
        "max_results": {"type": "integer", "description": "Maximum number of results"}},
        "required": ["query", "max_results"]}}}
# h_empty_arguments needs a tool whose schema allows `{}`: calling get_weather without its required city
# would test schema violations, not the empty-object path.
_TIME = {"type": "function", "function": {
    "name": "get_current_time", "description": "Get the current time",
    "parameters": {"type": "object", "properties": {}}}}

_Q_CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
QUESTION_WEATHER = {"role": "user", "content": "What is the weather in Paris?"}
_Q_WEATHER = [QUESTION_WEATHER]
_Q_TIME = [{"role": "user", "content": "What time is it?"}]
_PARIS = "The capital of France is Paris."
_PARIS_CALL = {"name": "get_weather", "arguments": '{"city": "Paris"}'}


@dataclass(frozen=True)
class _Scenario:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    enable_thinking: bool
    parallel_tool_calls: bool
    content: str
    reasoning: str
    calls: list[dict[str, str]]  # name + arguments as a JSON string, like the goldens' `intended`


_SPECS: dict[str, _Scenario] = {
    "a_plain": _Scenario(_Q_CAPITAL, [], False, False, _PARIS, "", []),
    "a2_plain_thinking_on": _Scenario(_Q_CAPITAL, [], True, False, _PARIS, "", []),
    "b_reasoning": _Scenario(_Q_CAPITAL, [], True, False, _PARIS,
                             "The user asks about France. Paris is the capital.", []),
    "c_one_tool_call": _Scenario(_Q_WEATHER, [WEATHER_TOOL, SEARCH_TOOL], False, False, "", "", [_PARIS_CALL]),
    "d_parallel_tool_calls": _Scenario(_Q_WEATHER, [WEATHER_TOOL, SEARCH_TOOL], False, True, "", "", [
        _PARIS_CALL, {"name": "search", "arguments": '{"query": "llama.cpp", "max_results": 3}'}]),
    "e_tool_call_reasoning": _Scenario(_Q_WEATHER, [WEATHER_TOOL, SEARCH_TOOL], True, False, "",
                                       "The user wants the weather in Paris. I should call get_weather.",
                                       [_PARIS_CALL]),
    "f_tool_call_escapes": _Scenario(_Q_WEATHER, [WEATHER_TOOL, SEARCH_TOOL], False, False, "", "", [
        {"name": "get_weather", "arguments": json.dumps({"city": 'Zürich "center"\nline2'}, ensure_ascii=False)}]),
    "g_tool_call_with_content": _Scenario(_Q_WEATHER, [WEATHER_TOOL, SEARCH_TOOL], False, False,
                                          "Let me check the weather for you.", "", [_PARIS_CALL]),
    "h_empty_arguments": _Scenario(_Q_TIME, [WEATHER_TOOL, SEARCH_TOOL, _TIME], False, False, "", "",
                                   [{"name": "get_current_time", "arguments": "{}"}]),
}

# Tokens that end a generation although they differ from the end-of-turn suffix found by rendering (Llama 3.1
# ends tool calls with <|eom_id|>, Nemotron and Hunyuan use their own). The goldens strip these too.
_EOG_TOKENS = ("<|eom_id|>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<SPECIAL_12>",
               "<|END_OF_TURN_TOKEN|>", "<end_of_turn>", "<｜end▁of▁sentence｜>", "</s>")
_EOG_RE = re.compile("(" + "|".join(re.escape(t) for t in _EOG_TOKENS) + r"|<｜hy_eos[^<>]*｜>)\s*\Z")
# Content with this marker finds the end-of-turn suffix: nothing a template does to plain words changes it.
_MARKER = "RoundTripEndMarker"


@dataclass(frozen=True)
class ScenarioResult:
    scenario: str
    status: str  # "pass" | "fail" | "not_expressible" | "error"
    output: str
    expected: dict[str, Any] | None
    parsed: dict[str, Any] | None
    detail: str  # reason (not_expressible), differences (fail) or error message (error); "" on pass


@dataclass(frozen=True)
class BuiltOutput:
    """What one scenario renders to on one template.

    `request` is golden-shaped (tool_choice "auto", no `now`); `generator_request(request)` turns it into what
    `autoparser.generate` takes. `not_expressible` is the reason the template cannot express the scenario, or
    None; the other fields are filled as far as rendering got (the output is still useful for comparisons).
    """

    scenario: str
    request: dict[str, Any]
    intended: dict[str, Any]
    output: str
    expected: dict[str, Any]
    output_has: dict[str, bool]
    args_form: str | None
    reasoning_key: str | None
    id_style: str | None
    eot_suffix: str | None
    suffix_stripped: str
    not_expressible: str | None


def scenario_request(scenario: str) -> dict[str, Any]:
    """The golden-shaped request of a scenario (fresh copy: callers may mutate it)."""
    s = _SPECS[scenario]
    return {"messages": copy.deepcopy(s.messages), "tools": copy.deepcopy(s.tools), "tool_choice": "auto",
            "parallel_tool_calls": s.parallel_tool_calls, "enable_thinking": s.enable_thinking,
            "reasoning_format": "auto", "add_generation_prompt": True}


def generator_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A golden-shaped request as `autoparser.generate` takes it (as ../shared/tools/measure.py converts it)."""
    req = {k: v for k, v in request.items() if k not in ("id", "template", "outputs", "is_partial")}
    req.update(now=NOW_TEXT, json_schema="", continue_final_message=0,
               tool_choice={"auto": 0, "required": 1, "none": 2}.get(str(req.get("tool_choice", "auto")), 0))
    return req


def _intended(s: _Scenario) -> dict[str, Any]:
    return {"role": "assistant", "content": s.content, "reasoning_content": s.reasoning,
            "tool_calls": [dict(c) for c in s.calls]}


def _assistant_message(s: _Scenario, args_form: str, reasoning_key: str, id_style: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": s.content}
    if s.reasoning:
        msg[reasoning_key] = s.reasoning
    if s.calls:
        calls = []
        for i, c in enumerate(s.calls):
            args: Any = json.loads(c["arguments"]) if args_form == "object" else c["arguments"]
            # Kimi templates print the id verbatim and their parsers read the name back out of it; the plain id
            # is 9 alphanumerics because Mistral templates reject anything else.
            call_id = f"functions.{c['name']}:{i}" if id_style == "kimi" else f"call{i + 1:05d}"
            calls.append({"id": call_id, "type": "function", "function": {"name": c["name"], "arguments": args}})
        msg["tool_calls"] = calls
    return msg


def _visible_text(value: Any, output: str) -> bool:
    """Whether an argument value shows in the output, raw or JSON-escaped (XML-style and JSON-style formats)."""
    if isinstance(value, dict):
        return all(_visible_text(k, output) and _visible_text(v, output) for k, v in value.items())
    if isinstance(value, list):
        return all(_visible_text(v, output) for v in value)
    text = value if isinstance(value, str) else json.dumps(value)
    forms = {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}
    return any(f in output for f in forms)


def _args_visible(arguments: str, output: str) -> bool:
    args = json.loads(arguments)
    # A template printing a Python dict ({'city': 'Paris'}) has not shown JSON arguments: the string form is
    # what it expects.
    if args and str(args) in output:
        return False
    return _visible_text(args, output)


def _visibility(s: _Scenario, output: str) -> dict[str, bool]:
    has: dict[str, bool] = {}
    if s.content:
        has["content"] = s.content.strip() in output
    if s.reasoning:
        has["reasoning"] = s.reasoning.strip() in output
    if s.calls:
        has["tool_names"] = all(c["name"] in output for c in s.calls)
        has["tool_args"] = all(_args_visible(c["arguments"], output) for c in s.calls)
    return has


def _reduce(intended: dict[str, Any], has: Mapping[str, bool], output: str) -> dict[str, Any]:
    """The intended message minus what the output does not show. Calls are kept one by one when their name
    shows (the goldens do the same: a template rendering only the first of two calls still expects that one)."""
    out = dict(intended)
    if not has.get("content", True):
        out["content"] = ""
    if not has.get("reasoning", True):
        out["reasoning_content"] = ""
    out["tool_calls"] = [c for c in intended["tool_calls"] if c["name"] in output]
    return out


def _strip_suffix(raw: str, eot: str | None) -> tuple[str, str]:
    """Cut the end-of-turn suffix: exactly, else from an end-of-generation token of it, else a lone EOG token."""
    if eot and raw.endswith(eot):
        return raw[: len(raw) - len(eot)], "exact"
    if eot:
        # Cohere ends a tool-call turn with the tail of its text-turn suffix (no <|END_RESPONSE|>).
        for m in re.finditer("|".join(re.escape(t) for t in _EOG_TOKENS), eot):
            if m.start() > 0 and raw.endswith(eot[m.start():]):
                return raw[: len(raw) - (len(eot) - m.start())], "eog_partial"
    m2 = _EOG_RE.search(raw)
    if m2 is not None:
        return raw[: m2.start()], "eog_token"
    return raw, ("not_found" if eot else "none")


@lru_cache(maxsize=64)
def _template(source: str) -> ChatTemplate:
    return ChatTemplate(source)


class _NotExpressible(Exception):
    pass


def _render(tmpl: ChatTemplate, s: _Scenario, extra: list[dict[str, Any]], add_generation_prompt: bool) -> str:
    try:
        return tmpl.render([*copy.deepcopy(s.messages), *extra], tools=copy.deepcopy(s.tools) or None,
                           add_generation_prompt=add_generation_prompt, enable_thinking=s.enable_thinking,
                           now=NOW)
    except AutoparserError as e:
        raise _NotExpressible(f"rendering raises: {e}") from None


def _eot_suffix(tmpl: ChatTemplate, s: _Scenario) -> str | None:
    try:
        text = _render(tmpl, s, [{"role": "assistant", "content": _MARKER}], False)
    except _NotExpressible:
        return None
    at = text.rfind(_MARKER)
    return text[at + len(_MARKER):] if at >= 0 else None


def _raw(tmpl: ChatTemplate, s: _Scenario, prompt: str, msg: dict[str, Any]) -> str:
    full = _render(tmpl, s, [msg], False)
    if not full.startswith(prompt):
        raise _NotExpressible("the prompt (add_generation_prompt=True) is not a prefix of the rendering with "
                              "the assistant message")
    return full[len(prompt):]


def build_output(source: str, scenario: str) -> BuiltOutput:
    """Render one scenario on one template. Raises only for an unknown scenario or a template that does not
    compile (TemplateError); everything the template cannot express is in `not_expressible`."""
    s = _SPECS[scenario]
    tmpl = _template(source)
    intended = _intended(s)
    request = scenario_request(scenario)

    def fail(reason: str, output: str = "", **kw: Any) -> BuiltOutput:
        fields: dict[str, Any] = {"output_has": {}, "args_form": None, "reasoning_key": None, "id_style": None,
                                  "eot_suffix": None, "suffix_stripped": "none"}
        fields.update(kw)
        return BuiltOutput(scenario, request, intended, output, _reduce(intended, fields["output_has"], output),
                           not_expressible=reason, **fields)

    try:
        prompt = _render(tmpl, s, [], True)
        eot = _eot_suffix(tmpl, s)
        # Which shapes the template understands is found by trying: arguments as an object first (what most
        # templates expect), a JSON string when the object does not show; the reasoning under the keys
        # templates read; Kimi-style ids when the template prints the id (its parser takes the name from it).
        args_forms = ("object", "string") if s.calls else ("object",)
        reasoning_keys = ("reasoning_content", "thinking", "reasoning") if s.reasoning else ("reasoning_content",)
        chosen: tuple[int, str, str, str] | None = None
        first_error: _NotExpressible | None = None
        for args_form in args_forms:
            for key in reasoning_keys:
                try:
                    raw = _raw(tmpl, s, prompt, _assistant_message(s, args_form, key, "plain"))
                except _NotExpressible as e:
                    first_error = first_error or e
                    continue
                # The first shape showing the most parts wins (ties keep the earlier, more common shape).
                score = sum(_visibility(s, raw).values())
                if chosen is None or score > chosen[0]:
                    chosen = (score, args_form, key, raw)
        if chosen is None:
            raise first_error or _NotExpressible("rendering failed")
        _, args_form, key, raw = chosen
        id_style = "plain"
        if s.calls and "call00001" in raw and "<|tool_call_argument_begin|>" in tmpl.source:
            id_style = "kimi"
            raw = _raw(tmpl, s, prompt, _assistant_message(s, args_form, key, id_style))
    except _NotExpressible as e:
        return fail(str(e))
    except RecursionError:
        return fail("rendering recursed too deeply")
    output, stripped = _strip_suffix(raw, eot)
    has = _visibility(s, output)
    info: dict[str, Any] = {"output_has": has, "args_form": args_form if s.calls else None,
                            "reasoning_key": key if s.reasoning else None,
                            "id_style": id_style if s.calls else None, "eot_suffix": eot,
                            "suffix_stripped": stripped}
    if s.calls and not any(c["name"] in output for c in s.calls):
        return fail("no tool call shows in the rendered output (no tool-call support in history)", output,
                    **info)
    if not any(has.values()):
        return fail("nothing of the assistant message shows in the rendered output", output, **info)
    return BuiltOutput(scenario, request, intended, output, _reduce(intended, has, output), not_expressible=None,
                       **info)


def _message_dict(m: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content, "reasoning_content": m.reasoning_content,
                           "tool_calls": [{"name": c.name, "arguments": c.arguments, "id": c.id} for c in m.tool_calls]}
    if m.diagnostics:  # the template's own rendering only parses with repairs: worth seeing
        out["diagnostics"] = [f"{d.kind}: {d.message}" for d in m.diagnostics]
    return out


@lru_cache(maxsize=32)
def _generate(source: str, request_json: str) -> ChatParams:
    return generate(source, json.loads(request_json))


def generate_cached(source: str, request: Mapping[str, Any]) -> ChatParams:
    """`generate(source, request)`, cached: scenarios (and the goldens' rows) of one template share requests,
    and generation (analysis included) is the expensive step of a round-trip. The key keeps the request's key
    order: a schema's property order is the argument order of XML-style tool calls."""
    return _generate(source, json.dumps(request, ensure_ascii=False))


def _run_one(source: str, scenario: str) -> ScenarioResult:
    try:
        built = build_output(source, scenario)
    except AutoparserError as e:
        return ScenarioResult(scenario, "not_expressible", "", None, None, f"template does not compile: {e}")
    except Exception as e:  # a bug in our renderer: reported, never raised (run_roundtrip's contract)
        return ScenarioResult(scenario, "error", "", None, None, f"build crashed: {type(e).__name__}: {e}")
    if built.not_expressible is not None:
        return ScenarioResult(scenario, "not_expressible", built.output, built.expected, None,
                              built.not_expressible)
    try:
        params = generate_cached(source, generator_request(built.request))
    except AutoparserError as e:
        return ScenarioResult(scenario, "error", built.output, built.expected, None,
                              f"generate: {type(e).__name__}: {e}")
    except Exception as e:  # a bug in our pipeline, reported per scenario rather than aborting the run
        return ScenarioResult(scenario, "error", built.output, built.expected, None,
                              f"generate crashed: {type(e).__name__}: {e}")
    try:
        parsed = _message_dict(params.parse(built.output))
    except AutoparserError as e:
        return ScenarioResult(scenario, "fail", built.output, built.expected, None,
                              f"parse: {type(e).__name__}: {e}")
    except Exception as e:
        return ScenarioResult(scenario, "error", built.output, built.expected, None,
                              f"parse crashed: {type(e).__name__}: {e}")
    diffs = message_differences(as_message(built.expected), as_message(parsed), compare_ids=False)
    return ScenarioResult(scenario, "fail" if diffs else "pass", built.output, built.expected, parsed,
                          "; ".join(diffs))


def expressible_scenarios(source: str) -> Iterator[tuple[BuiltOutput, ChatParams]]:
    """Each scenario this template can express, rendered, with the generated parameters of its request (shared
    through the caches); a scenario that cannot be built or generated is skipped (run_roundtrip reports it)."""
    for scenario in SCENARIOS:
        try:
            built = build_output(source, scenario)
            if built.not_expressible is not None:
                continue
            params = generate_cached(source, generator_request(built.request))
        except AutoparserError:
            continue
        yield built, params


def run_roundtrip(source: str) -> tuple[ScenarioResult, ...]:
    """One result per SCENARIOS entry, in order. Never raises on a bad template."""
    return tuple(_run_one(source, name) for name in SCENARIOS)
