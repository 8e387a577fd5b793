"""Recovering what the model meant (autoparser/recovery), measured on outputs broken the way models break them.

Every round-trip golden our parse reads right (tests/data/roundtrip, made by the C++ reference) is broken by
each mutation that applies (autoparser.corpus.mutations: the last closer cut, text after the calls, the first
call opener left out, the reasoning start repeated). For each mutated output:

- `parse()` never raises and gives back what the mutation keeps (the calls, the reasoning); a known gap is in
  tests/data/ratchet/recovery.json with its reason;
- no text is lost: every word of the output is in a field, a recognised marker or a diagnostic;
- the stream, in chunks, gives the deltas of whole re-parses and ends on the same message and diagnostics;
- `parse(strict=True)` is the strict parse, unchanged.

The unbroken goldens must lose no text either, and their default parse must equal the strict one wherever
the strict one succeeds.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from autoparser.chat.compare import as_message, message_differences
from autoparser.corpus import Corpus
from autoparser.corpus.mutations import KINDS
from autoparser.corpus.roundtrip import generate_cached, generator_request
from autoparser.errors import ParseError
from autoparser.testing.ratchet import Ratchet
from autoparser.testing.recovery import check_mutations, markup_spans, unaccounted

DATA = Path(__file__).resolve().parent.parent / "data"
RATCHET = Ratchet(DATA / "ratchet" / "recovery.json")
GOLDEN_RATCHET = Ratchet(DATA / "ratchet" / "roundtrip.json")
SET_FOLDER = {"llamacpp": "templates", "packages": "packages", "hub": "hub"}
GOLDEN_FILES = ("roundtrip_seed.jsonl.gz", "roundtrip_packages.jsonl.gz", "roundtrip_hub.jsonl.gz")

CORPUS = Corpus.load()
_BY_ORIGIN = {o: e for e in CORPUS.entries for o in e.origins}


def _rows() -> dict[str, list[dict[str, Any]]]:
    by_template: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name in GOLDEN_FILES:
        with gzip.open(DATA / "roundtrip" / name, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if row.get("expected_from_output"):
                    by_template[f"{row['set']}:{row['template']}"].append(row)
    return by_template


ROWS = _rows()
TEMPLATES = sorted(ROWS)


def row_id(row: dict[str, Any]) -> str:
    return f"{row['set']}:{row['template']}::{row['scenario']}"


def _source(row: dict[str, Any]) -> str:
    return _BY_ORIGIN[f"seed:{SET_FOLDER[row['set']]}/{row['template']}"].read_text()


@pytest.mark.parametrize("template", TEMPLATES)
def test_mutated_outputs_are_recovered(template: str) -> None:
    results: dict[str, str | None] = {}
    bugs: list[str] = []
    for row in ROWS[template]:
        if row_id(row) in GOLDEN_RATCHET.entries:
            continue  # our parse of the unbroken output is already wrong: nothing to recover towards
        source = _source(row)
        try:
            params = generate_cached(source, generator_request(row["request"]))
        except Exception:
            continue  # a request that cannot be built is the round-trip suite's to report
        for outcome in check_mutations(params, row["output"], as_message(row["expected_from_output"]),
                                       row_id(row)):
            results[outcome.case] = outcome.failure
            bugs += outcome.bugs
    assert not bugs, "\n".join(bugs)
    RATCHET.check_many(results)


def test_the_recovery_ratchet_names_real_cases() -> None:
    cases = set()
    for rows in ROWS.values():
        for row in rows:
            for kind in KINDS:
                cases.add(f"{row_id(row)}::{kind}")
    stale = sorted(set(RATCHET.entries) - cases)
    assert not stale, f"{RATCHET.path.name} names cases that do not exist: {stale}"


@pytest.mark.parametrize("template", TEMPLATES)
def test_well_formed_outputs_lose_no_text_and_parse_as_strictly(template: str) -> None:
    bugs: list[str] = []
    for row in ROWS[template]:
        source = _source(row)
        try:
            params = generate_cached(source, generator_request(row["request"]))
        except Exception:
            continue
        got = params.parse(row["output"])
        spans = markup_spans(params, row["output"], got)
        lost = unaccounted(row["output"], got, spans)
        if lost:
            bugs.append(f"{row_id(row)}: text lost: {dict(lost)} from {row['output']!r} -> {got}")
        try:
            strict = params.parse(row["output"], strict=True)
        except ParseError:
            continue
        if not got.diagnostics:
            diffs = message_differences(strict, got)
            if diffs:
                bugs.append(f"{row_id(row)}: default parse differs from the strict one without a repair: {diffs}")
    assert not bugs, "\n".join(bugs)
