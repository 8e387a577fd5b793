"""The response_template export of a template checked by transformers' own parser on the round-trip scenarios.

For each scenario the template can express (the intended message rendered after the prompt, corpus/roundtrip),
transformers' `parse_response` reads the output with the prompt as its prefix and the request's tools, and its
streaming `ResponseParser` is fed the same output in small chunks; both must give the intended message under
the C++ comparison rules (content and reasoning stripped, arguments compared as JSON, ids ignored). Used by the
test suite (tests/export) and by the corpus report's column.
"""

from __future__ import annotations

from typing import Any

from autoparser.chat.compare import as_message, message_differences
from autoparser.corpus.roundtrip import expressible_scenarios
from autoparser.errors import AutoparserError
from autoparser.export import response_template, transformers_message

__all__ = ["transformers_results"]


def _parsed(spec: dict[str, Any], output: str, prompt: str, tools: list[Any] | None) -> tuple[Any, Any]:
    """transformers' whole parse and its stream's final message (fed 5 characters at a time)."""
    from transformers.utils import chat_parsing

    whole = chat_parsing.parse_response(output, spec, prefix=prompt, tools=tools)
    stream = chat_parsing.ResponseParser(spec, prefix=prompt, tools=tools)
    for i in range(0, len(output), 5):
        stream.feed(output[i:i + 5])
    streamed, _ = stream.finalize()
    return whole, streamed


def transformers_results(name: str, source: str) -> dict[str, str | None]:
    """`name::scenario` -> None (transformers reads the intended message) or what differs; {} when the template
    has no export. ImportError without transformers."""
    try:
        spec = response_template(source)
    except AutoparserError:  # not expressible (response_template.json says why), or no analysis
        return {}
    results: dict[str, str | None] = {}
    for built, params in expressible_scenarios(source):
        tools = built.request.get("tools") or None
        try:
            whole, streamed = _parsed(spec, built.output, params.prompt, tools)
            problems = [f"whole: {d}" for d in message_differences(
                as_message(built.expected), as_message(transformers_message(whole)), compare_ids=False)]
            if streamed != whole:
                problems.append(f"streamed: {streamed!r} is not the whole parse {whole!r}")
        except (ValueError, KeyError) as e:  # transformers' own errors: a region its parser or transform refuses
            problems = [f"transformers raised: {str(e).splitlines()[0]}"]
        results[f"{name}::{built.scenario}"] = "; ".join(problems) or None
    return results
