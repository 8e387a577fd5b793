"""`autoparser analyze`: table, --json in the C++ record shape, clean one-line failures with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus

DATA = Path(__file__).parent.parent / "data"


def _seed(name: str) -> Path:
    return Corpus.load().by_origin(f"seed:templates/{name}").path


def test_json_equals_cpp_record(capsys: pytest.CaptureFixture[str]) -> None:
    rec = json.loads((DATA / "analysis.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert main(["analyze", "--json", str(_seed(rec["template"]))]) == 0
    got = json.loads(capsys.readouterr().out)
    got.pop("builtin_format")  # (what llama.cpp does without --jinja: beside the record, tests/builtin checks it)
    got.pop("beyond_cpp", None)  # (what the analysis finds beyond the C++: after the record, the snapshots hold it)
    assert got == {k: v for k, v in rec.items() if k != "template"}


def test_a_corpus_name_is_a_template(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # from anywhere, as peg_tester resolves it: the corpus Corpus.load() finds
    entry = Corpus.load().by_name("Qwen__Qwen3-0.6B")
    assert main(["analyze", "--json", str(entry.path)]) == 0
    by_path = capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "--json", "Qwen__Qwen3-0.6B"]) == 0
    assert capsys.readouterr().out == by_path
    assert main(["analyze", "Qwen__No-Such-Model"]) == 2
    assert "no such file, nor a corpus template of that name" in capsys.readouterr().err


def test_the_library_resolves_a_corpus_name_as_the_command_does(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import autoparser

    monkeypatch.chdir(tmp_path)
    loaded = autoparser.load_template("Qwen__Qwen3-0.6B")
    assert (loaded.name, loaded.source) == ("Qwen__Qwen3-0.6B", Corpus.load().by_name("Qwen__Qwen3-0.6B").read_text())
    with pytest.raises(autoparser.TemplateError, match="no such file, nor a corpus template of that name"):
        autoparser.load_template("Qwen__No-Such-Model")


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    rec = json.loads((DATA / "analysis.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert main(["analyze", str(_seed(rec["template"]))]) == 0
    out = capsys.readouterr().out
    assert "supports_tool_calls" in out and "reasoning.mode" in out and "tools.format.mode" in out
    assert json.dumps(rec["tools"]["format"]["section_start"]) in out


@pytest.mark.parametrize(("text", "needle"), [
    (None, "cannot read"),
    ("{% if %}", "syntax error"),
    ("{{ raise_exception('boom') }}", "boom"),
])
def test_failures_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None,
                                      needle: str) -> None:
    path = tmp_path / "t.jinja"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert main(["analyze", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_json_of_a_template_failing_every_render_is_the_cpp_default_record(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # The C++ analyses a template that raises on every conversation as all defaults; --json prints that record
    # for comparison with it, and still reports the failure on one line with exit code 2.
    path = tmp_path / "t.jinja"
    path.write_text("{{ raise_exception('boom') }}", encoding="utf-8")
    assert main(["analyze", "--json", str(path)]) == 2
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["reasoning"]["mode"] == "NONE" and record["tools"]["format"]["mode"] == "NONE"
    assert record["assistant_start"] == "" and record["preserved_tokens"] == []
    err = captured.err.strip()
    assert "boom" in err and "every analysis conversation" in err and "\n" not in err
