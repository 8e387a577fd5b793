"""`autoparser render --builtin NAME CONVERSATION.json` and the built-in format `autoparser analyze` names, against
the prompts and detections llama.cpp's library gave (tests/data/builtin/reference.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoparser.cli import main
from autoparser.corpus import Corpus

REFERENCE = json.loads((Path(__file__).resolve().parent.parent / "data" / "builtin" / "reference.json")
                       .read_text(encoding="utf-8"))
PROBE = REFERENCE["probes"][0]  # the conversation of test-chat-template.cpp; probe 1 is it without add_ass
assert PROBE["add_ass"] and not REFERENCE["probes"][1]["add_ass"]
assert REFERENCE["probes"][1]["messages"] == PROBE["messages"]


def _conversation(tmp_path: Path, wrapped: bool = False) -> Path:
    messages = [{"role": role, "content": content} for role, content in PROBE["messages"]]
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps({"messages": messages} if wrapped else messages), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", REFERENCE["builtin_templates"])
def test_render_prints_llama_cpps_prompt(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conv = _conversation(tmp_path)
    assert main(["render", "--builtin", name, str(conv)]) == 0
    assert capsys.readouterr().out == REFERENCE["by_name"][name][0]
    assert main(["render", "--builtin", name, "--no-add-generation-prompt", str(conv)]) == 0
    assert capsys.readouterr().out == REFERENCE["by_name"][name][1]


def test_render_takes_a_messages_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--builtin", "llama3", str(_conversation(tmp_path, wrapped=True))]) == 0
    assert capsys.readouterr().out == REFERENCE["by_name"]["llama3"][0]


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("chatml3", None, "'chatml3' is not a llama.cpp built-in chat template"),
    ("chatml", "[{", "invalid JSON"),
    ("chatml", '{"msgs": []}', "a conversation is a JSON list of messages"),
    ("chatml", '[{"role": "user", "content": 1}]', "message 0: content"),
])
def test_render_failures_are_one_line_exit_2(name: str, text: str | None, needle: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _conversation(tmp_path)
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert main(["render", "--builtin", name, str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def _corpus_template(want: list[str] | None) -> Path:
    """The first corpus template llama.cpp renders as exactly the formats `want` (None: one it rejects)."""
    corpus = {e.name: e for e in Corpus.load().entries}
    for name, ref in REFERENCE["corpus"].items():
        if name in corpus and (ref["rejected"] if want is None else (not ref["rejected"] and ref["builtin"] == want)):
            return corpus[name].path
    raise AssertionError(f"no corpus template llama.cpp renders as {want}")


@pytest.mark.parametrize(("want", "shown"), [(["llama3"], "llama3"), (["gemma"], "gemma"), (None, None)])
def test_analyze_names_the_builtin_format(want: list[str] | None, shown: str | None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _corpus_template(want)
    assert main(["analyze", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["builtin_format"] == shown
    assert main(["analyze", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== Built-in format")]
    assert len(lines) == 1 and lines[0].endswith(f": {shown}" if shown else "(rejected: \"this custom template "
                                                                             "is not supported\")")
