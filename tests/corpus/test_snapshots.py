"""Per-template snapshots: every corpus template's artefacts (caps, analysis, grammars, round trip) are compared
with the readable files under snapshots/<key>/ (autoparser.testing.snapshots).

Update after an intended change (whole suite or a directory, see tox env update-snapshots):
    pytest tests/corpus/test_snapshots.py --snapshot-update
One template only: add the node id and `--snapshot-no-cleanup` (our layout never lets syrupy delete siblings
of a node-id selection, but the flag keeps that true whatever the layout becomes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.artefacts import (
    ANALYSIS_FILE,
    CAPS_FILE,
    GRAMMAR_REQUESTS,
    ROUNDTRIP_FILE,
    artefact_names,
    grammar_body,
    snapshot_key,
    template_artefacts,
)
from autoparser.corpus.constrained import BEAM, CONSUMERS, CONSUMERS_FILE
from autoparser.corpus.roundtrip import SCENARIOS
from autoparser.errors import GrammarError
from autoparser.template.caps import TemplateCaps
from autoparser.testing import gbnf_oracle
from autoparser.testing.snapshots import snapshots_root
from autoparser.types import ChatFormat

ENTRIES = Corpus.load().entries
ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = snapshots_root(__file__)
_ROUNDTRIP_STATUSES = {"pass", "fail", "not_expressible", "error"}


def _check_json(name: str, text: str) -> Any:
    value = json.loads(text)
    assert text == json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n", f"{name}: not canonical"
    return value


def _is_error(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"error"} and set(value["error"]) == {"type", "message"}


def _check_grammar(name: str, text: str) -> str:
    """Header says format/lazy/triggers (or the error); the body is the grammar, empty iff "# no grammar"."""
    header = text.splitlines()
    assert header and header[0].startswith("# "), f"{name}: no header"
    if header[0].startswith("# error: "):
        assert all(line.startswith("# ") for line in header), f"{name}: error artefact with a body"
        return ""
    fmt = header[0].removeprefix("# format: ").split(";", 1)[0]
    ChatFormat.of(fmt)  # raises for an unknown format
    assert header[1].startswith("# generation_prompt: "), f"{name}: no generation prompt line"
    json.loads(header[1].removeprefix("# generation_prompt: "))
    body = grammar_body(text)
    assert bool(body.strip()) != (header[2:3] == ["# no grammar"]), f"{name}: grammar body vs '# no grammar'"
    if body:
        assert "root ::=" in body, f"{name}: grammar without a root rule"
    return body


@pytest.mark.corpus
@pytest.mark.parametrize("entry", ENTRIES, ids=snapshot_key)
def test_template_artefacts(entry: CorpusEntry, artefact_snapshot: Any) -> None:
    key = snapshot_key(entry)
    arts = template_artefacts(entry.read_text())
    assert tuple(arts) == artefact_names()

    # Structure first, so snapshots are never the only assertion.
    caps = _check_json(CAPS_FILE, arts[CAPS_FILE])
    if not _is_error(caps):
        assert set(caps) == set(TemplateCaps().to_dict()) and all(isinstance(v, bool) for v in caps.values())
    analysis = _check_json(ANALYSIS_FILE, arts[ANALYSIS_FILE])
    if not _is_error(analysis):
        assert {"caps", "reasoning", "content", "tools", "preserved_tokens"} <= set(analysis)
        if not _is_error(caps):
            assert analysis["caps"] == caps, "analysis caps differ from the capability probe"
    bodies = {name: _check_grammar(name, arts[name]) for name in GRAMMAR_REQUESTS}
    roundtrip = _check_json(ROUNDTRIP_FILE, arts[ROUNDTRIP_FILE])
    if not _is_error(roundtrip):
        assert [r["status"] in _ROUNDTRIP_STATUSES for r in roundtrip] == [True] * len(SCENARIOS)
        assert [r["scenario"] for r in roundtrip] == list(SCENARIOS)
    if gbnf_oracle.available():
        for name, body in bodies.items():
            if body:
                try:
                    gbnf_oracle.LlamaGrammar(body)
                except GrammarError as e:
                    pytest.fail(f"{key}/{name}: llama.cpp cannot load the grammar: {e}", pytrace=False)
    elif os.environ.get("AUTOPARSER_REQUIRE_ORACLE") == "1":
        pytest.fail(gbnf_oracle.unavailable_reason())

    artefact_snapshot.check(key, arts)


def test_the_consumers_records_are_well_formed() -> None:
    """Each consumers' record (written where xgrammar and llguidance run) says whether the template's requests
    export and, per consumer (vLLM's beam where the template's response_template exports calls), how many outputs
    it got right of how many."""
    records = [d / CONSUMERS_FILE for d in SNAPSHOTS.iterdir() if (d / CONSUMERS_FILE).is_file()] \
        if SNAPSHOTS.is_dir() else []
    assert records, "no consumers' record: python -m tests.export.test_consumers --write-snapshots"
    for path in records:
        record = _check_json(str(path), path.read_text(encoding="utf-8"))
        assert set(record) - {BEAM} == {"export", *CONSUMERS}, path  # (beam: where a response_template exports)
        for consumer in set(record) - {"export"}:
            counts = record[consumer]
            assert set(counts) == {"accepted", "intended", "rejected", "broken"}, path
            assert 0 <= counts["accepted"] <= counts["intended"] and 0 <= counts["rejected"] <= counts["broken"], path


@pytest.mark.oracle
def test_grammar_oracle_present(gbnf_oracle: Any) -> None:
    """Makes a missing llama.cpp engine visible (skip, or failure under AUTOPARSER_REQUIRE_ORACLE=1): without it
    test_template_artefacts cannot check that every snapshotted grammar loads in llama.cpp."""
    assert gbnf_oracle("root ::= \"a\"").accepts("a")


def test_no_stale_snapshots(request: pytest.FixtureRequest) -> None:
    """syrupy cannot relate snapshots/<key>/ to this module (see autoparser.testing.snapshots): folders of
    templates gone from the corpus, or files of artefacts no longer produced, are found here. With
    --snapshot-update they are deleted instead."""
    expected = {snapshot_key(e) for e in ENTRIES}
    assert len(expected) == len(ENTRIES), "snapshot keys collide"
    # (and the consumers' record, written and checked where they are installed: tests/export/test_consumers.py)
    names = {*artefact_names(), CONSUMERS_FILE}
    if not SNAPSHOTS.is_dir():
        return
    stale = sorted(p for p in SNAPSHOTS.iterdir() if p.is_dir() and p.name not in expected)
    stale += sorted(f for d in SNAPSHOTS.iterdir() if d.is_dir() and d.name in expected
                    for f in d.iterdir() if f.name not in names)
    if request.config.option.update_snapshots:
        for p in stale:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
        return
    assert not stale, "stale snapshots (delete them or run --snapshot-update): " + ", ".join(
        str(p.relative_to(ROOT)) for p in stale[:20])


# --- the harness itself, on a tiny project in a subprocess ----------------------------------------------------------

_DEMO_TEST = '''
import json
from pathlib import Path
import pytest

DATA = json.loads((Path(__file__).parent / "data.json").read_text())

@pytest.mark.parametrize("key", sorted(DATA))
def test_demo(key, artefact_snapshot):
    artefact_snapshot.check(key, DATA[key])
'''

_DEMO_DATA = {
    "alpha": {"analysis.json": '{\n  "mode": "TAG_BASED",\n  "start": "<think>"\n}\n',
              "grammar-one-tool.gbnf": 'root ::= "a" tail\ntail ::= [^<]*\n'},
    "beta": {"analysis.json": '{\n  "mode": "NONE"\n}\n', "grammar-one-tool.gbnf": 'root ::= "b"\n'},
}


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AUTOPARSER_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           *args], cwd=project, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def demo_project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        filterwarnings = ["error"]
    '''))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_demo.py").write_text(_DEMO_TEST)
    (tmp_path / "tests" / "data.json").write_text(json.dumps(_DEMO_DATA))
    return tmp_path


def _set(project: Path, key: str, name: str, text: str) -> None:
    path = project / "tests" / "data.json"
    data = json.loads(path.read_text())
    data[key][name] = text
    path.write_text(json.dumps(data))


def test_harness_detects_a_change_and_updates_one_node(demo_project: Path) -> None:
    snaps = demo_project / "snapshots"
    r = _pytest(demo_project, "tests", "--snapshot-update")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(str(p.relative_to(snaps)) for p in snaps.rglob("*") if p.is_file()) == [
        "alpha/analysis.json", "alpha/grammar-one-tool.gbnf", "beta/analysis.json", "beta/grammar-one-tool.gbnf"]
    assert (snaps / "alpha" / "grammar-one-tool.gbnf").read_text() == _DEMO_DATA["alpha"]["grammar-one-tool.gbnf"]
    r = _pytest(demo_project, "tests")
    assert r.returncode == 0, r.stdout + r.stderr

    # a changed line fails, naming the test id, the template/field, and the line before and after
    _set(demo_project, "alpha", "grammar-one-tool.gbnf", 'root ::= "a" tail\ntail ::= [^<]+\n')
    r = _pytest(demo_project, "tests")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "test_demo[alpha]" in out and "test_demo[beta]" not in out.split("short test summary")[0].split(
        "FAILURES")[-1]
    assert "alpha/grammar-one-tool.gbnf" in out
    assert "- tail ::= [^<]*" in out and "+ tail ::= [^<]+" in out
    assert "alpha/analysis.json" not in out.split("FAILURES")[-1]

    # updating one node id keeps every sibling, with --snapshot-no-cleanup (and, with this layout, without)
    for extra in (("--snapshot-no-cleanup",), ()):
        r = _pytest(demo_project, "tests/test_demo.py::test_demo[alpha]", "--snapshot-update", *extra)
        assert r.returncode == 0, r.stdout + r.stderr
        assert (snaps / "beta" / "analysis.json").is_file() and (snaps / "beta" / "grammar-one-tool.gbnf").is_file()
    assert (snaps / "alpha" / "grammar-one-tool.gbnf").read_text().endswith("[^<]+\n")
    r = _pytest(demo_project, "tests")
    assert r.returncode == 0, r.stdout + r.stderr


def test_harness_reports_unused_on_a_full_run(demo_project: Path) -> None:
    snaps = demo_project / "snapshots"
    assert _pytest(demo_project, "--snapshot-update").returncode == 0
    (snaps / "gamma").mkdir()
    (snaps / "gamma" / "analysis.json").write_text("{}\n")
    (snaps / "README.md").write_text("not a snapshot\n")
    r = _pytest(demo_project)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 snapshot unused" in r.stdout
    r = _pytest(demo_project, "--snapshot-update")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (snaps / "gamma").exists() and (snaps / "README.md").is_file()
    assert (snaps / "beta" / "analysis.json").is_file()
