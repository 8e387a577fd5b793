"""The structural tag and Lark exports (autoparser/export/constrained.py), checked by xgrammar and llguidance
themselves, not by us: for every corpus template whose scenarios call a tool, each consumer must accept every
intended output under the request's export and reject the outputs that break the format (the last closer cut,
the first call's opener left out). Exceptions, and templates without an export, are in
ratchet/consumers.json with their reasons. Each template's snapshot folder records what the consumers made of
it (snapshots/<key>/consumers.json: exported, accepted, rejected), which the corpus report shows; a record that
is not what the consumers do now fails here (`python -m tests.export.test_consumers --write-snapshots`).

vLLM's `beam` parser is checked the same way on the response_template we export: the structural tag it derives from
that file alone (for the requests that must call) accepts the intended outputs and rejects the broken ones
(`beam_results`; vLLM's modules come from `python -m tools.vllm_beam`).

xgrammar and llguidance are not in the test extra (xgrammar imports torch): `tox -e consumers` installs them
(torch's CPU build), brings vLLM's modules and sets AUTOPARSER_REQUIRE_CONSUMERS=1, so that a missing consumer
fails there; elsewhere these tests are skipped, and say why.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from autoparser.corpus import Corpus
from autoparser.testing.ratchet import Ratchet
from tools import vllm_beam

# vLLM's beam parser's modules, where `python -m tools.vllm_beam` put them
sys.path.append(str(vllm_beam.root()))
for _module in ("xgrammar", "llguidance", "vllm.parser.response_template_grammar"):
    try:
        importlib.import_module(_module)
    except ImportError:
        if os.environ.get("AUTOPARSER_REQUIRE_CONSUMERS") == "1":
            raise
        pytest.skip(f"{_module} is not installed: `tox -e consumers` runs these checks", allow_module_level=True)

from autoparser.corpus.artefacts import snapshot_key  # noqa: E402
from autoparser.corpus.constrained import (  # noqa: E402 (after the consumers are found)
    BEAM,
    CONSUMERS,
    CONSUMERS_FILE,
    beam_results,
    consumer_record,
    consumer_results,
    record_text,
)

CORPUS = Corpus.load()
RATCHET = Ratchet(Path(__file__).resolve().parents[1] / "data" / "ratchet" / "consumers.json")
SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"  # (syrupy's root, which this environment lacks)


def _record_file(name: str) -> Path:
    return SNAPSHOTS / snapshot_key(name) / CONSUMERS_FILE


@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS.names())
def test_the_consumers_accept_the_intended_outputs_and_reject_broken_ones(name: str) -> None:
    results = _results(name)
    record, path = consumer_record(results), _record_file(name)
    recorded = path.read_text(encoding="utf-8") if path.is_file() else None
    assert recorded == (record_text(record) if record else None), (
        f"{path.relative_to(SNAPSHOTS.parent)} does not record what the consumers do now "
        f"({record or 'no call to check'}): python -m tests.export.test_consumers --write-snapshots")
    RATCHET.check_many(results)


def test_the_ratchet_names_corpus_templates() -> None:
    names = set(CORPUS.names())
    assert not [case for case in RATCHET.entries if case.split("::")[0] not in names]


def _results(name: str) -> dict[str, str | None]:
    """Our constraint's consumers, then vLLM's beam reading our response_template."""
    source = CORPUS.by_name(name).read_text()
    return consumer_results(name, source) | beam_results(name, source)


def main() -> None:
    import argparse
    import json
    from collections import Counter
    from concurrent.futures import ProcessPoolExecutor

    parser = argparse.ArgumentParser(description="the consumers' checks over the corpus, summed up")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--write-ratchet", action="store_true", help=f"rewrite {RATCHET.path.name} from the results")
    parser.add_argument("--write-snapshots", action="store_true",
                        help=f"rewrite each template's snapshots/<key>/{CONSUMERS_FILE} from the results")
    args = parser.parse_args()
    with ProcessPoolExecutor(args.jobs) as pool:
        per_template = dict(zip(CORPUS.names(), pool.map(_results, CORPUS.names(), chunksize=4), strict=True))
    results = {case: failure for r in per_template.values() for case, failure in r.items()}
    exports = {case: failure for case, failure in results.items() if case.endswith("::export")}
    print(f"templates whose scenarios call a tool: {len(exports)}; exported: "
          f"{sum(f is None for f in exports.values())}")
    for consumer in (*CONSUMERS, BEAM):
        accepted = Counter(f is None for case, f in results.items() if case.endswith(f"::{consumer}")
                           and case.count("::") == 2)
        rejected = Counter(f is None for case, f in results.items() if case.endswith(f"::{consumer}")
                           and case.count("::") == 3)
        print(f"{consumer}: accepts {accepted[True]} of {accepted[True] + accepted[False]} intended outputs, "
              f"rejects {rejected[True]} of {rejected[True] + rejected[False]} broken ones")
    if args.write_ratchet:
        # (a reason written by hand, `policy: ...`, stays; a gap's is the failure as it is now)
        entries = {case: listed if (listed := RATCHET.entries.get(case, "")).startswith("policy:")
                   else f"gap: {failure}"[:400] for case, failure in sorted(results.items()) if failure is not None}
        RATCHET.path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{RATCHET.path}: {len(entries)} entries")
    if args.write_snapshots:
        written = 0
        for name, template_results in per_template.items():
            record, path = consumer_record(template_results), _record_file(name)
            if record:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(record_text(record), encoding="utf-8")
                written += 1
            elif path.is_file():
                path.unlink()
        print(f"{SNAPSHOTS}: {written} {CONSUMERS_FILE} records")


if __name__ == "__main__":
    main()
