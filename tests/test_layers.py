"""The package imports downward only: each pipeline stage may use the stages below it, never one above.

The order is the README's layout (errors and types at the bottom, the command line and the package's facade
on top). Every import is counted, including those inside functions and under TYPE_CHECKING: a deferred
upward import is still a cycle between stages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autoparser

LAYERS = ["errors", "types", "peg", "gbnf", "template", "analysis", "chat", "corpus", "testing",
          "cli", "__main__", "__init__"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def upward_imports(package: Path) -> list[str]:
    """`module: imports target` for every import of a stage above the importing module's own."""
    found = []
    for path in sorted(package.rglob("*.py")):
        unit = path.relative_to(package).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: relative import (the package uses absolute ones)"
                targets = [node.module or ""]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if parts[0] != package.name or len(parts) < 2:
                    continue
                if RANK[parts[1]] > RANK[unit]:
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}: imports {target}")
    return found


def test_every_stage_is_a_layer() -> None:
    package = Path(autoparser.__file__).parent
    units = {p.name.removesuffix(".py") for p in package.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert units == set(LAYERS)


def test_the_package_imports_downward_only() -> None:
    assert upward_imports(Path(autoparser.__file__).parent) == []


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "autoparser"
    (package / "peg").mkdir(parents=True)
    (package / "peg" / "engine.py").write_text("def f():\n    from autoparser.chat import mapper\n")
    (package / "chat").mkdir()
    (package / "chat" / "mapper.py").write_text("from autoparser.peg import engine\nimport autoparser.errors\n")
    assert upward_imports(package) == ["autoparser/peg/engine.py:2: imports autoparser.chat"]
