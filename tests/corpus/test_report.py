"""`autoparser corpus report`: rendering (escaping, sorting hooks, summary counts), collecting, the CLI, and the
page as headless Chromium sees it (the sort script included)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.report import (
    ArtefactChange,
    ScenarioCell,
    TemplateRow,
    collect_row,
    collect_rows,
    compare_snapshot,
    family_of,
    render_html,
    render_markdown,
    summarize,
    write_report,
)

ROOT = Path(__file__).resolve().parents[2] / "corpus"
CORPUS = Corpus.load(ROOT)
# small, fast templates of different shapes: a reasoning model, a plain ChatML, a tool-calling Llama
REAL = ("Qwen__QwQ-32B", "axolotl__chatml", "axolotl__llama3")

EVIL = '<script>alert("x")</script>&amp;|`'

ROWS = (
    TemplateRow(
        name="beta", family="Qwen", model="Qwen/Beta", handler="autoparser", chat_format="peg-native",
        builtin="chatml", reasoning="TAG_BASED", content="PLAIN", tools="TAG_WITH_JSON",
        markers=(("reasoning.start", "<think>"), ("reasoning.end", "</think>")),
        scenarios=(ScenarioCell("no_tools", "pass"), ScenarioCell("one_tool", "fail", EVIL)),
        grammar_size=120, grammar_rules=4, recovered=(3, 4), snapshot="same",
    ),
    TemplateRow(
        name="alpha" + EVIL, family="Llama", model=EVIL, handler="autoparser",
        scenarios=(ScenarioCell("no_tools", "pass"), ScenarioCell("one_tool", "not_expressible")),
        grammar_size=9000, grammar_rules=40, recovered=(2, 2), snapshot="changed",
        changes=(ArtefactChange("grammar-one-tool.gbnf", "changed", "-root ::= a\n+root ::= " + EVIL),
                 ArtefactChange("roundtrip.json", "new")),
    ),
    TemplateRow(name="gamma", family="other", errors=("analysis: TemplateError: " + EVIL,), snapshot="none"),
)


class _Table(HTMLParser):
    """Headers (data-key) and body rows (ids, cell data-v) of the #templates table."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: dict[str, str | None] = {}
        self.keys: list[str] = []
        self.rows: list[list[str]] = []
        self.row_ids: list[str] = []
        self._in, self._body = False, False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "templates":
            self._in, self.attrs = True, a
        elif not self._in:
            return
        elif tag == "tbody":
            self._body = True
        elif tag == "th" and a.get("data-key"):
            self.keys.append(a["data-key"] or "")
        elif tag == "tr" and self._body:
            self.rows.append([])
            self.row_ids.append(a.get("id") or "")
        elif tag == "td" and self._body:
            self.rows[-1].append(a.get("data-v") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._in:
            self._in = self._body = False


def _table(page: str) -> _Table:
    t = _Table()
    t.feed(page)
    return t


def _column(t: _Table, key: str) -> list[str]:
    i = t.keys.index(key)
    return [r[i] for r in t.rows]


# --- rendering ----------------------------------------------------------------------------------------------------

def test_html_escapes_everything_from_the_corpus() -> None:
    page = render_html(ROWS)
    assert "<script>alert" not in page and 'alert("x")' not in page
    assert page.count("<script>") == 1  # only the page's own sort script
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;amp;|`" in page
    assert "&lt;think&gt;" in page  # markers too, as JSON strings
    t = _table(page)
    assert t.row_ids == ["t-beta", "t-alpha" + EVIL, "t-gamma"]  # unescaped back by the parser: round-trips


def test_html_has_sort_hooks_and_is_self_contained() -> None:
    page = render_html(ROWS)
    t = _table(page)
    assert t.keys == ["name", "family", "handler", "chat_format", "builtin", "reasoning", "content", "tools", "markers",
                      "scenario:no_tools", "scenario:one_tool", "passed", "recovered", "export", "constrained",
                      "grammar_size", "snapshot", "errors"]
    assert t.attrs["data-rows"] == "3"
    assert re.search(r"<th data-key=\"grammar_size\" title=\"Grammar size\" data-type=\"num\">", page)
    assert _column(t, "grammar_size") == ["120", "9000", "-1"]  # numeric sort values; -1 = no grammar
    assert _column(t, "scenario:one_tool") == ["fail", "not_expressible", ""]
    assert not re.search(r"(?i)https?://|<link|<img|<iframe|@import|\bsrc=", page)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_pass_rates_count_expressible_scenarios_and_failures_open_on_click() -> None:
    page = render_html(ROWS, made_from="made from commit 0123456789ab on 2026-11-25 23:40 UTC")
    t = _table(page)
    # alpha cannot express one_tool: 1 of 1, not 1 of 2
    assert next(c for c in page.split("</tr>") if 't-beta"' in c).count("1/2") == 1
    assert _column(t, "passed") == ["0.5000", "1.0000", "-1"]
    assert '<details class="cell"><summary>FAIL</summary><small>&lt;script&gt;' in page
    assert 'id="made-from"><small>made from commit 0123456789ab on 2026-11-25 23:40 UTC' in page
    assert 'data-failing="1"' in page and page.count('data-failing="1"') == 2  # beta fails, gamma has errors
    md = render_markdown(ROWS, made_from="made from commit 0123456789ab")
    assert md.splitlines()[2] == "made from commit 0123456789ab" and "| 1/1 |" in md


def test_the_export_column_on_real_templates() -> None:
    # Qwen3 exports a response_template that transformers reads right on every scenario it can express;
    # Apertus names its calls by JSON key, which that language cannot say
    rows = {r.name: r for r in collect_rows(CORPUS, None, names=["Qwen__Qwen3-0.6B",
                                                                 "swiss-ai__Apertus-8B-Instruct-2509"])}
    qwen3, apertus = rows["Qwen__Qwen3-0.6B"], rows["swiss-ai__Apertus-8B-Instruct-2509"]
    assert qwen3.export == "exported" and qwen3.transformers is not None
    assert qwen3.transformers[0] == qwen3.transformers[1] == qwen3.expressible
    assert apertus.export.startswith("the call's name is its JSON key") and apertus.transformers is None
    page = render_html(list(rows.values()))
    assert f"{qwen3.expressible}/{qwen3.expressible} (100%)" in page and "JSON key" in page


def test_the_strict_tools_column_reads_the_consumers_records() -> None:
    """The consumers' records in snapshots/<key>/ (written where xgrammar and llguidance run): Qwen3's requests
    export and both consumers accept its scenarios' outputs, as does vLLM's beam parser under the tag it derives
    from Qwen3's response_template; Muse Glimmer's hand-written format is refused, with the reason. The record is
    no artefact the snapshot comparison misses."""
    snapshots = ROOT.parent / "snapshots"
    names = ["Qwen__Qwen3-0.6B", "llama.cpp__muse-glimmer"]
    rows = {r.name: r for r in collect_rows(CORPUS, snapshots, names=names)}
    qwen3, refused = rows[names[0]], rows[names[1]]
    assert qwen3.snapshot == refused.snapshot == "same"
    record = json.loads((snapshots / "Qwen__Qwen3-0.6B" / "consumers.json").read_text(encoding="utf-8"))
    assert qwen3.constrained == "exported"
    assert qwen3.consumers == tuple((c, *(record[c][k] for k in ("accepted", "intended", "rejected", "broken")))
                                    for c in ("xgrammar", "llguidance", "vllm-beam"))
    assert all(n and a == n for _, a, n, _, _ in qwen3.consumers)
    assert "hand-written (muse_glimmer)" in refused.constrained
    page = render_html([qwen3, refused])
    n = qwen3.consumers[0][2]
    assert _column(_table(page), "constrained") == ["1.0000", "-1"]
    assert f"xgrammar {n}/{n}" in page and "rejects" in page


def test_made_from_names_the_commit(tmp_path: Path) -> None:
    import datetime

    from autoparser.corpus.report import made_from

    when = datetime.datetime(2026, 11, 25, 23, 40, tzinfo=datetime.timezone.utc)
    stamp = made_from(ROOT, when)
    assert re.fullmatch(r"made from commit [0-9a-f]{12}( \+ local changes)? on 2026-11-25 23:40 UTC", stamp), stamp
    assert made_from(tmp_path, when).startswith("made from autoparser ")  # not a checkout: the version


def test_summary_counts() -> None:
    s = summarize(ROWS)
    assert (s.templates, s.with_errors) == (3, 1)
    assert s.scenarios == ("no_tools", "one_tool")
    assert s.by_scenario["no_tools"] == {"pass": 2, "fail": 0, "not_expressible": 0, "error": 0}
    assert s.by_scenario["one_tool"] == {"pass": 0, "fail": 1, "not_expressible": 1, "error": 0}
    assert s.totals == {"pass": 2, "fail": 1, "not_expressible": 1, "error": 0}
    assert s.snapshot == {"same": 1, "changed": 1, "none": 1, "unavailable": 0}
    page = render_html(ROWS)
    assert 'data-templates="3" data-errors="1" data-pass="2"' in page
    assert "3 templates (1 with errors); scenarios: 2 pass, 1 fail, 1 not expressible, 0 error" in page
    assert s.recovered == (5, 6) and "mutated outputs recovered: 5/6 (83%)" in page
    t = _table(page)
    assert _column(t, "recovered") == ["0.7500", "1.0000", "-1"]  # numeric sort values; -1 = none applies


def test_markdown_summary_and_escaping() -> None:
    md = render_markdown(ROWS)
    lines = md.splitlines()
    assert lines[0] == "# autoparser corpus report"
    assert lines[2].startswith("3 templates (1 with errors); scenarios: 2 pass, 1 fail")
    assert "| one_tool | 0 | 1 | 1 | 0 |" in lines
    table = [ln for ln in lines if ln.startswith("| ") and ln.count(" | ") >= 8]
    assert len(table) == 1 + 3  # header + one line per template
    # no cell text can open a new cell or inject markup: every row splits into exactly 12 cells
    for ln in table:
        assert len(re.split(r"(?<!\\)\|", ln.strip())[1:-1]) == 12, ln
    assert "| peg-native | chatml |" in md
    assert "| 3/4 (75%) |" in md
    assert "<script>" not in md
    assert "## Changed since the last snapshot" in md and "grammar-one-tool.gbnf (changed)" in md
    assert "## Errors" in md and "- gamma: analysis: TemplateError:" in md


def test_write_report(tmp_path: Path) -> None:
    html_path, md_path = write_report(ROWS, tmp_path / "out" / "nested")
    assert html_path.name == "report.html" and md_path.name == "report.md"
    assert html_path.read_text(encoding="utf-8") == render_html(ROWS)
    assert md_path.read_text(encoding="utf-8") == render_markdown(ROWS)


def test_the_report_links_the_cross_engine_matrix_written_beside_it(tmp_path: Path) -> None:
    # (`autoparser matrix` writes reports/matrix/, the corpus report reports/: the default folders line up)
    (tmp_path / "matrix").mkdir()
    (tmp_path / "matrix" / "summary.md").write_text("| engine | templates fully right |\n| a<b | 1 of 1 |\n",
                                                   encoding="utf-8")
    html_path, md_path = write_report(ROWS, tmp_path)
    html = html_path.read_text(encoding="utf-8")
    assert '<h2 id="matrix">' in html and '<a href="matrix/matrix.html">' in html and "| a&lt;b | 1 of 1 |" in html
    assert md_path.read_text(encoding="utf-8").endswith("## Cross-engine matrix\n\nWhat each engine reads "
                                                        "(matrix/matrix.html):\n\n| engine | templates fully right |"
                                                        "\n| a<b | 1 of 1 |\n")
    assert _table(html).rows == _table(render_html(ROWS)).rows  # the templates' table is the same


def test_empty_report_renders() -> None:
    assert _table(render_html([])).rows == []
    assert "0 templates" in render_markdown([])


# --- collecting ---------------------------------------------------------------------------------------------------

def _entry(name: str, path: Path, **kw: object) -> CorpusEntry:
    base = CORPUS.entries[0]
    fields: dict[str, object] = {"name": name, "path": path, "repo_id": None, "model_hint": None,
                                 "source_file": None, "origins": (), "shared_with": ()}
    fields.update(kw)
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "hint", "family"), [
    ("x", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "DeepSeek"),  # the first keyword in the model name wins
    ("x", "NousResearch/Hermes-3-Llama-3.1-8B", "Hermes"),
    ("x", "Qwen/QwQ-32B", "Qwen"),
    ("x", "mistralai/Ministral-8B-Instruct-2410", "Mistral"),
    ("x", "cognitivecomputations/dolphin-2.9", "Dolphin"),  # "phi" inside "dolphin" is not Phi
    ("x", "microsoft/Phi-3.5-mini-instruct", "Phi"),
    ("x", "meta-llama/Meta-Llama-3-8B", "Llama"),
    ("x", "openai/gpt-oss-20b", "GPT"),
    ("x", "ibm-granite/foo-8b", "Granite"),  # nothing in the model name: the org table
    ("axolotl__gemma3", None, "Gemma"),  # package templates: the name after the package
    ("litgpt__serve.chat_template", None, "other"),
])
def test_family_rule(tmp_path: Path, name: str, hint: str | None, family: str) -> None:
    assert family_of(_entry(name, tmp_path / "x.jinja", model_hint=hint)) == family


def test_compare_snapshot(tmp_path: Path) -> None:
    now = {"same.json": "{}\n", "changed.gbnf": "root ::= \"b\"\n", "new.json": "[]"}
    assert compare_snapshot(now, tmp_path / "nothing") == ("none", ())
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "same.json").write_text("{}\n", encoding="utf-8")
    (snap / "changed.gbnf").write_text("root ::= \"a\"\n", encoding="utf-8")
    (snap / "gone.json").write_text("1", encoding="utf-8")
    status, changes = compare_snapshot(now, snap)
    assert status == "changed"
    assert [(c.artefact, c.kind) for c in changes] == [("changed.gbnf", "changed"), ("gone.json", "missing"),
                                                       ("new.json", "new")]
    assert '-root ::= "a"' in changes[0].diff and '+root ::= "b"' in changes[0].diff
    (snap / "gone.json").unlink()
    (snap / "changed.gbnf").unlink()
    assert compare_snapshot({"same.json": "{}\n"}, snap) == ("same", ())


def test_a_broken_template_is_a_row_not_a_crash(tmp_path: Path) -> None:
    missing = collect_row(_entry("missing", tmp_path / "missing.jinja"), tmp_path)
    assert missing.name == "missing" and len(missing.errors) == 1 and missing.errors[0].startswith("read:")
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% if %}never closed", encoding="utf-8")
    row = collect_row(_entry("bad", bad), tmp_path)
    assert row.errors and any(e.startswith(("analysis:", "generate:")) for e in row.errors)
    assert row.grammar_size is None or row.grammar_size >= 0
    assert "bad" in render_html([row, missing])


# --- CLI ----------------------------------------------------------------------------------------------------------

def test_cli_end_to_end_on_real_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["corpus", "report", "--corpus", str(ROOT), "--snapshots", str(tmp_path / "snaps"),
                 "--out", str(out), "--only", *REAL])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"wrote {out / 'report.html'} and {out / 'report.md'}" in printed
    assert "3 templates (" in printed
    t = _table((out / "report.html").read_text(encoding="utf-8"))
    assert [r[0] for r in t.rows] == sorted(REAL)
    assert _column(t, "family") == ["Qwen", "ChatML", "Llama"]
    by_name = {r[0]: dict(zip(t.keys, r)) for r in t.rows}
    assert by_name["Qwen__QwQ-32B"]["reasoning"] == "TAG_BASED"
    assert by_name["axolotl__chatml"]["tools"] == "NONE"
    # the built-in format is what llama.cpp's library renders each text as (tests/data/builtin/reference.json)
    reference = json.loads((ROOT.parent / "tests" / "data" / "builtin" / "reference.json").read_text(encoding="utf-8"))
    assert {n: row["builtin"] for n, row in by_name.items()} == \
        {n: (reference["corpus"][n]["builtin"] or ["none"])[0] for n in REAL}
    assert "none" not in {row["builtin"] for row in by_name.values()}  # three formats llama.cpp knows
    assert all(row["errors"] == "0" for row in by_name.values()), by_name
    # none of the three round-trips an output to break (QwQ's prompt is no prefix of its renders): no share
    assert [row["recovered"] for row in by_name.values()] == ["-1"] * 3
    md = (out / "report.md").read_text(encoding="utf-8")
    assert all(f"| {n} |" in md for n in REAL)
    assert all(f"| {row['builtin']} |" in md for row in by_name.values())
    # where each text comes from, as the manifest records it (hub repo, GGUF file, seed folder, package)
    for n in REAL:
        origins = ", ".join(CORPUS.by_name(n).origins)
        assert origins and f"| {n} | {origins} |" in md
    assert "<code>" + CORPUS.by_name(REAL[0]).origins[0] + "</code>" in (out / "report.html").read_text()


def test_cli_without_corpus_reads_the_corpus_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AUTOPARSER_CORPUS", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./corpus here: the checkout's (the installed one, outside a checkout)
    assert main(["corpus", "report", "--only", "axolotl__chatml", "--out", "out"]) == 0, capsys.readouterr().err
    assert "| axolotl__chatml |" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def test_changes_since_the_snapshot(tmp_path: Path) -> None:
    from autoparser.corpus.artefacts import snapshot_key, template_artefacts

    entry = CORPUS.by_name("Qwen__QwQ-32B")
    folder = tmp_path / "snaps" / snapshot_key(entry)
    folder.mkdir(parents=True)
    arts = template_artefacts(entry.read_text())
    for name, text in arts.items():
        (folder / name).write_text(text, encoding="utf-8", newline="")
    same = collect_row(entry, tmp_path / "snaps")
    assert (same.snapshot, same.changes) == ("same", ())

    (folder / "grammar-one-tool.gbnf").write_text("root ::= <old>\n", encoding="utf-8")
    (folder / "capabilities.json").unlink()
    (folder / "stale.json").write_text("{}", encoding="utf-8")
    row = collect_row(entry, tmp_path / "snaps")
    assert row.snapshot == "changed"
    assert [(c.artefact, c.kind) for c in row.changes] == [
        ("capabilities.json", "new"), ("grammar-one-tool.gbnf", "changed"), ("stale.json", "missing")]
    assert "-root ::= <old>" in row.changes[1].diff
    page = render_html([row])
    assert "-root ::= &lt;old&gt;" in page and "<details><summary>changed (3)</summary>" in page
    assert "- Qwen__QwQ-32B: capabilities.json (new), grammar-one-tool.gbnf (changed), stale.json (missing)" \
        in render_markdown([row])


def test_cli_limit_and_jobs_give_the_same_rows(tmp_path: Path) -> None:
    one = collect_rows(CORPUS, tmp_path, names=REAL, limit=2)
    two = collect_rows(CORPUS, tmp_path, names=REAL, limit=2, jobs=2)
    assert [r.name for r in one] == sorted(REAL)[:2]
    assert one == two


@pytest.mark.parametrize(("argv", "message"), [
    (["--corpus", "{tmp}/nowhere"], "no corpus directory"),
    (["--corpus", "{tmp}"], "no manifest.json"),
    (["--limit", "-1"], "--limit must be >= 0"),
    (["--jobs", "0"], "--jobs must be >= 1"),
    (["--only", "no-such-template-anywhere"], "no template matches"),
])
def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                               message: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    if "--corpus" not in args:
        args = ["--corpus", str(ROOT), *args]
    assert main(["corpus", "report", "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autoparser: error: corpus report:") and message in err
    assert not (tmp_path / "out").exists()


def test_cli_rejects_a_non_integer_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["corpus", "report", "--limit", "many"])
    assert exc.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


# --- the page in a browser ----------------------------------------------------------------------------------------

def _chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        if os.environ.get("AUTOPARSER_REQUIRE_BROWSER") == "1":
            pytest.fail("AUTOPARSER_REQUIRE_BROWSER=1 but no chromium: install Debian's `chromium` package")
        pytest.skip("no chromium on PATH or at /usr/bin/chromium (apt-get install chromium); "
                    "set AUTOPARSER_REQUIRE_BROWSER=1 to make this a failure")
    return path


def _dump_dom(browser: str, page: Path, fragment: str, profile: Path) -> str:
    url = page.resolve().as_uri() + fragment
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<table" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def test_page_in_headless_chromium_and_sorting(tmp_path: Path) -> None:
    browser = _chromium()
    rows = [*ROWS, dataclasses.replace(ROWS[0], name="delta", grammar_size=500, family="Gemma")]
    html_path, _ = write_report(rows, tmp_path / "out")
    profile = tmp_path / "profile"

    plain = _table(_dump_dom(browser, html_path, "", profile))
    assert plain.keys[:3] == ["name", "family", "handler"] and "grammar_size" in plain.keys
    assert len(plain.rows) == 4 and plain.attrs["data-rows"] == "4"
    assert _column(plain, "name") == [r.name for r in rows]  # no hash: the page's own order, untouched
    assert "data-sorted" not in plain.attrs

    by_size = _table(_dump_dom(browser, html_path, "#sort=-grammar_size", profile))
    assert by_size.attrs["data-sorted"] == "-grammar_size"
    assert _column(by_size, "grammar_size") == ["9000", "500", "120", "-1"]  # numeric, not lexicographic

    by_name = _table(_dump_dom(browser, html_path, "#sort=name", profile))
    assert by_name.attrs["data-sorted"] == "name"
    assert _column(by_name, "name") == sorted((r.name for r in rows), key=str.lower)

    by_family = _table(_dump_dom(browser, html_path, "#sort=family", profile))
    assert _column(by_family, "family") == ["Gemma", "Llama", "other", "Qwen"]


def test_filter_and_failures_only_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    html_path, _ = write_report(ROWS, tmp_path / "out")
    profile = tmp_path / "profile"

    def shown(fragment: str) -> tuple[list[str], str]:
        dom = _dump_dom(browser, html_path, fragment, profile)
        rows = re.findall(r'<tr id="t-([^"]*)"([^>]*)>', dom)
        return [name for name, attrs in rows if " hidden" not in attrs], _table(dom).attrs.get("data-shown") or ""

    everything, count = shown("")
    assert count == "3" and len(everything) == 3 and everything[0] == "beta" and everything[2] == "gamma"
    assert shown("#failures") == (["beta", "gamma"], "2")
    assert shown("#filter=qwen") == (["beta"], "1")  # the family, not only the name
    assert shown("#filter=gam&failures") == (["gamma"], "1")
    assert shown("#filter=nothing-like-this") == ([], "0")


def test_recovery_counts_on_real_templates() -> None:
    from autoparser.corpus.mutations import recovery_counts

    # Qwen2.5 renders `<tool_call>` JSON calls: every broken output of the scenarios it passes is recovered
    ok, total = recovery_counts(CORPUS.by_name("Qwen__Qwen2.5-7B-Instruct").read_text())
    assert total >= 10 and ok == total
    # a template without tools or reasoning gives nothing to break; a broken template no count and no crash
    assert recovery_counts(CORPUS.by_name("axolotl__chatml").read_text()) == (0, 0)
    assert recovery_counts("{% if %}") == (0, 0)
