"""The first hour of a contributor: the built wheel in a fresh virtualenv, outside this checkout, running a test
file written as the `peg_tester` docstring shows.

The wheel is built from a copy of the sources (the package, its corpus, pyproject.toml), installed with uv from
its cache only (tests never touch the network; tox-uv filled that cache when it built the test environment), and
the external tests run with that venv's own pytest in a subprocess, so nothing of this checkout or of the tox
environment is importable there. Once without llama.cpp's grammar engine (the grammar check is skipped with one
warning line), once with it, named by $AUTOPARSER_LIBLLAMA (the check runs and catches a grammar violation).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoparser.testing import gbnf_oracle

ROOT = Path(__file__).resolve().parents[1]

EXTERNAL_TESTS = '''
import pytest

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}}}]
CALL = '<tool_call>\\n{"name": "get_weather", "arguments": {"days": %s}}\\n</tool_call>'


def test_a_call_by_corpus_name(peg_tester):
    # a corpus name resolves outside the checkout; reasoning_format defaults to the CLI's (auto)
    t = peg_tester("Qwen__Qwen3-0.6B")
    t.test("<think>\\nhm\\n</think>\\n\\n" + CALL % "3").tools(TOOLS).expect(
        {"reasoning_content": "hm", "tool_calls": [{"name": "get_weather", "arguments": '{"days": 3}'}]})


def test_a_misspelt_key_fails(peg_tester):
    with pytest.raises(ValueError, match="did you mean 'reasoning_content'"):
        peg_tester("Qwen__Qwen3-0.6B").test("Hi").expect({"content": "Hi", "reasoning": "x"})


def test_a_wrong_expectation_shows_the_report(peg_tester):
    peg_tester("Qwen__Qwen3-0.6B").test("Hello").expect({"content": "Goodbye"})


def test_the_grammar_catches_a_string_for_an_integer(peg_tester):
    peg_tester("Qwen__Qwen3-0.6B").test(CALL % '"3"').tools(TOOLS).grammar_check().expect(
        {"tool_calls": [{"name": "get_weather", "arguments": '{"days": "3"}'}]})
'''


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        if os.environ.get("CI"):
            pytest.fail("uv not found: the fresh-install test needs it (tox-uv provides it)")
        pytest.skip("uv not found: the fresh-install test installs the wheel with uv from its cache")
    return uv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = _uv()
    src = tmp_path_factory.mktemp("src")
    for name in ("autoparser", "corpus"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    for name in ("pyproject.toml", "README.md", "NOTICE"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([uv, "build", "--offline", "--wheel", "-q", "-o", str(out), str(src)], check=True, timeout=600,
                   capture_output=True)
    return next(out.glob("autoparser-*.whl"))


def _venv(tmp: Path, wheel: Path) -> Path:
    uv = _uv()
    venv = tmp / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=300, capture_output=True)
    python = venv / "bin" / "python"
    done = subprocess.run([uv, "pip", "install", "-q", "--offline", "-p", str(python), str(wheel), "pytest"],
                          timeout=600, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return python


def _run(python: Path, where: Path, **set_env: str) -> str:
    (where / "test_external.py").write_text(EXTERNAL_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPARSER_", "PYTEST_", "PYTHON"))}
    env.update(set_env)
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "default::UserWarning", "test_external.py"], cwd=where, env=env, timeout=600,
                          capture_output=True, text=True)
    return done.stdout + done.stderr


def test_without_llama_cpp_the_grammar_check_is_skipped_with_one_line(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path, wheel)
    assert subprocess.run([str(python), "-c", "import llama_cpp"], capture_output=True).returncode != 0
    out = _run(python, tmp_path)
    assert "1 failed, 3 passed" in out, out
    assert "FAILED test_external.py::test_a_wrong_expectation_shows_the_report" in out, out
    assert out.count("grammar check skipped: llama.cpp grammar engine unavailable") == 1, out
    # the failure shows the test's line and the field-by-field report, not the library's frames
    assert "content: expected 'Goodbye', got 'Hello'" in out and "def expect(" not in out, out


@pytest.mark.oracle
def test_with_llama_cpps_engine_the_grammar_check_runs(wheel: Path, tmp_path: Path) -> None:
    # the engine this run has (tox: the reference's libllama.so, which tools.cpp_oracle built), named as a user
    # outside the checkout names it
    gbnf_oracle.require_oracle()
    python = _venv(tmp_path, wheel)
    out = _run(python, tmp_path, AUTOPARSER_LIBLLAMA=str(gbnf_oracle.library()))
    assert "2 failed, 2 passed" in out, out
    assert "grammar check skipped" not in out, out
    assert "grammar: the constrained output" in out, out


# The first hour on the command line, outside the checkout and in pipes: the main job on the packaged corpus
# (its exit status stable when the reader stops early), a schema on stdin, and the stages and names the README
# uses after a plain `import autoparser`.
COMMANDS = r'''
set -u
autoparser corpus summary --only 'Qwen__Qwen3-0.6B' | head -1; echo "summary=${PIPESTATUS[0]}"
autoparser corpus summary --limit 30 | head -1 >/dev/null; echo "early-close=${PIPESTATUS[0]}"
echo '{"type": "integer"}' | autoparser gbnf - | grep -c '^root ::='
python - <<'PY'
import autoparser
print("export:", autoparser.export.response_template.__name__)
source = autoparser.load_template("Qwen__Qwen3-0.6B")
try:
    autoparser.generate(source, {"messages": [{"role": "user", "content": "hi"}], "tool": []})
except autoparser.UnknownKeyError as e:
    print("refused:", e)
PY
'''


def test_the_commands_outside_the_checkout_and_in_pipes(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path, wheel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPARSER_", "PYTEST_", "PYTHON"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "elsewhere"
    work.mkdir()
    done = subprocess.run(["bash", "-c", COMMANDS], cwd=work, env=env, timeout=600, capture_output=True, text=True)
    out = done.stdout
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert out.startswith("Qwen__Qwen3-0.6B ") and "tools=JSON_NATIVE" in out.splitlines()[0], out
    assert "summary=0" in out and "early-close=0" in out, out
    assert "\n1\n" in out, out  # (the schema read from stdin made one root rule)
    assert "export: response_template" in out, out
    assert "refused: generate(): unknown key 'tool' in the request (did you mean 'tools'?)" in out, out
