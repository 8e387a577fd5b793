"""Ratchet files: known gaps listed explicitly (case id -> concrete reason), so regressions fail and
improvements show.

A case that fails and is listed is reported as xfail with its reason (visible in the summary, never a silent
skip). A listed case that now passes fails the test ("remove it from the ratchet"). A failing case that is
not listed fails with its full report (`check_many`: for several cases of one test). Entries naming no
existing case fail `check_known`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest


class Ratchet:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.entries: dict[str, str] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except json.JSONDecodeError as e:
            raise AssertionError(f"{path}: not valid JSON: {e}") from None

    def check(self, case_id: str, failure: str | None) -> None:
        """Call once per case with None (it passed) or the failure report."""
        listed = self.entries.get(case_id)
        if failure is None:
            if listed is not None:
                pytest.fail(f"{case_id} now passes: remove it from {self.path.name} (was: {listed})")
            return
        if listed is None:
            pytest.fail(f"{case_id} (not in {self.path.name}):\n{failure}", pytrace=False)
        pytest.xfail(f"ratchet {self.path.name}: {listed}")

    def triage(self, results: Mapping[str, str | None], sep: str = ": ") -> tuple[list[str], list[str]]:
        """Several cases' results (case id -> None or the failure) against the list: the problems (a case that
        fails unlisted, its failure after `sep`, or passes listed) and the listed cases that still fail."""
        problems: list[str] = []
        listed_failures: list[str] = []
        for case_id, failure in results.items():
            listed = self.entries.get(case_id)
            if failure is None and listed is not None:
                problems.append(f"{case_id} now passes: remove it from {self.path.name} (was: {listed})")
            elif failure is not None and listed is None:
                problems.append(f"{case_id} (not in {self.path.name}){sep}{failure}")
            elif failure is not None:
                listed_failures.append(case_id)
        return problems, listed_failures

    def check_many(self, results: Mapping[str, str | None]) -> None:
        """`check` for several cases of one test at once (case id -> None or the failure): every case that
        fails unlisted or passes listed is reported together; when the only failures are listed ones, the test
        is an xfail naming them (a known gap shows in the summary, as with `check`)."""
        problems, listed = self.triage(results)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        if listed:
            pytest.xfail(f"{len(listed)} listed in {self.path.name} (reasons there): " + ", ".join(listed))

    def check_known(self, case_ids: Iterable[str]) -> None:
        stale = sorted(set(self.entries) - set(case_ids))
        assert not stale, f"{self.path.name} names cases that do not exist: {stale}"
