"""`autoparser corpus refresh|nightly|report|summary|fake-hub`: the command-line side of the corpus jobs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoparser.errors import CorpusError, cli_error

if TYPE_CHECKING:
    from autoparser.corpus import Corpus, CorpusEntry

__all__ = ["run_corpus", "run_fake_hub", "run_nightly", "run_refresh", "run_report", "run_summary"]


def run_refresh(args: argparse.Namespace) -> int:
    """Refresh corpus/ from the hub; exit 0 when nothing failed, 1 when something did, 2 on bad input."""
    from autoparser.corpus.fetcher import HubFetcher
    from autoparser.corpus.refresh import read_repo_ids, refresh

    corpus = Path(args.corpus)
    ids_path = Path(args.ids) if getattr(args, "ids", None) else corpus / "model-ids.txt"
    jobs = int(getattr(args, "jobs", 1))
    if jobs < 1:
        return cli_error("corpus refresh: --jobs must be >= 1")
    try:
        ids = read_repo_ids(ids_path)
    except CorpusError as e:
        return cli_error(str(e))
    fetcher = HubFetcher(endpoint=getattr(args, "endpoint", None))
    report = refresh(corpus, ids, fetcher, Path(args.report), discover=int(getattr(args, "discover", 0) or 0),
                     jobs=jobs)
    print(f"corpus refresh: {len(report.added)} added, {len(report.changed)} changed, {len(report.removed)} removed,"
          f" {len(report.failed)} failed ({report.repos_checked} repos, {report.repos_unchanged} unchanged);"
          f" report in {args.report}/")
    if report.nothing_fetched:
        return cli_error(f"corpus refresh: {report.why_nothing_fetched()}", 1)
    return 0 if report.ok else 1


def run_nightly(args: argparse.Namespace) -> int:
    """Refresh, then report what the changed templates do differently: exit 0 nothing changed, 1 something
    changed (report written), 2 the job itself failed (bad input, corpus unreadable, nothing fetched)."""
    from autoparser.corpus.fetcher import HubFetcher
    from autoparser.corpus.nightly import NIGHTLY_MD, nightly
    from autoparser.corpus.refresh import read_repo_ids

    corpus = Path(args.corpus)
    ids_path = Path(args.ids) if args.ids else corpus / "model-ids.txt"
    jobs = int(args.jobs)
    if jobs < 1:
        return cli_error("corpus nightly: --jobs must be >= 1")
    snapshots = Path(args.snapshots)
    if snapshots.exists() and not snapshots.is_dir():
        return cli_error(f"corpus nightly: --snapshots {snapshots} is not a directory")
    try:
        ids = read_repo_ids(ids_path)
        if not ids and not args.discover:
            return cli_error(f"corpus nightly: no repo ids in {ids_path} (and no --discover)")
        report = nightly(corpus, ids, HubFetcher(endpoint=args.endpoint), snapshots=snapshots,
                         report_dir=Path(args.report), update=bool(args.update), discover=int(args.discover or 0),
                         jobs=jobs)
    except CorpusError as e:
        return cli_error(f"corpus nightly: {e}")
    where = f"; report in {Path(args.report) / NIGHTLY_MD}" if report.worth_writing() else ""
    print(f"corpus nightly: {report.summary_line()}{where}")
    if report.nothing_fetched:
        return cli_error(f"corpus nightly: {report.refresh.why_nothing_fetched()}", report.exit_code)
    return report.exit_code


def _selection(args: argparse.Namespace) -> tuple[Corpus, tuple[CorpusEntry, ...]]:
    """The corpus a reading job reads and the templates of it --only and --limit select; CorpusError (whose
    message the job prints after its name) on bad input. `--jobs` is checked here too."""
    from autoparser.corpus import Corpus
    from autoparser.corpus.report import select_entries

    if args.limit is not None and args.limit < 0:
        raise CorpusError("--limit must be >= 0")
    if args.jobs < 1:
        raise CorpusError("--jobs must be >= 1")
    if args.corpus is not None and not Path(args.corpus).is_dir():
        raise CorpusError(f"no corpus directory {args.corpus}")
    # without --corpus: the corpus Corpus.load() finds (./corpus, the checkout's, else the one installed with the
    # package), so that the job runs from any directory
    corpus = Corpus.load(args.corpus)
    selected = select_entries(corpus, args.only, args.limit)
    if args.only and not selected:
        raise CorpusError(f"no template matches --only {' '.join(args.only)}")
    return corpus, selected


def _progress(total: int, job: str) -> Any:
    """A progress bar on stderr, on a terminal only and once the job has taken a second (tqdm comes with
    huggingface_hub): nothing in a pipe, a log or a short run. `bar.update(n)` per result."""
    from tqdm import tqdm

    return tqdm(total=total, unit="template", desc=job, disable=None, delay=1.0)


def run_report(args: argparse.Namespace) -> int:
    """Write report.html + report.md for the corpus (or a --only/--limit subset); exit 0, 2 on bad input."""
    import time

    from autoparser.corpus.report import CppDivergences, collect_rows, made_from, summary_line, write_report

    snapshots = Path(args.snapshots) if args.snapshots else None
    try:
        corpus, selected = _selection(args)
        if snapshots is not None and snapshots.exists() and not snapshots.is_dir():
            raise CorpusError(f"--snapshots {snapshots} is not a directory")
    except CorpusError as e:
        return cli_error(f"corpus report: {e}")
    started = time.monotonic()
    with _progress(len(selected), "corpus report") as bar:
        rows = collect_rows(corpus, snapshots, names=args.only, limit=args.limit, jobs=args.jobs,
                            progress=lambda done, _total: bar.update(done - bar.n))
    divergences = CppDivergences.read(Path(args.cpp_divergences)) if args.cpp_divergences else None
    try:
        html_path, md_path = write_report(rows, Path(args.out), stamp=made_from(corpus.root), divergences=divergences)
    except OSError as e:
        return cli_error(f"corpus report: cannot write to {args.out}: {e.strerror or e}")
    print(f"corpus report: wrote {html_path} and {md_path} in {time.monotonic() - started:.1f}s")
    print(f"corpus report: {summary_line(rows)}")
    return 0


def run_summary(args: argparse.Namespace) -> int:
    """The main job: analyse the corpus (or a --only/--limit subset) and print, per template, the C++ record's
    formats and what autoparser reads beyond them, then totals (corpus/summary.py); exit 0, 2 on bad input.
    Templates that cannot be analysed are listed, not failures."""
    import json
    import time

    from autoparser.corpus.summary import render_summary, summary_rows

    try:
        _corpus, selected = _selection(args)
    except CorpusError as e:
        return cli_error(f"corpus summary: {e}")
    started = time.monotonic()
    with _progress(len(selected), "corpus summary") as bar:
        rows = summary_rows(selected, jobs=args.jobs, progress=lambda done, _total: bar.update(done - bar.n))
    if args.json:
        records = "".join(json.dumps({"name": r.name, **r.record}, ensure_ascii=False) + "\n" for r in rows
                          if not r.error)
        try:
            Path(args.json).write_text(records, encoding="utf-8")
        except OSError as e:
            return cli_error(f"corpus summary: cannot write {args.json}: {e.strerror or e}")
    sys.stdout.write(render_summary(rows, time.monotonic() - started))
    return 0


def run_fake_hub(args: argparse.Namespace) -> int:
    """Serve a directory as the hub on 127.0.0.1 until interrupted; exit 0 then, 2 on a bad directory or port."""
    import threading

    from autoparser.corpus.fakehub import DirectoryHub

    root = Path(args.dir)
    if not root.is_dir():
        return cli_error(f"corpus fake-hub: no directory {root}")
    try:
        hub = DirectoryHub(root, port=int(args.port))
    except OSError as e:
        return cli_error(f"corpus fake-hub: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}")
    n = len(hub.repos)
    # the first line is the whole interface: a script (or a test) reads the URL from it
    print(f"corpus fake-hub: {n} repo{'' if n == 1 else 's'} from {root} at {hub.url} "
          f"(HF_ENDPOINT={hub.url}); Ctrl-C stops it", flush=True)
    try:
        with hub:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


def run_corpus(args: argparse.Namespace) -> int:
    command = getattr(args, "corpus_command", None)
    if command == "refresh":
        return run_refresh(args)
    if command == "nightly":
        return run_nightly(args)
    if command == "report":
        return run_report(args)
    if command == "summary":
        return run_summary(args)
    if command == "fake-hub":
        return run_fake_hub(args)
    return cli_error(f"unknown corpus command {command!r}")
