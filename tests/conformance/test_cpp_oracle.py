"""llama.cpp as a live oracle (autoparser.testing.cpp_oracle, tools/cpp_oracle).

Two halves. The protocol and comparison tests run everywhere, with small scripts standing in for a driver
that misbehaves (exits, answers out of order). The real-driver tests need the driver built from llama.cpp's
source (`python -m tools.cpp_oracle`); `tox -e cpp-conformance` builds it and points AUTOPARSER_CPP_ORACLE at it,
and there they are the proof that the driver is right: regenerating every golden under tests/data from it
reproduces the committed files byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from autoparser.cli import main as cli_main
from autoparser.corpus import Corpus
from autoparser.testing.cpp_oracle import (
    Divergence,
    by_cause,
    compare_case,
    compare_corpus,
    regenerate_goldens,
    run_driver,
    write_divergence_report,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DRIVER = os.environ.get("AUTOPARSER_CPP_ORACLE", "")
needs_driver = pytest.mark.skipif(not DRIVER, reason="needs the C++ driver: runs in tox -e cpp-conformance "
                                                     "(AUTOPARSER_CPP_ORACLE=build/cpp_oracle/cpp_oracle)")


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "driver"
    path.write_text(f"#!{sys.executable}\nimport json, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_driver_that_fails_costs_its_chunk_with_its_message(tmp_path: Path) -> None:
    crash = _script(tmp_path, "sys.stderr.write('boom: bad template\\n'); sys.exit(3)")
    jobs = [{"id": str(i)} for i in range(10)]
    answers = run_driver(crash, jobs)
    assert [a["id"] for a in answers] == [str(i) for i in range(10)]
    assert all("exited with 3" in a["error"] and "boom: bad template" in a["error"] for a in answers)


def test_a_driver_out_of_order_is_refused(tmp_path: Path) -> None:
    backwards = _script(tmp_path, "lines = [json.loads(x) for x in sys.stdin]\n"
                                  "for j in reversed(lines): print(json.dumps({'id': j['id']}))")
    answers = run_driver(backwards, [{"id": "a"}, {"id": "b"}])
    assert all("out of order" in a["error"] for a in answers)


def test_any_command_that_speaks_the_protocol_is_a_driver(tmp_path: Path) -> None:
    # (the matrix's SGLang bridge: an interpreter and a script) with its own chunk size
    echo = tmp_path / "echo.py"
    echo.write_text("import json, os, sys\nfor x in sys.stdin: print(json.dumps({'id': json.loads(x)['id'], "
                    "'pid': os.getpid()}))\n")
    answers = run_driver([sys.executable, str(echo)], [{"id": str(i)} for i in range(7)], chunk=3)
    assert [a["id"] for a in answers] == [str(i) for i in range(7)]
    assert len({a["pid"] for a in answers}) == 3  # one process per chunk of three


def test_fields_are_compared_under_the_cpp_tests_rules() -> None:
    base = {"format": "peg-native", "prompt": "p", "grammar": "g", "grammar_lazy": True,
            "parsed": [{"role": "assistant", "content": "Hi", "reasoning_content": "", "tool_calls": [
                {"name": "f", "arguments": '{"a": 1}', "id": ""}]}]}
    same = {**base, "parsed": [{"role": "assistant", "content": " Hi\n", "reasoning_content": "", "tool_calls": [
        {"name": "f", "arguments": '{"a":1}', "id": "x"}]}]}
    assert compare_case("t/s", base, same) == []  # whitespace at the ends, argument spacing and ids
    other = {**base, "grammar": "h", "parsed": [{"error": "no"}]}
    assert [(d.case, d.field) for d in compare_case("t/s", base, other)] == [("t/s", "grammar"), ("t/s", "parsed")]
    analysis = compare_case("t", {"analysis": {"reasoning": {"end": "</think>"}}},
                            {"analysis": {"reasoning": {"end": "</think>\n"}}})
    assert [(d.field, d.cpp, d.ours) for d in analysis] == [("analysis.reasoning.end", "</think>", "</think>\n")]


def test_the_report_says_which_divergences_are_new(tmp_path: Path) -> None:
    divs = [Divergence("a/c_one_tool_call", "grammar", "x", "y", "known: policy"),
            Divergence("b", "analysis.tools.format.mode", "NONE", "JSON_NATIVE")]
    md = write_divergence_report(divs, tmp_path, driver="drv", templates=2)
    text = md.read_text()
    assert "2 divergences, 1 new" in text and "**new**" in text and "known: policy" in text
    assert text.index("## `b`") < text.index("## `a`")  # templates with new divergences first
    assert json.loads((tmp_path / "cpp-divergences.json").read_text())["new"] == 1


def test_the_report_groups_divergences_by_cause(tmp_path: Path) -> None:
    """One upstream change to a format shows as one cause, however many templates and cases it touches."""
    divs = [Divergence(f"{t}/{s}", "parsed", {}, {}, format="peg-native")
            for t in ("a", "b", "c") for s in ("c_one_tool_call", "d_parallel")]
    divs += [Divergence("a", "analysis.tools.format.mode", "NONE", "JSON_NATIVE"),
             Divergence("d/c_one_tool_call", "grammar", "x", "y", "known: policy")]
    groups = dict(by_cause(divs))
    assert list(groups) == ["new: parsed (peg-native)", "new: analysis.tools", "known: policy"]
    assert len(groups["new: parsed (peg-native)"]) == 6
    text = write_divergence_report(divs, tmp_path, driver="drv", templates=4).read_text()
    assert "| new: parsed (peg-native) | 6 | 3 | a/c_one_tool_call parsed |" in text
    assert text.index("## By cause") < text.index("## `a`")


def test_the_command_without_a_driver_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["conformance", "--cpp", str(tmp_path / "missing")]) == 2
    assert "no C++ driver" in capsys.readouterr().err


@needs_driver
def test_the_driver_reproduces_every_golden_byte_for_byte(tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    changed = regenerate_goldens(Path(DRIVER), copy, Corpus.load(), workers=2)
    assert changed == {name: 0 for name in changed} and len(changed) == 8
    for path in DATA.rglob("*"):
        if path.is_file():
            assert (copy / path.relative_to(DATA)).read_bytes() == path.read_bytes(), path


@needs_driver
def test_a_template_the_cpp_reads_like_us(tmp_path: Path) -> None:
    # Qwen3 is analysed alike, and every round-trip scenario it expresses gets the same prompt, grammar and parse
    divs = compare_corpus(Path(DRIVER), Corpus.load(), only=["Qwen__Qwen3-0.6B"])
    assert divs == []


def test_the_corpus_report_shows_the_last_runs_divergences(tmp_path: Path) -> None:
    divs = [Divergence("Qwen__Qwen3-0.6B/c_one_tool_call", "grammar", "x", "y"),
            Divergence("Qwen__Qwen3-0.6B", "analysis.user_start", "a", "b", "known: because")]
    write_divergence_report(divs, tmp_path / "conf", driver="drv", templates=1)
    out = tmp_path / "report"
    assert cli_main(["corpus", "report", "--only", "Qwen__Qwen3-0.6B", "--snapshots", str(tmp_path / "none"),
                     "--out", str(out), "--cpp-divergences", str(tmp_path / "conf" / "cpp-divergences.json")]) == 0
    md = (out / "report.md").read_text()
    assert "## llama.cpp divergences" in md and "| Qwen__Qwen3-0.6B | 1 | **1** |" in md
    assert 'id="cpp-divergences"' in (out / "report.html").read_text()
