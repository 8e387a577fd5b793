"""Round-trip conformance: the C++ round-trip goldens, our generator against them, and every corpus template.

One test per corpus template (so pytest-xdist balances ~950 small cases, and the three checks share one
generation per request through `generate_cached`) runs every row of that template:

a. golden parse: each golden `output` parsed with `generate(source, request)` equals `expected_from_output`
   (the C++ test's comparison rules, ids ignored). Ids `<set>:<template>::<scenario>` in ratchet/roundtrip.json.
b. render: our build of the golden's scenario yields the golden's `output` byte for byte. Ids
   `render:<set>:<template>::<scenario>` in ratchet/roundtrip_render.json.
c. self round-trip: `run_roundtrip(source)` gives pass or not_expressible for every scenario. Ids
   `self:<entry name>::<scenario>` in ratchet/roundtrip.json.
d. streaming: each golden output (and each of our outputs no golden has) streamed 3 bytes at a time and in
   random byte chunks gives, chunk by chunk, the deltas of whole re-parses (autoparser.testing.streaming). A
   bug of ours, never ratcheted.

Ratchet semantics per template test: every failing row must be listed and every listed row must fail. If some
row breaks that, the test fails and reports all such rows together (one problem never hides another); if all
failing rows are listed the test is an xfail naming each listed row; otherwise it passes.

The goldens are copies made by tools/copy_roundtrip_goldens.py (tests never read ../shared).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from autoparser.chat.compare import as_message, message_differences
from autoparser.corpus import Corpus
from autoparser.corpus.roundtrip import (
    SCENARIOS,
    ScenarioResult,
    generate_cached,
    generator_request,
    run_roundtrip,
    scenario_request,
)
from autoparser.testing.ratchet import Ratchet
from autoparser.testing.streaming import stream_mismatch

DATA = Path(__file__).resolve().parent.parent / "data"
GOLDEN_DIR = DATA / "roundtrip"
RATCHET = Ratchet(DATA / "ratchet" / "roundtrip.json")
RENDER_RATCHET = Ratchet(DATA / "ratchet" / "roundtrip_render.json")
# Golden set name -> folder of the seed corpus its templates came from (the corpus manifest's origins).
SET_FOLDER = {"llamacpp": "templates", "packages": "packages", "hub": "hub"}
GOLDEN_FILES = ("roundtrip_seed.jsonl.gz", "roundtrip_packages.jsonl.gz", "roundtrip_hub.jsonl.gz")


def _load_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in GOLDEN_FILES:
        with gzip.open(GOLDEN_DIR / name, "rt", encoding="utf-8") as f:
            rows.extend(json.loads(line) for line in f)
    return rows


CORPUS = Corpus.load()
ENTRIES = {e.name: e for e in CORPUS.entries}
_BY_ORIGIN = {o: e.name for e in CORPUS.entries for o in e.origins}
ALL_ROWS = _load_rows()


def golden_entry_name(row: dict[str, Any]) -> str:
    """The corpus entry a golden row's template is (its seed origin in the corpus manifest)."""
    return _BY_ORIGIN[f"seed:{SET_FOLDER[row['set']]}/{row['template']}"]


ROWS_BY_ENTRY: dict[str, list[dict[str, Any]]] = defaultdict(list)
for _row in ALL_ROWS:
    ROWS_BY_ENTRY[golden_entry_name(_row)].append(_row)


def row_id(row: dict[str, Any]) -> str:
    return f"{row['set']}:{row['template']}::{row['scenario']}"


def golden_parse_failure(source: str, row: dict[str, Any]) -> str | None:
    """None when our parse of the golden output equals its expected_from_output, else why not."""
    request = generator_request(row["request"])
    try:
        got = generate_cached(source, request).parse(row["output"])
    except Exception as e:  # any exception is a conformance failure of this row, reported with the others
        return f"{type(e).__name__}: {e}"
    diffs = message_differences(as_message(row["expected_from_output"]), as_message(got), compare_ids=False)
    return "; ".join(diffs) or None


def stream_failure(source: str, request: dict[str, Any], output: str, seed: str) -> str | None:
    try:
        params = generate_cached(source, generator_request(request))
    except Exception:  # a request that cannot be built is the parse checks' to report
        return None
    n = len(output.encode("utf-8"))
    rnd = random.Random(seed)
    for cuts in (range(3, n, 3), rnd.sample(range(1, n), min(n - 1, 12)) if n > 1 else []):
        problem = stream_mismatch(params, output, cuts)
        if problem:
            return problem
    return None


def render_failure(ours: ScenarioResult, row: dict[str, Any]) -> str | None:
    if ours.output == row["output"]:
        return None
    why = f" (ours: {ours.status}: {ours.detail})" if ours.status == "not_expressible" else ""
    return f"output differs{why}: ours {ours.output[-120:]!r}, golden {row['output'][-120:]!r}"


def entry_results(name: str) -> tuple[dict[str, str | None], dict[str, str | None], list[str]]:
    """(roundtrip.json cases, roundtrip_render.json cases, streaming problems) of one corpus entry: case id ->
    failure or None."""
    source = ENTRIES[name].read_text()
    mine = {r.scenario: r for r in run_roundtrip(source)}
    main: dict[str, str | None] = {
        f"self:{name}::{r.scenario}": None if r.status in ("pass", "not_expressible") else f"{r.status}: {r.detail}"
        for r in mine.values()}
    render: dict[str, str | None] = {}
    streaming: list[str] = []
    for row in ROWS_BY_ENTRY.get(name, []):
        if row.get("expected_from_output"):
            main[row_id(row)] = golden_parse_failure(source, row)
        render[f"render:{row_id(row)}"] = render_failure(mine[row["scenario"]], row)
        if row["output"]:
            problem = stream_failure(source, row["request"], row["output"], row_id(row))
            if problem:
                streaming.append(f"{row_id(row)}: {problem}")
    # our own outputs of scenarios no golden has (h_empty_arguments, templates outside the golden sets)
    golden_scenarios = {row["scenario"] for row in ROWS_BY_ENTRY.get(name, [])}
    for r in mine.values():
        if r.output and r.status in ("pass", "fail") and r.scenario not in golden_scenarios:
            problem = stream_failure(source, scenario_request(r.scenario), r.output, f"{name}::{r.scenario}")
            if problem:
                streaming.append(f"self:{name}::{r.scenario}: {problem}")
    return main, render, streaming


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_roundtrip(name: str) -> None:
    main, render, streaming = entry_results(name)
    problems, listed = RATCHET.triage(main, sep=":\n    ")
    problems2, listed2 = RENDER_RATCHET.triage(render, sep=":\n    ")
    if problems or problems2 or streaming:
        pytest.fail("\n".join(problems + problems2 + streaming), pytrace=False)
    if listed or listed2:
        pytest.xfail(f"{len(listed) + len(listed2)} listed in the ratchets (reasons there): " + ", ".join(listed + listed2))


def test_goldens_cover_known_scenarios() -> None:
    # A golden scenario we do not generate would silently escape the render comparison.
    assert {r["scenario"] for r in ALL_ROWS} <= set(SCENARIOS)


def test_ratchets_name_existing_cases() -> None:
    golden = {row_id(r) for r in ALL_ROWS if r.get("expected_from_output")}
    selfs = {f"self:{name}::{s}" for name in ENTRIES for s in SCENARIOS}
    RATCHET.check_known(golden | selfs)
    RENDER_RATCHET.check_known({f"render:{row_id(r)}" for r in ALL_ROWS})
