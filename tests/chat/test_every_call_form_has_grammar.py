"""Every corpus template that renders an assistant's tool call gets a grammar that constrains that call.

For each corpus template and each round-trip scenario with calls (autoparser.corpus.roundtrip) that the template
renders so that the call shows after the prompt (every call's name, and its argument values where it has any),
`generate()` with that scenario's tools must give:

- a grammar, that llama.cpp's own engine compiles (autoparser.testing.gbnf_oracle);
- if it is lazy, triggers that fire on the rendered output, located as llama.cpp's test harness locates them
  (peg_tester.find_trigger);
- a grammar that accepts the rendered output from the trigger on (all of it when the grammar is not lazy).

A model trained on the template writes its calls as the template renders them: without a grammar, or a trigger
that fires on them, constrained decoding never starts (issue 35: bare `{"name": ..., "parameters": {...}}` calls of
Llama 3.x had none). One test per template, so that pytest-xdist spreads the corpus over its workers; the
templates that still fail are in tests/data/ratchet/call_grammars.json (`<template>::<scenario>`, with a
"gap:" or "policy:" reason), and a listed case that passes fails the test until it is removed.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest

from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.roundtrip import BuiltOutput, build_output, generate_cached, generator_request
from autoparser.errors import AutoparserError, GrammarError
from autoparser.params import ChatParams
from autoparser.testing.gbnf_oracle import LlamaGrammar, require_oracle
from autoparser.testing.peg_tester import find_trigger
from autoparser.testing.ratchet import Ratchet

pytestmark = [pytest.mark.oracle, pytest.mark.corpus]

RATCHET = Ratchet(Path(__file__).resolve().parent.parent / "data" / "ratchet" / "call_grammars.json")
ENTRIES = Corpus.load().entries
# The round-trip scenarios whose assistant message calls a tool.
CALL_SCENARIOS = ("c_one_tool_call", "d_parallel_tool_calls", "e_tool_call_reasoning", "f_tool_call_escapes",
                  "g_tool_call_with_content", "h_empty_arguments")


def shows_call(built: BuiltOutput) -> bool:
    """The rendered output after the prompt shows every call: its name, and its argument values (a call with
    no arguments has none to show)."""
    calls = built.intended["tool_calls"]
    return all(c["name"] in built.output for c in calls) \
        and (built.output_has.get("tool_args", False) or all(c["arguments"] == "{}" for c in calls))


def grammar_failure(params: ChatParams, output: str) -> str | None:
    """Why the grammar of `params` does not constrain `output` to what it is, or None."""
    if not params.grammar:
        return "no grammar"
    try:
        grammar = LlamaGrammar(params.grammar)
    except GrammarError as e:
        return f"llama.cpp cannot compile the grammar: {e}"
    full = params.generation_prompt + output
    found = find_trigger(params, full, expects_calls=True)
    if params.grammar_lazy and found.position is None:
        return "no trigger fires on it; triggers: " + ", ".join(repr(t.value) for t in params.grammar_triggers)
    constrained = full[max(found.position, len(params.generation_prompt)):] if found.position is not None \
        else full
    if grammar.accepts(constrained):
        return None
    at, taken = grammar.stop(constrained, sorted(set(string.printable)))
    how = "wants more after it" if at == len(constrained) else f"rejects {constrained[at:at + 40]!r}"
    return f"the grammar takes {constrained[:at][-60:]!r} then {how} (it would take {''.join(taken)[:20]!r})"


def scenario_failure(source: str, scenario: str) -> tuple[bool, str | None]:
    """(whether the template shows the scenario's call, why its grammar fails it or None)."""
    try:
        built = build_output(source, scenario)
    except AutoparserError:
        return False, None  # a template that does not compile renders nothing (the corpus tests say so)
    if built.not_expressible is not None or not shows_call(built):
        return False, None
    try:
        params = generate_cached(source, generator_request(built.request))
    except AutoparserError as e:
        return True, f"generate() raises {type(e).__name__}: {e}"
    return True, grammar_failure(params, built.output)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_rendered_calls_have_a_grammar(entry: CorpusEntry) -> None:
    require_oracle()
    source, name = entry.read_text(), entry.name
    results: dict[str, str | None] = {}
    for scenario in CALL_SCENARIOS:
        shown, failure = scenario_failure(source, scenario)
        if shown:
            results[f"{name}::{scenario}"] = failure
    # a listed scenario the template no longer shows a call in is stale, as one that passes
    stale = {case: None for case in RATCHET.entries if case.startswith(f"{name}::") and case not in results}
    RATCHET.check_many({**results, **stale})


def test_ratchet_names_real_cases() -> None:
    RATCHET.check_known(f"{e.name}::{s}" for e in ENTRIES for s in CALL_SCENARIOS)


def test_a_bare_json_call_wakes_the_grammar_where_other_json_does_not() -> None:
    """Llama 3.1 writes `{"name": NAME, "parameters": {...}}` with no marker: each tool's trigger is that opening
    with its name, so a JSON object in the content that names no tool leaves the lazy grammar asleep."""
    require_oracle()
    from autoparser import generate, load_template
    from autoparser.corpus.roundtrip import WEATHER_TOOL

    params = generate(load_template("meta-llama__Llama-3.1-8B-Instruct").source, {
        "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL]})
    assert params.grammar_lazy and params.grammar
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    assert grammar_failure(params, call) is None
    assert grammar_failure(params, '{\n  "name": "get_weather",\n  "parameters": {"city": "Paris"}}') is None
    assert find_trigger(params, params.generation_prompt + '{"name": "Bob", "age": 3}', expects_calls=False) \
        .position is None
    assert params.parse(call).tool_calls[0].name == "get_weather"
