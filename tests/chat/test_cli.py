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


def test_a_template_from_stdin_is_analysed_as_its_file() -> None:
    r = run("analyze", "--json", "-", stdin=Path(_qwen3()).read_text(encoding="utf-8"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(run("analyze", "--json", _qwen3()).stdout)


def test_parse_refuses_stdin_for_anything_but_the_output(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    for args in (["-"], [_qwen3(), "--tools", "-"]):
        r = run("parse", *args, stdin="Hello")
        assert (r.returncode, r.stdout) == (2, "")
        assert r.stderr == "autoparser: error: parse reads the model output from stdin: give the template and --tools " \
                           "as files\n"


def test_unparseable_output_gives_the_caret_excerpt_and_exit_1_in_strict_mode(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    bad = 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    r = run("parse", _qwen3(), "--tools", str(tools), "--reasoning-format", "none", "--strict", stdin=bad)
    assert r.returncode == 1
    # the template file named, in the user's words (no internal format name), at the call to the undeclared tool
    first, where, *excerpt = r.stderr.splitlines()
    assert first == f"autoparser: error: {_qwen3()}: the output does not match the format this template's model writes"
    # (`get_` still fits the declared `get_weather`)
    assert where == f"at position {bad.index('get_time') + len('get_')}, expected " + '"get_weather"'

    assert "^" in excerpt[-1] and "Traceback" not in r.stderr


def test_a_strict_rejection_points_where_the_output_stops_matching(tmp_path: Path) -> None:
    # llama.cpp's parse fails at the first choice (position 0); the error says where the output breaks
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", oops}}\n</tool_call>'
    r = run("parse", _qwen3(), "--tools", str(tools), "--reasoning-format", "none", "--no-thinking", "--strict",
            stdin=bad)
    assert r.returncode == 1
    assert f"at position {bad.index('oops')}, expected " + '"\\""' in r.stderr, r.stderr


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


# --- bad input: one line on stderr, exit 2, no traceback ---------------------------------------------------------

def _one_line_exit_2(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("autoparser: error: "), r.stderr
    assert all(n in r.stderr for n in needles), r.stderr


def test_a_binary_or_non_utf8_file_is_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"PK\x03\x04\x14\x00\x00\x00" + bytes(range(256)))
    gguf = tmp_path / "model.bin.1"  # the GGUF magic makes a file a GGUF whatever its name: garbage after it
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)))
    latin1 = tmp_path / "t.jinja"
    latin1.write_bytes("{# café #}{{ messages }}".encode("latin-1"))
    for command in (["analyze", str(binary)], ["parse", str(binary)], ["gbnf", str(binary)]):
        _one_line_exit_2(run(*command, stdin="hi"), str(binary), "byte 5 is NUL")
    for command in (["analyze", str(gguf)], ["parse", str(gguf)]):
        _one_line_exit_2(run(*command, stdin="hi"), f"{gguf}: malformed GGUF header")
    _one_line_exit_2(run("analyze", str(latin1)), "byte 6 (0xe9) is not UTF-8")
    _one_line_exit_2(run("parse", _qwen3(), "--tools", str(binary), stdin="hi"), "not a tools file")


def test_tools_that_are_not_tool_objects_are_one_line(tmp_path: Path) -> None:
    for tools, needle in (([*TOOLS, 3], "tools[1] is not a tool"), ({"name": "x"}, "expected a JSON array of tools"),
                          ([{"type": "function", "function": {"parameters": {}}}], "tools[0] is not a tool")):
        path = tmp_path / "tools.json"
        path.write_text(json.dumps(tools))
        _one_line_exit_2(run("parse", _qwen3(), "--tools", str(path), stdin="hi"), needle)
        _one_line_exit_2(run("analyze", _qwen3(), "--tools", str(path)), needle)


def test_contradictory_schema_bounds_are_a_schema_error(tmp_path: Path) -> None:
    # llama.cpp would turn these into a repetition `{5,2}` its grammar parser hangs on
    for schema, needle in (({"type": "string", "minLength": 5, "maxLength": 2}, "minLength 5 exceeds maxLength 2"),
                           ({"type": "array", "minItems": 3, "maxItems": 1}, "minItems 3 exceeds maxItems 1"),
                           ({"type": "integer", "minimum": 5, "maximum": 1}, "lower bound 5 exceeds the upper bound 1"),
                           ({"type": "object", "properties": {"a": {"type": "integer", "exclusiveMinimum": 1,
                                                                    "exclusiveMaximum": 2}}}, "#/properties/a")):
        path = tmp_path / "schema.json"
        path.write_text(json.dumps(schema))
        _one_line_exit_2(run("gbnf", str(path)), needle)


def test_unsupported_schema_keywords_are_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"type": "object", "description": "kept quiet: an annotation",
                                "properties": {"n": {"type": "integer", "multipleOf": 3}}}))
    r = run("gbnf", str(path))
    assert r.returncode == 0 and "root ::=" in r.stdout
    assert r.stderr.splitlines() == [f"autoparser: warning: {path}: 'multipleOf' at #/properties/n is not supported: "
                                     "the grammar does not enforce it"]


def test_version_and_parse_help() -> None:
    from importlib.metadata import version

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"autoparser {version('autoparser')}"
    assert "read from stdin" in " ".join(run("parse", "--help").stdout.split())


def test_a_template_error_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }")
    for command in ("parse", "analyze"):
        _one_line_exit_2(run(command, str(bad), stdin="hi"), f"{bad}: syntax error at line 1")


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    """`autoparser analyze T | head`: the reader goes away; no BrokenPipeError traceback, exit code 0 (the reader
    had what it wanted: a pipeline under pipefail passes)."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write gets EPIPE
    try:
        r = subprocess.run([sys.executable, "-m", "autoparser", "analyze", _qwen3()], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (0, "")
