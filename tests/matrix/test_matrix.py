"""The cross-engine matrix (autoparser.matrix): its cases, the engines behind one interface, the verdicts, the
files it writes, the page in headless Chromium and the command.

The engines that run in this environment (autoparser default and strict, transformers) are asked for real on
corpus templates; llama.cpp's driver and SGLang's environment are built by their own tox environments
(cpp-conformance, matrix), where tests/matrix/test_external_engines.py asks them. Fake engines (subclasses of
`Engine` with a fixed answer) pin down how a miss is classified.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus
from autoparser.matrix import ENGINES
from autoparser.matrix.cases import RENDERED, TemplateCases, judge, template_cases
from autoparser.matrix.cli import engines, load_known, write_known
from autoparser.matrix.engines import (
    Answer,
    AutoparserEngine,
    Engine,
    LlamaCppEngine,
    Reading,
    SGLangEngine,
    StrictEngine,
    TransformersEngine,
)
from autoparser.matrix.page import (
    matrix_changes,
    matrix_from_json,
    matrix_to_json,
    render_html,
    summary_markdown,
    write_matrix,
)
from autoparser.matrix.run import AUTOPARSER_WRONG, ENGINE_WRONG, Matrix, run_matrix
from autoparser.testing.ratchet import Ratchet
from autoparser.types import ChatMessage
from tests.corpus.test_report import _chromium, _dump_dom

CORPUS = Corpus.load()
QWEN3 = "Qwen__Qwen3-0.6B"  # `<think>` reasoning, `<tool_call>` JSON calls: every scenario and several variants
# A template without tools (its calls are not expressible: its cases are plain and reasoning scenarios).
YI = "01-ai__Yi-1.5-9B-Chat"


@pytest.fixture(scope="module")
def qwen3() -> TemplateCases:
    return template_cases(CORPUS.by_name(QWEN3))


def test_cases_are_the_rendered_scenarios_and_their_variants(qwen3: TemplateCases) -> None:
    rendered = [c for c in qwen3.cases if c.kind == RENDERED]
    assert {c.scenario for c in rendered} >= {"a_plain", "b_reasoning", "c_one_tool_call", "d_parallel_tool_calls"}
    kinds = {c.kind for c in qwen3.cases} - {RENDERED}
    assert {"markers_without_space", "reasoning_start_dropped"} <= kinds
    one = next(c for c in rendered if c.scenario == "c_one_tool_call")
    assert one.id == f"{QWEN3}::c_one_tool_call" and "<tool_call>" in one.output and one.tools
    assert one.meant.expected.tool_calls[0].name == "get_weather"
    # a case is judged on what it means: the message itself passes, a message without the call does not
    assert judge(one, one.meant.expected) == []
    assert judge(one, replace(one.meant.expected, tool_calls=())) != []


def test_autoparser_reads_every_case_and_strict_only_the_rendered_ones(qwen3: TemplateCases) -> None:
    ours = AutoparserEngine().read(qwen3)
    assert ours.choice == "peg-native"
    assert all(a.message is not None and judge(c, a.message) == [] for c, a in zip(qwen3.cases, ours.answers))
    strict = StrictEngine().read(qwen3)
    for case, answer in zip(qwen3.cases, strict.answers):
        if case.kind == RENDERED:
            assert answer.message is not None and judge(case, answer.message) == [], case.id
    # a variant that drops the reasoning start is off the format for llama.cpp's rules
    dropped = [a for c, a in zip(qwen3.cases, strict.answers) if c.kind == "reasoning_end_dropped_before_calls"]
    assert dropped and any(a.message is None or a.message.tool_calls == () for a in dropped)


def test_transformers_reads_our_response_template(qwen3: TemplateCases) -> None:
    reading = TransformersEngine().read(qwen3)
    assert reading.choice == "response_template (autoparser export)"
    for case, answer in zip(qwen3.cases, reading.answers):
        if case.kind == RENDERED:
            assert answer.message is not None and judge(case, answer.message) == [], (case.id, answer)


def test_an_engine_that_cannot_run_says_why() -> None:
    assert "python -m tools.cpp_oracle" in (LlamaCppEngine(None).missing() or "")
    assert "no llama.cpp driver at /nonexistent" in (LlamaCppEngine(Path("/nonexistent")).missing() or "")
    assert "python -m tools.sglang_env" in (SGLangEngine(Path("/nonexistent/python")).missing() or "")
    assert [e.name for e in engines(ENGINES, cpp=None, sglang=None)] == list(ENGINES)


class _Fixed(Engine):
    """An engine that reads every output as one fixed message, or that picks no parser (`choice` None)."""

    def __init__(self, message: ChatMessage | None, choice: str | None = "fixed", name: str = "fixed") -> None:
        self.message, self.choice, self.name = message, choice, name  # type: ignore[misc]

    def read(self, template: TemplateCases) -> Reading:
        answer = Answer(self.message) if self.message is not None else Answer(error="cannot read")
        return Reading(self.choice, tuple(answer for _ in template.cases))


class _Lost(AutoparserEngine):
    """autoparser, but as if it lost the content of one case (to see the verdict of a miss of ours)."""

    def __init__(self, lost: str) -> None:
        self.lost = lost

    def read(self, template: TemplateCases) -> Reading:
        reading = super().read(template)
        answers = tuple(Answer(ChatMessage(content="lost")) if c.id == self.lost else a
                        for c, a in zip(template.cases, reading.answers))
        return Reading(reading.choice, answers)


def _matrix(engines: Sequence[Engine], known: dict[str, str] | None = None) -> Matrix:
    return run_matrix(CORPUS, engines, only=[QWEN3], known=known)


def test_misses_are_classified(qwen3: TemplateCases) -> None:
    wrong = ChatMessage(content="something else")
    matrix = _matrix([AutoparserEngine(), _Fixed(wrong), _Fixed(None, choice=None, name="none")])
    row = matrix.rows[0]
    assert row.template == QWEN3 and row.family == "Qwen" and row.calls
    ours, fixed = row.cells["autoparser"], row.cells["fixed"]
    assert ours.misses == () and ours.rendered[0] == ours.rendered[1] > 0
    verdicts = {m.kind == RENDERED: m.verdict for m in fixed.misses}
    assert verdicts == {True: ENGINE_WRONG, False: "policy: layout"}
    assert fixed.rendered[0] < fixed.rendered[1] and len(fixed.misses) == fixed.cases - fixed.rendered[0]
    miss = fixed.misses[0]
    assert miss.got is not None and miss.got["content"] == "something else" and miss.ours is not None


def test_a_template_an_engine_picks_no_parser_for_is_unconfigured() -> None:
    matrix = _matrix([AutoparserEngine(), _Fixed(None, choice=None)])
    misses = matrix.rows[0].cells["fixed"].misses
    assert {m.verdict for m in misses if m.kind == RENDERED} == {"policy: unconfigured"}
    assert all(m.got is None and m.differences == ("cannot read",) for m in misses)
    # the parser choice table: Qwen3 renders calls; autoparser's parser reads them all, the other picks none
    assert matrix.choices() == {"autoparser": {"templates": 1, "right": 1, "wrong": 0, "none": 0},
                                "fixed": {"templates": 1, "right": 0, "wrong": 0, "none": 1}}


def test_a_miss_of_ours_is_new_until_a_ratchet_names_it() -> None:
    case = f"{QWEN3}::c_one_tool_call"
    matrix = _matrix([_Lost(case), _Fixed(ChatMessage(content="x"))])
    new = matrix.new_failures()
    assert [m.case for m in new] == [case] and new[0].verdict == AUTOPARSER_WRONG
    # the other engine's miss of that case is ours too: it points at our reading, not at the engine
    assert {m.verdict for m in matrix.rows[0].cells["fixed"].misses if m.case == case} == {AUTOPARSER_WRONG}
    known = _matrix([_Lost(case)], known={case: "gap: why"})
    assert known.new_failures() == [] and known.rows[0].cells["autoparser"].misses[0].reason == "gap: why"
    # an entry of a template that ran, for a case now read as meant, is stale
    assert _matrix([AutoparserEngine()]).stale({case + "::leaked_marker": "gap"}) == [case + "::leaked_marker"]


def test_an_engine_that_is_not_installed_is_a_column_that_says_so() -> None:
    matrix = _matrix([AutoparserEngine(), LlamaCppEngine(None)])
    assert [c.missing is None for c in matrix.columns] == [True, False]
    assert "llama.cpp" not in matrix.rows[0].cells and set(matrix.summary()) == {"autoparser"}
    assert "| llama.cpp | not run: no llama.cpp driver given" in summary_markdown(matrix)
    assert "not run: no llama.cpp driver given" in render_html(matrix)


def test_json_round_trip_and_summary() -> None:
    matrix = _matrix([AutoparserEngine(), _Fixed(ChatMessage(content="x"))])
    data = json.loads(json.dumps(matrix_to_json(matrix)))
    assert matrix_from_json(data) == matrix
    s = data["summary"]
    assert s["autoparser"]["full"] == 1 and s["fixed"]["partly"] + s["fixed"]["none"] == 1
    assert data["summary_with_variants"]["autoparser"]["cases"] > s["autoparser"]["cases"]
    assert "| autoparser | 1 of 1 (100.0%) |" in summary_markdown(matrix)


def test_changes_since_an_earlier_matrix() -> None:
    before = _matrix([AutoparserEngine(), _Fixed(ChatMessage(content="x"))])
    assert "No cell changed" in matrix_changes(before, before)
    after = _matrix([AutoparserEngine(), _Fixed(None, choice=None)])
    changes = matrix_changes(before, after)
    line = next(x for x in changes.splitlines() if x.startswith(f"| `{QWEN3}` | fixed |"))
    assert "(fixed)" in line and "(no parser)" in line  # the parser choice changed too
    assert "| autoparser |" not in changes.split("Before:")[0]  # an unchanged cell is not listed
    gone = Matrix(after.columns, ())
    assert f"| `{QWEN3}` | (all) | gone |" in matrix_changes(before, gone)


def test_write_known_keeps_reasons_and_adds_new_misses_as_gaps(tmp_path: Path) -> None:
    variant = f"{QWEN3}::b_reasoning::markers_without_space"
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({f"{QWEN3}::a_plain::leaked_marker": "policy: stale", "Other::a::k": "policy: kept"}))
    assert write_known(_matrix([_Lost(variant)]), path, load_known([path])) == 2
    written = json.loads(path.read_text())
    # the other template's entry stays; this template's stale one goes; the new miss is a gap to label
    assert written["Other::a::k"] == "policy: kept" and written[variant].startswith("gap: content")
    assert set(written) == {"Other::a::k", variant}


def test_known_reads_both_ratchets(tmp_path: Path) -> None:
    (tmp_path / "roundtrip.json").write_text('{"self:A::b_reasoning": "gap: r", "hub:x::a": "other"}')
    (tmp_path / "matrix.json").write_text('{"A::c::leaked_marker": "policy: p"}')
    known = load_known([tmp_path / "roundtrip.json", tmp_path / "matrix.json"])
    assert known["A::b_reasoning"] == "gap: r" and known["A::c::leaked_marker"] == "policy: p"


def test_the_matrix_ratchet_names_real_cases() -> None:
    from autoparser.corpus.roundtrip import SCENARIOS
    from autoparser.corpus.variants import KINDS

    path = Path(__file__).resolve().parent.parent / "data" / "ratchet" / "matrix.json"
    names = {e.name for e in CORPUS.entries}
    for key, reason in json.loads(path.read_text(encoding="utf-8")).items():
        template, scenario, kind = key.split("::")
        assert scenario in SCENARIOS, key
        assert template in names and kind in KINDS, key
        assert reason.startswith(("policy:", "gap:")), key


# --- the page in a browser ------------------------------------------------------------------------------------------

def test_page_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    matrix = run_matrix(CORPUS, [AutoparserEngine(), StrictEngine(), _Fixed(None, choice=None)], only=[QWEN3, YI])
    page = write_matrix(matrix, tmp_path / "out")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"matrix.json", "matrix.html", "summary.md"}
    profile = tmp_path / "profile"

    def shown(fragment: str) -> list[str]:
        dom = _dump_dom(browser, page, fragment, profile)
        return [n for n, attrs in re.findall(r'<tr id="t-([^"]*)"([^>]*)>', dom) if " hidden" not in attrs]

    dom = _dump_dom(browser, page, "", profile)
    assert re.search(r'<tr data-engine="autoparser" data-full="2" data-templates="2">', dom), dom[:3000]
    assert shown("") == [YI, QWEN3] or shown("") == [QWEN3, YI]
    assert shown("#filter=qwen") == [QWEN3]  # by family as well as by name
    assert shown("#filter=fixed:none") == sorted(shown(""), key=shown("").index)  # by the parser an engine picks
    assert shown("#sort=-autoparser-strict")  # the engine columns sort
    # a cell with misses opens on them: the output, the engine's answer and ours
    qwen_row = dom.split(f'<tr id="t-{QWEN3}"')[1].split('<tr id="t-')[0]
    assert '<details class="cell">' in qwen_row and "policy: unconfigured" in qwen_row
    assert "&lt;tool_call&gt;" in qwen_row and "<th>autoparser</th>" in qwen_row


# --- the command ----------------------------------------------------------------------------------------------------

def test_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                            ) -> None:
    monkeypatch.delenv("AUTOPARSER_CPP_ORACLE", raising=False)  # (tox -e matrix sets it)
    out = tmp_path / "m"
    code = main(["matrix", "--only", QWEN3, "--engines", "autoparser", "transformers", "llama.cpp", "--out", str(out),
                 "--check"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "matrix: llama.cpp not run: no llama.cpp driver given" in printed
    assert "| autoparser | 1 of 1 (100.0%) |" in printed and (out / "matrix.html").is_file()
    data = json.loads((out / "matrix.json").read_text(encoding="utf-8"))
    assert [t["template"] for t in data["templates"]] == [QWEN3]
    assert set(data["templates"][0]["cells"]) == {"autoparser", "transformers"}


def test_command_since_writes_the_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    argv = ["matrix", "--only", QWEN3, "--engines", "autoparser", "--out", str(out),
            "--since", str(out / "matrix.json")]
    assert main(argv) == 0
    assert "no earlier matrix at" in capsys.readouterr().out and not (out / "changes.md").exists()
    assert main(argv) == 0  # the matrix the first run wrote is the earlier one
    assert "No cell changed" in (out / "changes.md").read_text(encoding="utf-8")
    # the nightly job's report gets the changes as a section
    (tmp_path / "nightly-report.md").write_text("# Nightly\n", encoding="utf-8")
    assert main([*argv, "--add-to-report", str(tmp_path)]) == 0
    report = (tmp_path / "nightly-report.md").read_text(encoding="utf-8")
    assert report.startswith("# Nightly\n\n## The cross-engine matrix\n") and "No cell changed" in report
    (out / "matrix.json").write_text("{}", encoding="utf-8")
    assert main(argv) == 2 and "is not a matrix.json this command wrote" in capsys.readouterr().err


def test_command_require_all_refuses_a_missing_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["matrix", "--only", QWEN3, "--engines", "autoparser", "sglang", "--sglang", "/nonexistent/python",
                 "--require-all", "--out", str(tmp_path)])
    assert code == 2 and "--require-all, but sglang cannot run here" in capsys.readouterr().err


# --- autoparser's column over the whole corpus ----------------------------------------------------------------------

MATRIX_RATCHET = Ratchet(Path(__file__).resolve().parent.parent / "data" / "ratchet" / "matrix.json")


@pytest.mark.parametrize("template", [e.name for e in CORPUS.entries])
def test_autoparser_reads_the_variants_of_every_template(template: str) -> None:
    """autoparser's cell of the matrix, per template: every variant of an output it reads right is read as meant,
    or is in tests/data/ratchet/matrix.json with its reason (its misses of the rendered outputs themselves are the
    self round trips of tests/corpus/test_roundtrip.py). `autoparser matrix --check` checks the same over the
    whole matrix; `--write-known` rewrites the file."""
    cases = template_cases(CORPUS.by_name(template))
    reading = AutoparserEngine().read(cases)
    results = {}
    for case, answer in zip(cases.cases, reading.answers):
        if case.kind != RENDERED:
            problems = judge(case, answer.message) if answer.message is not None else [answer.error or "no answer"]
            results[case.id] = "; ".join(problems) or None
    MATRIX_RATCHET.check_many(results)
