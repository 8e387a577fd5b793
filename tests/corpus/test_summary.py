"""`autoparser corpus summary`, the main job (README "Quick start"): from any directory, on the corpus that ships
with the package; the C++ record's formats and what autoparser reads beyond them; quiet in a pipe, and a reader
that stops early ends it with exit code 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus
from autoparser.params import strict_analysis

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Corpus.load(ROOT / "corpus")
# a record that says it all; a hand-written format; Python calls where the record says tools=NONE; calls only
# transformers' rendering shows (the record: tools=NONE); tools the template describes but renders no call of
PICKED = ["Qwen__Qwen3-0.6B", "Qwen__Qwen3-Coder-30B-A3B-Instruct", "vllm__tool_chat_template_gemma3_pythonic",
          "DeSTA-ntu__Llama-3.1-8B-Instruct", "typhoon-ai__llama3.1-typhoon2-8b-instruct"]


def _rows(out: str) -> dict[str, str]:
    return {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in PICKED}


def test_the_summary_says_the_record_and_what_is_read_beyond_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AUTOPARSER_CORPUS", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./corpus: the corpus Corpus.load() finds
    assert main(["corpus", "summary", "--only", *PICKED, "--json", "records.jsonl"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert sorted(rows) == sorted(PICKED)
    assert re.fullmatch(r"Qwen__Qwen3-0\.6B +reasoning=TAG_BASED content=PLAIN tools=JSON_NATIVE +'<think>\\n' "
                        r"'\\n</think>\\n\\n' '<tool_call>\\n'", rows["Qwen__Qwen3-0.6B"])
    assert rows["Qwen__Qwen3-Coder-30B-A3B-Instruct"].endswith("+ handler=qwen3_coder")
    pythonic = rows["vllm__tool_chat_template_gemma3_pythonic"]
    assert "tools=NONE" in pythonic and pythonic.endswith("; call_form=PYTHONIC list")
    assert "tools=NONE" in rows["DeSTA-ntu__Llama-3.1-8B-Instruct"]
    assert "+ transformers_reading(reasoning=NONE content=PLAIN tools=JSON_NATIVE)" in \
        rows["DeSTA-ntu__Llama-3.1-8B-Instruct"]
    assert rows["typhoon-ai__llama3.1-typhoon2-8b-instruct"].endswith("+ tool_calls=described_only")
    assert "\n5 templates analysed in " in out and "; 0 could not be analysed\n" in out
    assert "    2  tool calls where the record says tools=NONE\n" in out  # the Python calls and the transformers one
    assert re.search(r"^    3  reasoning=NONE content=PLAIN tools=NONE$", out, re.MULTILINE)
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["name"] for r in records] == sorted(PICKED)
    for name, handler in (("Qwen__Qwen3-0.6B", "autoparser"), ("vllm__tool_chat_template_gemma3_pythonic", "autoparser"),
                          ("Qwen__Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder")):
        analysis = strict_analysis(CORPUS.by_name(name).read_text())  # (as `analyze --json` prints it)
        assert next(r for r in records if r["name"] == name) == \
            {"name": name, **analysis.to_dict(), **analysis.beyond_cpp(), "handler": handler}


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "summary", "--only", "no-such-template-anywhere"]) == 2
    assert capsys.readouterr().err == "autoparser: error: corpus summary: no template matches --only " \
                                      "no-such-template-anywhere\n"


def _summary(*args: str, stdout: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # (the checkout's package, from another directory)
    return subprocess.run([sys.executable, "-m", "autoparser", "corpus", "summary", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300, cwd="/", env=env)


def test_in_a_pipe_it_prints_no_progress() -> None:
    r = _summary("--only", "Qwen__*", "--jobs", "2", stdout=subprocess.PIPE)
    assert (r.returncode, r.stderr) == (0, "")
    assert "Qwen__Qwen3-0.6B " in r.stdout


def test_a_reader_that_stops_early_ends_it_quietly_with_exit_0() -> None:
    """`autoparser corpus summary | head -1`: no BrokenPipeError traceback, and a pipeline under pipefail passes."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write gets EPIPE
    try:
        r = _summary("--only", "Qwen__Qwen3-0.6B", stdout=write_end)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (0, "")
