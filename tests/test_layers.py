"""The package imports downward only: each pipeline stage may use the stages below it, never one above.

The order is the README's layout (errors and types at the bottom, the command line and the package's facade
on top). Every import is counted, including those inside functions and under TYPE_CHECKING: a deferred
upward import is still a cycle between stages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autoparser

LAYERS = ["errors", "types", "peg", "gbnf", "template", "builtin", "analysis", "chat", "recovery", "params", "export",
          "corpus", "testing", "matrix", "cli", "__main__", "__init__"]
RANK = {name: i for i, name in enumerate(LAYERS)}

# Inside chat/, the same rule between modules: the formats (spec, handlers, generic) build on the prepared
# request (inputs), the builder, the mapper and the stream.
CHAT = ["__init__", "request", "tools", "constraint", "compare", "tags", "builder", "mapper", "growth", "stream", "inputs", "spec",
        "handlers", "generic"]
CHAT_RANK = {name: i for i, name in enumerate(CHAT)}


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (the package uses absolute ones)"
            out.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
    return out


def upward_imports(package: Path) -> list[str]:
    """`module: imports target` for every import of a stage above the importing module's own (and, inside
    chat/, of a module above the importing one)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).parts
        unit = where[0].removesuffix(".py")
        for lineno, target in _imports(path):
            parts = target.split(".")
            if parts[0] != package.name or len(parts) < 2:
                continue
            upward = RANK[parts[1]] > RANK[unit]
            if not upward and unit == "chat" == parts[1] and len(where) > 1 and len(parts) > 2:
                own = where[1].removesuffix(".py")
                upward = own != parts[2] and CHAT_RANK[parts[2]] > CHAT_RANK[own]
            if upward:
                found.append(f"{path.relative_to(package.parent)}:{lineno}: imports {target}")
    return found


def test_every_stage_is_a_layer() -> None:
    package = Path(autoparser.__file__).parent
    units = {p.name.removesuffix(".py") for p in package.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert units == set(LAYERS)


def test_the_package_imports_downward_only() -> None:
    assert upward_imports(Path(autoparser.__file__).parent) == []


def test_every_chat_module_has_a_place() -> None:
    chat = Path(autoparser.__file__).parent / "chat"
    assert {p.name.removesuffix(".py") for p in chat.iterdir() if p.suffix == ".py" or p.is_dir()} - {"__pycache__"} \
        == set(CHAT)


def test_a_handler_importing_the_generator_is_reported(tmp_path: Path) -> None:
    handlers = tmp_path / "autoparser" / "chat" / "handlers"
    handlers.mkdir(parents=True)
    (handlers / "x.py").write_text("from autoparser.chat.spec import FormatSpec\n"
                                   "def f():\n    from autoparser.params import generate\n")
    assert upward_imports(tmp_path / "autoparser") == ["autoparser/chat/handlers/x.py:3: imports autoparser.params"]


def relaxing_reads(package: Path) -> list[str]:
    """`module:line: what` for every place a format's build (chat/handlers/, chat/generic.py, chat/spec.py) asks
    which parser it builds: an attribute or name that says lenient or relaxed, or the relaxed builder named.
    Relaxations are the builder's hooks (chat/builder.py), overridden by the recovery's relaxed builder."""
    chat = package / "chat"
    found = []
    for path in sorted([*(chat / "handlers").glob("*.py"), chat / "generic.py", chat / "spec.py"]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            if "lenient" in name.lower() or name.lower() in ("relaxed", "is_relaxed") or name == "RelaxedBuilder":
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {name}")  # type: ignore[attr-defined]
    return found


def test_no_format_asks_whether_it_builds_the_relaxed_parser() -> None:
    assert relaxing_reads(Path(autoparser.__file__).parent) == []


def test_a_format_reading_a_relaxing_flag_is_reported(tmp_path: Path) -> None:
    handlers = tmp_path / "autoparser" / "chat" / "handlers"
    handlers.mkdir(parents=True)
    (tmp_path / "autoparser" / "chat" / "generic.py").write_text("")
    (tmp_path / "autoparser" / "chat" / "spec.py").write_text("")
    (handlers / "x.py").write_text("def build(b):\n    return b.p.eps() if b.lenient else b.p.literal('x')\n")
    assert relaxing_reads(tmp_path / "autoparser") == ["autoparser/chat/handlers/x.py:2: lenient"]


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "autoparser"
    (package / "peg").mkdir(parents=True)
    (package / "peg" / "engine.py").write_text("def f():\n    from autoparser.chat import mapper\n")
    (package / "chat").mkdir()
    (package / "chat" / "mapper.py").write_text("from autoparser.peg import engine\nimport autoparser.errors\n")
    assert upward_imports(package) == ["autoparser/peg/engine.py:2: imports autoparser.chat"]
