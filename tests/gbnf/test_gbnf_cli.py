"""`autoparser gbnf SCHEMA.json`: the grammar on stdout; bad input -> one line on stderr, exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autoparser.gbnf.from_schema import json_schema_to_grammar


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoparser", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_prints_the_grammar(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(schema))
    r = run("gbnf", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout == json_schema_to_grammar(schema)


def test_dash_reads_the_schema_from_stdin() -> None:
    schema = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}
    r = run("gbnf", "-", stdin=json.dumps(schema))
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == json_schema_to_grammar(schema)
    r = run("gbnf", "-", stdin='{"type": "str\x00ing"}')
    assert r.returncode == 2 and r.stderr == "autoparser: error: stdin: not a schema file: byte 13 is NUL, which no text " \
                                              "file holds\n"


def test_invalid_json(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text("{not json")
    r = run("gbnf", str(f))
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "invalid JSON" in r.stderr


def test_unsupported_schema(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"type": "object", "properties": {"x": {"type": "frobnicate"}}}))
    r = run("gbnf", str(f))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "#/properties/x" in r.stderr and "frobnicate" in r.stderr


def test_missing_file(tmp_path: Path) -> None:
    r = run("gbnf", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
