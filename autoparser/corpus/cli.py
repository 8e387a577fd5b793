"""`autoparser corpus refresh|report`: the command-line side of the corpus jobs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoparser.errors import CorpusError

__all__ = ["run_corpus", "run_refresh"]


def _fail(message: str, code: int = 2) -> int:
    print(f"autoparser: error: {message}", file=sys.stderr)
    return code


def run_refresh(args: argparse.Namespace) -> int:
    """Refresh corpus/ from the hub; exit 0 when nothing failed, 1 when something did, 2 on bad input."""
    from autoparser.corpus.fetcher import HubFetcher
    from autoparser.corpus.refresh import read_repo_ids, refresh

    corpus = Path(args.corpus)
    ids_path = Path(args.ids) if getattr(args, "ids", None) else corpus / "model-ids.txt"
    try:
        ids = read_repo_ids(ids_path)
    except CorpusError as e:
        return _fail(str(e))
    fetcher = HubFetcher(endpoint=getattr(args, "endpoint", None))
    report = refresh(corpus, ids, fetcher, Path(args.report), discover=int(getattr(args, "discover", 0) or 0))
    print(f"corpus refresh: {len(report.added)} added, {len(report.changed)} changed, {len(report.removed)} removed,"
          f" {len(report.failed)} failed ({report.repos_checked} repos, {report.repos_unchanged} unchanged);"
          f" report in {args.report}/")
    return 0 if report.ok else 1


def run_corpus(args: argparse.Namespace) -> int:
    command = getattr(args, "corpus_command", None)
    if command == "refresh":
        return run_refresh(args)
    if command == "report":
        return _fail("corpus report: not implemented yet")
    return _fail(f"unknown corpus command {command!r}")
