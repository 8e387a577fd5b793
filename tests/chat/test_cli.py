"""`autoparser parse` and `autoparser analyze --tools`: end-to-end through the console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autoparser.corpus import Corpus

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoparser", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def _qwen3() -> str:
    return str(Corpus.load().by_origin("seed:templates/Qwen-Qwen3-0.6B.jinja").path)


def test_parse_prints_the_message(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    out = '<think>\nhmm\n</think>\n\nLet me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    r = run("parse", _qwen3(), "--tools", str(tools), stdin=out)
    assert r.returncode == 0, r.stderr
    msg = json.loads(r.stdout)
    assert msg["reasoning_content"].strip() == "hmm"
    assert msg["content"].strip() == "Let me check."
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["tool_calls"]] == [("get_weather", {"city": "Paris"})]


def test_unparseable_output_gives_the_caret_excerpt_and_exit_1_in_strict_mode(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    bad = 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    r = run("parse", _qwen3(), "--tools", str(tools), "--reasoning-format", "none", "--strict", stdin=bad)
    assert r.returncode == 1
    assert "does not match the expected peg-native format" in r.stderr
    assert "^" in r.stderr and "Traceback" not in r.stderr


def test_a_malformed_output_is_recovered_with_its_repairs_on_stderr_and_exit_0(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    # the model forgot the closer of its call
    cut = '<think>\nhmm\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    r = run("parse", _qwen3(), "--tools", str(tools), stdin=cut)
    assert r.returncode == 0, r.stderr
    msg = json.loads(r.stdout)
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["tool_calls"]] == [("get_weather", {"city": "Paris"})]
    assert [d["kind"] for d in msg["diagnostics"]] == ["missing_closer"]
    assert "repaired: missing '</tool_call>'" in r.stderr and "Traceback" not in r.stderr


def test_analyze_shows_the_generated_parser_and_grammar(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    r = run("analyze", _qwen3(), "--tools", str(tools))
    assert r.returncode == 0, r.stderr
    assert "Generated parser" in r.stdout and "tool-get-weather ::=" in r.stdout
    j = run("analyze", "--json", _qwen3(), "--tools", str(tools))
    record = json.loads(j.stdout)
    assert record["reasoning"]["start"].strip() == "<think>"
    assert "tool-get-weather ::=" in record["generated"]["grammar"] and record["generated"]["grammar_lazy"]


def test_parse_missing_template_is_a_clean_error(tmp_path: Path) -> None:
    r = run("parse", str(tmp_path / "missing.jinja"), stdin="hi")
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_analyze_prints_the_analysis_when_the_parser_cannot_be_built(tmp_path: Path) -> None:
    # firefunction-v2 analyses like the C++ (its probes render), but a plain request renders the undefined
    # `functions`, which jinja2 refuses: the analysis must still be printed, the failure reported beside it.
    template = str(Corpus.load().by_origin("seed:templates/fireworks-ai-llama-3-firefunction-v2.jinja").path)
    j = run("analyze", "--json", template)  # the C++ record shape: nothing generated in it, so nothing to fail
    assert j.returncode == 0, j.stderr
    assert json.loads(j.stdout)["caps"]["supports_tool_calls"] is True
    r = run("analyze", template)
    assert r.returncode == 1
    assert "reasoning.mode" in r.stdout and "not built: " in r.stdout and "'functions' is undefined" in r.stdout
    assert r.stderr.count("\n") == 1 and "generating the parser" in r.stderr and "Traceback" not in r.stderr
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    t = run("analyze", "--json", template, "--tools", str(tools))
    assert t.returncode == 1
    assert "'functions' is undefined" in json.loads(t.stdout)["generated"]["error"]


def test_analyze_with_unreadable_tools_is_a_clean_usage_error(tmp_path: Path) -> None:
    not_a_list = tmp_path / "tools.json"
    not_a_list.write_text('{"type": "function"}')
    for tools, needle in ((tmp_path / "missing.json", "cannot read tools"), (not_a_list, "expected a JSON array")):
        r = run("analyze", _qwen3(), "--tools", str(tools))
        assert r.returncode == 2 and r.stdout == "" and needle in r.stderr and "Traceback" not in r.stderr
