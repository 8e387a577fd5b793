"""`autoparser matrix`: every engine over every corpus template's cases; writes reports/matrix/.

Exit 0 when every miss of autoparser's own reading is in a ratchet, 1 when one is new or a ratchet entry no
longer fails (with `--check`), 2 on bad input (no corpus, an engine `--require`d that cannot run here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autoparser.corpus import Corpus
from autoparser.corpus.nightly import NIGHTLY_MD, add_report_section
from autoparser.corpus.report import made_from
from autoparser.errors import AutoparserError, cli_error
from autoparser.matrix import ENGINES
from autoparser.matrix.cases import RENDERED
from autoparser.matrix.engines import (
    AutoparserEngine,
    Engine,
    LlamaCppEngine,
    SGLangEngine,
    StrictEngine,
    TransformersEngine,
    default_sglang_python,
)
from autoparser.matrix.page import matrix_changes, matrix_from_json, summary_markdown, write_matrix
from autoparser.matrix.run import Matrix, run_matrix

__all__ = ["engines", "load_known", "run_matrix_command", "write_known"]

def engines(names: Iterable[str], *, cpp: Path | None, sglang: Path | None) -> list[Engine]:
    made: dict[str, Engine] = {AutoparserEngine.name: AutoparserEngine(), StrictEngine.name: StrictEngine(),
                               LlamaCppEngine.name: LlamaCppEngine(cpp), TransformersEngine.name: TransformersEngine(),
                               SGLangEngine.name: SGLangEngine(sglang)}
    assert tuple(made) == ENGINES
    return [made[n] for n in names]


def load_known(paths: Sequence[Path]) -> dict[str, str]:
    """The ratchets' reasons by case id: the matrix's own (variants, `<template>::<scenario>::<kind>`) and the
    round-trip ratchet's self round trips (`self:<template>::<scenario>`, the matrix's rendered cases)."""
    known: dict[str, str] = {}
    for path in paths:
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise AutoparserError(f"cannot read the ratchet {path}: {e.strerror or e}") from None
        except json.JSONDecodeError as e:
            raise AutoparserError(f"the ratchet {path} is not valid JSON: {e}") from None
        known.update({k.removeprefix("self:"): v for k, v in entries.items()})
    return known


def write_known(matrix: Matrix, path: Path, old: dict[str, str]) -> int:
    """Rewrite the matrix's own ratchet (variant cases) from this run: a listed reason is kept, a new miss is
    written as a gap with its differences (to be read and labelled by hand). Returns the entries written."""
    ran = {row.template for row in matrix.rows if AutoparserEngine.name in row.cells}
    entries = {k: v for k, v in old.items() if k.split("::")[0] not in ran}
    for row in matrix.rows:
        cell = row.cells.get(AutoparserEngine.name)
        for m in cell.misses if cell else ():
            if m.kind != RENDERED:
                entries[m.case] = old.get(m.case) or f"gap: {'; '.join(m.differences)}"[:300]
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return len(entries)


def _previous(path: Path) -> Matrix | None:
    """The matrix an earlier run wrote (read before this run writes over it), None where there is none."""
    try:
        return matrix_from_json(json.loads(path.read_text(encoding="utf-8", errors="surrogateescape")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AutoparserError(f"{path} is not a matrix.json this command wrote: {e}") from None


def run_matrix_command(args: Any) -> int:
    from tqdm import tqdm

    try:
        corpus = Corpus.load(Path(args.corpus)) if args.corpus else Corpus.load()
        own, roundtrip = Path(args.known), Path(args.roundtrip_known)
        known = load_known([p for p in (roundtrip, own) if p.is_file()])
        previous = _previous(Path(args.since)) if args.since else None  # before this run writes over it
    except AutoparserError as e:
        return cli_error(f"matrix: {e}")
    cpp = Path(args.cpp) if args.cpp else None
    sglang = Path(args.sglang) if args.sglang else default_sglang_python()
    chosen = engines(args.engines, cpp=cpp, sglang=sglang)
    missing = {e.name: why for e in chosen if (why := e.missing()) is not None}
    for name, why in missing.items():
        print(f"matrix: {name} not run: {why}")
    if args.require_all and missing:
        return cli_error(f"matrix: --require-all, but {', '.join(missing)} cannot run here")
    with tqdm(unit="template", desc="matrix", disable=None) as bar:
        def tick(stage: str, done: int, total: int) -> None:
            bar.set_description(f"matrix: {stage}")
            if done < bar.n or bar.total != total:
                bar.reset(total)
            bar.update(done - bar.n)

        matrix = run_matrix(corpus, chosen, only=args.only, jobs=max(1, int(args.jobs or 1)), known=known,
                            made_from=made_from(Path.cwd()), progress=tick)
    page = write_matrix(matrix, Path(args.out))
    if args.since:
        if previous is None:
            print(f"matrix: no earlier matrix at {args.since}: nothing to compare")
        else:
            changes = matrix_changes(previous, matrix)
            (Path(args.out) / "changes.md").write_text(changes, encoding="utf-8")
            print(f"matrix: changes since {args.since} in {Path(args.out) / 'changes.md'}")
            if args.add_to_report and add_report_section(Path(args.add_to_report), changes):
                print(f"matrix: the changes are a section of {Path(args.add_to_report) / NIGHTLY_MD}")
    print(summary_markdown(matrix), end="")
    print(f"matrix: {len(matrix.rows)} templates; page {page}")
    if args.write_known:
        n = write_known(matrix, own, load_known([own]) if own.is_file() else {})
        print(f"matrix: {own}: {n} entries")
        return 0
    new = matrix.new_failures()
    stale = matrix.stale(load_known([own]) if own.is_file() else {})
    for m in new[:20]:
        print(f"  new: autoparser misreads {m.case}: {'; '.join(m.differences)[:200]}")
    if len(new) > 20:
        print(f"  … {len(new) - 20} more new")
    for key in stale:
        print(f"  now read as meant, remove from {own}: {key}")
    print(f"matrix: {len(new)} of autoparser's misses not in a ratchet, {len(stale)} ratchet entries stale")
    return 1 if args.check and (new or stale) else 0

