"""generate() refuses a request key it does not take (a misspelt one would change nothing without a word), and
every request the repository's data hands it holds only keys it takes: the C++ chat cases, the round-trip goldens
and scenarios, the snapshot artefacts' grammar requests and the peers' vectors (as their tests build them). The
data is checked all at once here, without rendering; a request with another key would fail its own test, row by
row, as generate() refuses it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from test_peers import VECTORS, peer_request

from autoparser import AutoparserError, UnknownKeyError, generate
from autoparser.chat.request import ChatRequest
from autoparser.corpus.artefacts import GRAMMAR_REQUESTS
from autoparser.corpus.roundtrip import SCENARIOS, generator_request, scenario_request
from autoparser.testing.chat_cases import ChatCases

DATA = Path(__file__).resolve().parent.parent / "data"
SOURCE = "{% for m in messages %}{{ m.content }}{% endfor %}"


def requests() -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, request) for every request the data gives generate()."""
    cases = ChatCases(DATA)
    for case_id, case in zip(cases.ids, cases.cases):
        yield f"chat case {case_id}", cases.request(case)
    for path in sorted((DATA / "roundtrip").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                yield f"{path.name}:{i + 1}", generator_request(json.loads(line)["request"])
    for scenario in SCENARIOS:
        yield f"round-trip scenario {scenario}", generator_request(scenario_request(scenario))
    for name, request in GRAMMAR_REQUESTS.items():
        yield f"artefact {name}", request
    for vector in VECTORS:
        yield f"peer vector {vector['id']}", peer_request(vector)


def test_every_request_of_the_data_is_accepted() -> None:
    refused = []
    seen = 0
    for where, request in requests():
        seen += 1
        try:
            ChatRequest.from_dict(request)
        except AutoparserError as e:
            refused.append(f"{where}: {e}")
    assert refused == []
    assert seen > 7000  # (463 chat cases, 6 294 round-trip rows, the scenarios, artefacts and peers)


@pytest.mark.parametrize(("key", "meant"), [("tool", "tools"), ("enable_thinkng", "enable_thinking"),
                                            ("reasoning", "reasoning_format")])
def test_a_misspelt_key_is_refused_with_the_key_it_resembles(key: str, meant: str) -> None:
    with pytest.raises(UnknownKeyError, match=rf"generate\(\): unknown key '{key}' in the request \(did you mean "
                                              rf"'{meant}'\?\); it has messages, tools, "):
        generate(SOURCE, {"messages": [{"role": "user", "content": "hi"}], key: True})


def test_an_unknown_key_is_one_of_ours_and_a_value_error() -> None:
    with pytest.raises(UnknownKeyError, match=r"unknown key 'colour' in the request; it has") as info:
        generate(SOURCE, {"messages": [], "colour": "blue"})
    assert isinstance(info.value, AutoparserError) and isinstance(info.value, ValueError)
