"""The README's library example runs as written (from the repository root, as a reader would run it)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_readme_library_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert blocks, "README.md has no python example"
    monkeypatch.chdir(ROOT)
    scope: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    final, params, output = scope["final"], scope["params"], scope["output"]
    assert final == params.parse(output)  # type: ignore[attr-defined]
    assert final.tool_calls[0].name == "get_weather"  # type: ignore[attr-defined]
    assert final.reasoning_content == "Call the tool.\n"  # type: ignore[attr-defined]
    printed = capsys.readouterr().out
    assert "'tool_calls'" in printed and "'reasoning_content'" in printed  # the deltas it prints


def test_readme_recovery_example_says_what_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The malformed-output example runs after the first one, and its comments are what it gives."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    monkeypatch.chdir(ROOT)
    scope: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    block = blocks[1]
    exec(compile(block, "README.md", "exec"), scope)
    msg = scope["msg"]
    shown = re.search(r"\[d\.message for d in msg\.diagnostics\]\n# (\[.*?\])\n(?!#)", block + "\n", re.DOTALL)
    assert shown, block
    assert repr([d.message for d in msg.diagnostics]) == shown.group(1).replace("\n#  ", " ")  # type: ignore[attr-defined]
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Paris"}')]  # type: ignore[attr-defined]


def test_readme_builtin_example_says_what_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in formats example runs after the first one (it reuses its template) and each line gives the
    value its comment opens with (a trailing "..." : a prefix of it)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    block = next(b for b in blocks if "autoparser.builtin" in b)
    monkeypatch.chdir(ROOT)
    scope: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    exec(compile(block, "README.md", "exec"), scope)
    shown = [line.split("#", 1) for line in block.splitlines() if "#" in line]
    assert len(shown) == 2, block
    for code, comment in shown:
        literal = re.match(r"\s*('(?:[^'\\]|\\.)*')", comment)
        assert literal, comment
        value, want = eval(code, scope), ast.literal_eval(literal.group(1))
        assert value.startswith(want[:-3]) if want.endswith("...") else value == want, (value, want)


def test_readme_quick_start_runs_the_main_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The quick start's command (after its install step) is the main job on the embedded corpus, and runs from
    any directory; here on its first three templates."""
    from autoparser.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1]
    command = re.search(r"```sh\n(.*?)\n```", quick, re.DOTALL)
    assert command, "README.md's quick start has no command"
    install, job = command.group(1).split(" && ")
    assert install == "pip install -e ." and job == "autoparser corpus summary"
    monkeypatch.delenv("AUTOPARSER_CORPUS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main([*job.split()[1:], "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 templates analysed in " in out and "The C++ analysis record" in out


def test_readme_installs_autoparser_only_from_where_it_is() -> None:
    """autoparser is not published on PyPI: every `pip install` the README shows takes it from the clone (`-e .`,
    `'.[test]'`) or from a git URL (`autoparser[test] @ git+URL`), never by its bare name."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [c.split("&&")[0] for c in re.findall(r"pip install [^`\n]*", readme)]
    assert len(commands) >= 5
    by_name = [c for c in commands for arg in shlex.split(c)[2:]
               if re.match(r"autoparser(\[[a-z,]+\])?$", arg.split("@")[0].strip()) and "@ git+" not in arg]
    assert by_name == []


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs exactly the command README.md's "Run the tests" gives."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("Run the tests", 1)[1]
    command = re.search(r"```sh\n(.*?)\n```", section, re.DOTALL)
    assert command, "README.md's Run the tests has no command"
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [line for line in script if line and not line.startswith(("#", " "))][-1] == command.group(1)



def test_readme_structured_output_table_is_the_formats_specs() -> None:
    """Each row of the "Structured output" table says which schema asks for JSON and when the grammar is lazy as
    the format's spec has it (spec.SchemaRule, spec.Laziness), and every hand-written format has a row."""
    import importlib

    from autoparser.chat.handlers import DETECTORS
    from autoparser.chat.spec import FormatSpec, Laziness, SchemaRule
    from autoparser.params.generator import _format

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Structured output: `json_schema`", 1)[1].split("\n\n")[2]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in table.splitlines()[2:]]
    specs: dict[str, FormatSpec] = {}
    for detect in DETECTORS:
        for value in vars(importlib.import_module(detect.__module__)).values():
            if isinstance(value, FormatSpec):
                specs.setdefault(value.name, value)
    qwen = (ROOT / "corpus" / "templates" / "Qwen__Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    specs["derived by the analyzer"] = _format(qwen)
    rule = {"any object": SchemaRule.OBJECT, "a non-empty object": SchemaRule.NON_EMPTY_OBJECT,
            "none: the schema is ignored": SchemaRule.IGNORED}
    lazy = {"not lazy": Laziness.UNLESS_FORCED,
            "lazy when tools come too and `tool_choice` is not required": Laziness.TOOLS_NOT_REQUIRED,
            "lazy when tools come too and `tool_choice` is auto": Laziness.TOOLS_AUTO}
    named: set[str] = set()
    for cells in rows:
        names = [n.strip("`") for n in cells[0].split(", ")]
        named.update(names)
        for name in names:
            assert specs[name].response_format is rule[cells[1]], name
            if specs[name].response_format is not SchemaRule.IGNORED:
                assert specs[name].laziness is lazy[cells[3]], name
    assert named == set(specs)


def test_readme_lark_example_is_what_the_command_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The Qwen3 Lark grammar the README shows is what `autoparser export lark` prints for its tool."""
    import json

    from autoparser.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [shown] = re.findall(r"```lark\n(.*?)```", readme, re.DOTALL)
    command = next(line for line in readme.splitlines() if line.startswith("autoparser export lark Qwen__"))
    # the tool the text around it names: get_weather(city, days?)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}}]), encoding="utf-8")
    args = shlex.split(command.split("#")[0])[1:]
    args[args.index("tools.json")] = str(tools)
    assert main(args) == 0
    assert capsys.readouterr().out == shown
