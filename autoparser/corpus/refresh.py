"""The refresh job: fetch every tracked repo, update corpus/, and write the change report.

Crash safety. Each repo's changes are committed on their own: new template files first (hidden temp file +
os.replace), then manifest.json, then files no longer named are deleted. When a changed template keeps its
name, the manifest is first rewritten without the old entry, so at no moment does the manifest name a file
whose bytes differ from its sha256. Before the first change of a run, the old state of every origin about to
change is saved in `.refresh-journal.json`; the report is computed from that journal against the final
manifest, so a run killed half way and resumed still reports every change once. The journal goes away when
the report is written. A run that changes nothing writes nothing under corpus/.

A run that fails (no repo could be read: hub down or unreachable, offline with nothing cached, discovery
failed) leaves corpus/ and snapshots/ byte for byte as they were: the corpus is only written by the commit of
a repo that was read, the failures of unreadable repos wait in memory and are written with the manifest of a
run that read something, and a pending journal (a run killed half way) is left for the next run that succeeds
to finish. Only the report, outside the checkout's tracked files, says what failed.

With a snapshots directory (the nightly job), the journal also keeps each changed template's snapshot files as
they were before the run, so the behaviour diff of a resumed run compares with the same old side even when the
first run had already rewritten some snapshots.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autoparser.corpus.fetcher import HubFetcher, RepoFetch
from autoparser.corpus.manifest import (
    TEMPLATES_DIR,
    Failure,
    Manifest,
    ManifestEntry,
    RepoRecord,
    atomic_write_bytes,
    entry_name,
    safe_template_path,
    sha256_hex,
)
from autoparser.errors import CorpusError

__all__ = ["JOURNAL_NAME", "ChangeReport", "CorpusUpdater", "read_repo_ids", "read_snapshot_folder", "refresh",
           "snapshot_folder"]

JOURNAL_NAME = ".refresh-journal.json"
REPORT_JSON = "corpus-change-report.json"
REPORT_MD = "corpus-change-report.md"


def hub_origin(repo_id: str, template_name: str) -> str:
    return f"hub:{repo_id}#{template_name}"


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def snapshot_folder(snapshots: Path, name: str) -> Path:
    """snapshots/<key>/ of the corpus template called `name` (artefacts.snapshot_key)."""
    from autoparser.corpus.artefacts import snapshot_key  # (the artefacts import the whole chat stage)

    return snapshots / snapshot_key(name)


def read_snapshot_folder(snapshots: Path, name: str) -> dict[str, str] | None:
    """A template's snapshot files (file name -> text, read as the snapshot suite writes them), or None when
    it has no folder."""
    folder = snapshot_folder(snapshots, name)
    if not folder.is_dir():
        return None
    return {p.name: p.read_bytes().decode("utf-8", "surrogateescape")
            for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}


def read_repo_ids(path: Path) -> list[str]:
    """Repo ids, one a line; blank lines and # comments skipped; order kept, duplicates dropped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise CorpusError(f"cannot read repo id list {path}: {e.strerror or e}") from None
    seen: dict[str, None] = {}
    for line in lines:
        rid = line.split("#", 1)[0].strip()
        if rid:
            seen.setdefault(rid, None)
    return list(seen)


@dataclass
class ChangeReport:
    added: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    repos_checked: int = 0
    repos_unchanged: int = 0
    repos_unreadable: int = 0  # the repo itself could not be read (its templates unknown, kept as they were)
    generated_at: str = ""
    endpoint: str = ""
    offline: bool = False
    cache: str = ""  # the hub cache an offline run reads

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def nothing_fetched(self) -> bool:
        """The run itself failed: every repo it tried was unreadable (hub down, all gated), or none was tried
        because discovery failed."""
        return (self.repos_checked > 0 and self.repos_unreadable == self.repos_checked) or (
            self.repos_checked == 0 and bool(self.failed))

    def why_nothing_fetched(self) -> str:
        """One line on why no repo could be read: the unreachable hub's own line when that is why; offline, that
        nothing was in the hub cache (huggingface_hub's HF_HUB_OFFLINE reads the cache and nothing else: a fresh
        clone's manifest records no hub state to stand in for it)."""
        down = next((f for f in self.failed if f.get("kind") == "unreachable"), None)
        if down is not None:
            return str(down["message"])
        if self.offline and self.failed and all(f.get("kind") == "offline" for f in self.failed):
            return (f"offline mode (HF_HUB_OFFLINE=1) and none of the {self.repos_checked} repos is in the hub cache "
                    f"({self.cache or 'HF_HUB_CACHE'}): nothing fetched, the corpus unchanged; run once without "
                    "HF_HUB_OFFLINE (or against a local hub, HF_ENDPOINT) to fill the cache")
        return "no repo could be read (see the report's failures)"

    def to_json(self) -> dict[str, Any]:
        return {
            "generated_at": self.generated_at, "endpoint": self.endpoint, "offline": self.offline,
            "repos_checked": self.repos_checked, "repos_unchanged": self.repos_unchanged,
            "repos_unreadable": self.repos_unreadable,
            "summary": {"added": len(self.added), "changed": len(self.changed), "removed": len(self.removed),
                        "failed": len(self.failed)},
            "added": self.added, "changed": self.changed, "removed": self.removed, "failed": self.failed,
        }

    def to_markdown(self) -> str:
        out = [
            "# Corpus refresh report", "",
            f"Generated {self.generated_at} from {self.endpoint}{' (offline, from the cache)' if self.offline else ''}:"
            f" {self.repos_checked} repos checked, {self.repos_unchanged} unchanged.", "",
            "| added | changed | removed | failed |", "|---|---|---|---|",
            f"| {len(self.added)} | {len(self.changed)} | {len(self.removed)} | {len(self.failed)} |", "",
        ]
        if self.added:
            out += ["## Added", ""] + [f"- `{a['origin']}` → `{a['name']}` ({a['source_file']})" for a in self.added]
            out.append("")
        if self.changed:
            out += ["## Changed", ""]
            for c in self.changed:
                fence = "~~~~" if "~~~" in c["diff"] else "~~~"
                out += [f"### `{c['origin']}` → `{c['name']}`", "", f"{fence}diff", c["diff"].rstrip("\n"), fence, ""]
        if self.removed:
            out += ["## Removed", ""] + [f"- `{r['origin']}` (was `{r['old_name']}`)" for r in self.removed]
            out.append("")
        out += failed_table(self.failed)
        return "\n".join(out)

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        return write_report(out_dir, (REPORT_JSON, self.to_json()), (REPORT_MD, self.to_markdown()))


def markdown_cell(text: str) -> str:
    """Text for one cell of a Markdown table: its pipes escaped, on one line."""
    return text.replace("|", "\\|").replace("\n", " ")


def failed_table(failed: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report section on the repos that could not be read (none: no section)."""
    if not failed:
        return []
    rows = [f"| {f['repo_id']} | {f['file'] or ''} | {f['kind']} | {markdown_cell(str(f['message']))} |"
            for f in failed]
    return ["## Failed", "", "| repo | file | kind | message |", "|---|---|---|---|", *rows, ""]


def write_report(out_dir: Path, as_json: tuple[str, Any], as_markdown: tuple[str, str]) -> tuple[Path, Path]:
    """A report as JSON and as Markdown in `out_dir` (made if missing), each file written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jp, mp = out_dir / as_json[0], out_dir / as_markdown[0]
    atomic_write_bytes(jp, (json.dumps(as_json[1], indent=1, ensure_ascii=False) + "\n").encode())
    atomic_write_bytes(mp, as_markdown[1].encode())
    return jp, mp


class CorpusUpdater:
    """Applies RepoFetch results to a corpus directory, one crash-safe commit per repo."""

    def __init__(self, root: Path, snapshots: Path | None = None) -> None:
        self.root = root
        self.snapshots = snapshots
        # (no directory is made here: a run that reads no repo must leave the checkout as it found it)
        self.manifest = Manifest.read_or_empty(root)
        self.journal_path = root / JOURNAL_NAME
        self.journal: dict[str, dict[str, Any]] = self._read_journal()
        self.failures: list[Failure] = []
        self.checked = 0
        self.unchanged = 0
        self.unreadable = 0
        self.failures_pending = False  # the manifest's failures changed and are not on disk yet

    def _read_journal(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self.journal_path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as e:
            raise CorpusError(f"{self.journal_path}: unreadable refresh journal ({e}); delete it to start over") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("origins"), dict):
            raise CorpusError(f"{self.journal_path}: not a refresh journal; delete it to start over")
        return {str(k): v for k, v in raw["origins"].items() if isinstance(v, dict)}

    def skip_revision(self, repo_id: str) -> str | None:
        """The revision at which re-fetching is pointless: recorded, and no failure pending for the repo."""
        rec = self.manifest.repos.get(repo_id)
        if rec is None or any(f.repo_id == repo_id for f in self.manifest.failures):
            return None
        return rec.revision

    # -- applying one repo ----------------------------------------------------------------------------------

    def apply(self, fetch: RepoFetch) -> None:
        self.checked += 1
        self.failures.extend(fetch.failures)
        m = self.manifest
        repo = fetch.repo_id
        old_failures = [f for f in m.failures if f.repo_id == repo]
        if fetch.unchanged:
            self.unchanged += 1
            return
        if fetch.revision is None:  # the repo itself failed: keep what we had, record why (written by flush)
            self.unreadable += 1
            if old_failures != fetch.failures:
                m.failures = [f for f in m.failures if f.repo_id != repo] + list(fetch.failures)
                self.failures_pending = True
            return
        old_rec = m.repos.get(repo)
        old_t: dict[str, dict[str, Any]] = dict(old_rec.templates) if old_rec else {}
        failed_files = {f.file for f in fetch.failures if f.file}
        new_t: dict[str, dict[str, Any]] = {}
        data_by_sha: dict[str, bytes] = {}
        for x in fetch.templates:
            digest = sha256_hex(x.data)
            new_t[x.template_name] = {"sha256": digest, "source_file": x.source_file, "source_key": x.source_key}
            data_by_sha[digest] = x.data
        for tname, rec in old_t.items():  # a file we could not read this time says nothing about its templates
            if tname not in new_t and rec.get("source_file") in failed_files:
                new_t[tname] = rec
        moved = {t for t in set(old_t) | set(new_t)
                 if old_t.get(t, {}).get("sha256") != new_t.get(t, {}).get("sha256")}
        now = _now()
        self._journal(repo, moved, old_t)

        by_sha = m.by_sha()
        dropped: dict[str, ManifestEntry] = {}
        for tname in sorted(moved):
            old_sha = old_t.get(tname, {}).get("sha256")
            entry = by_sha.get(old_sha) if old_sha else None
            if entry is not None:
                origin = hub_origin(repo, tname)
                entry.origins = [o for o in entry.origins if o != origin]
                if not entry.origins:
                    dropped[entry.sha256] = entry
        if dropped:
            m.templates = [e for e in m.templates if e.sha256 not in dropped]

        created: list[tuple[ManifestEntry, bytes]] = []
        for tname in sorted(moved):
            found = new_t.get(tname)
            if found is None:
                continue
            digest = found["sha256"]
            entry = next((e for e in m.templates if e.sha256 == digest), None)
            if entry is None and digest in dropped:  # two templates swapped texts: revive the old file
                entry = dropped.pop(digest)
                entry.origins = []
                m.templates.append(entry)
            if entry is None:
                entry = self._new_entry(repo, tname, digest, len(data_by_sha[digest]))
                created.append((entry, data_by_sha[digest]))
                m.templates.append(entry)
            if hub_origin(repo, tname) not in entry.origins:  # a resumed run may have published it already
                entry.origins.append(hub_origin(repo, tname))
            self._attribute(entry, repo, fetch.revision, found, now)
        for tname, rec in new_t.items():  # same text at a new revision: record where it now lives
            if tname not in moved:
                for e in m.templates:
                    if e.sha256 == rec["sha256"] and e.repo_id == repo and e.revision != fetch.revision:
                        e.revision = fetch.revision
                        e.fetched_at = now

        dropped_paths = {(self.root / e.file) for e in dropped.values()}
        created_paths = {self.root / e.file for e, _ in created}
        if dropped_paths & created_paths:
            # the old file is about to be overwritten: first publish a manifest that no longer names it
            m.templates = [e for e in m.templates if all(e is not c for c, _ in created)]
            m.write(self.root)
            m.templates.extend(e for e, _ in created)
        for entry, data in created:
            atomic_write_bytes(self.root / entry.file, data)

        fresh = old_rec is None or old_rec.revision != fetch.revision or bool(moved)
        m.repos[repo] = RepoRecord(revision=fetch.revision, files=list(fetch.files),
                                   fetched_at=now if fresh or old_rec is None else old_rec.fetched_at,
                                   templates=new_t)
        m.failures = [f for f in m.failures if f.repo_id != repo] + list(fetch.failures)
        m.write(self.root)
        self.failures_pending = False
        named = {self.root / e.file for e in m.templates}
        for path in dropped_paths - named:
            path.unlink(missing_ok=True)

    def flush(self) -> None:
        """Write the failures recorded since the manifest was last written (a run that read some repo)."""
        if self.failures_pending:
            self.manifest.write(self.root)
            self.failures_pending = False

    def _new_entry(self, repo: str, tname: str, digest: str, size: int) -> ManifestEntry:
        name = self.manifest.unique_name(entry_name(repo, tname))
        path = safe_template_path(self.root, name)
        return ManifestEntry(name=name, file=f"{TEMPLATES_DIR}/{path.name}", sha256=digest, size=size,
                             licence_note=f"licence of the model repository {repo}")

    @staticmethod
    def _attribute(entry: ManifestEntry, repo: str, revision: str, rec: dict[str, Any], now: str) -> None:
        if entry.repo_id in (None, repo):
            entry.repo_id = repo
            entry.revision = revision
            entry.source_file = rec.get("source_file")
            entry.source_key = rec.get("source_key")
            entry.fetched_at = now
        elif repo not in entry.shared_with:
            entry.shared_with.append(repo)

    def _journal(self, repo: str, moved: Iterable[str], old_t: dict[str, dict[str, Any]]) -> None:
        """Save the pre-run state of every origin about to change (first record wins across resumed runs)."""
        changed = False
        by_sha = self.manifest.by_sha()
        for tname in moved:
            origin = hub_origin(repo, tname)
            if origin in self.journal:
                continue
            old = old_t.get(tname)
            entry = by_sha.get(old["sha256"]) if old else None
            text = (self.root / entry.file).read_bytes().decode("utf-8", "surrogateescape") if entry else None
            self.journal[origin] = {
                "repo_id": repo, "template": tname, "sha256": old["sha256"] if old else None,
                "name": entry.name if entry else None, "text": text,
            }
            if self.snapshots is not None and entry is not None:
                self.journal[origin]["snapshot"] = read_snapshot_folder(self.snapshots, entry.name)
            changed = True
        if changed:
            data = json.dumps({"version": 1, "origins": self.journal}, indent=1, ensure_ascii=False).encode()
            atomic_write_bytes(self.journal_path, data)

    # -- report ---------------------------------------------------------------------------------------------

    def report(self, endpoint: str, offline: bool, cache: str = "") -> ChangeReport:
        r = ChangeReport(generated_at=_now(), endpoint=endpoint, offline=offline, cache=cache,
                         repos_checked=self.checked,
                         repos_unchanged=self.unchanged, repos_unreadable=self.unreadable,
                         failed=[f.to_json() for f in sorted(self.failures, key=lambda f: (f.repo_id, f.file or ""))])
        by_origin = {o: e for e in self.manifest.templates for o in e.origins}
        for origin in sorted(self.journal):
            old = self.journal[origin]
            new = by_origin.get(origin)
            rec = self.manifest.repos.get(str(old["repo_id"]))
            src = rec.templates.get(str(old["template"]), {}) if rec else {}
            base = {"origin": origin, "repo_id": old["repo_id"], "template": old["template"]}
            if old["sha256"] is None and new is not None:
                r.added.append({**base, "name": new.name, "sha256": new.sha256,
                                "source_file": src.get("source_file"), "source_key": src.get("source_key")})
            elif old["sha256"] is not None and new is None:
                r.removed.append({**base, "old_name": old["name"], "old_sha256": old["sha256"]})
            elif new is not None and old["sha256"] != new.sha256:
                new_text = (self.root / new.file).read_bytes().decode("utf-8", "surrogateescape")
                diff = "".join(difflib.unified_diff(
                    str(old["text"] or "").splitlines(keepends=True), new_text.splitlines(keepends=True),
                    fromfile=f"a/{old['name']}.jinja", tofile=f"b/{new.name}.jinja"))
                r.changed.append({**base, "old_name": old["name"], "name": new.name, "old_sha256": old["sha256"],
                                  "sha256": new.sha256, "source_file": src.get("source_file"), "diff": diff})
        return r

    def close_journal(self) -> None:
        """The report is safely written: sweep what interrupted commits left behind, then drop the journal.

        Only runs that changed something (or resumed one that did) have a journal, so an unchanged refresh
        still touches nothing. Files the manifest does not name are invisible to the loader; removing them
        keeps templates/ equal to the manifest.
        """
        if not self.journal_path.exists():
            return
        named = {Path(e.file).name for e in self.manifest.templates}
        templates = self.root / TEMPLATES_DIR
        for path in templates.iterdir() if templates.is_dir() else ():
            stray = path.suffix == ".jinja" and path.name not in named
            leftover = path.name.startswith(".") and path.name.endswith(".tmp")
            if path.is_file() and (stray or leftover):
                path.unlink(missing_ok=True)
        self.journal_path.unlink(missing_ok=True)


def refresh(
    corpus: Path,
    repo_ids: Sequence[str],
    fetcher: HubFetcher,
    report_dir: Path | None = None,
    *,
    discover: int = 0,
    progress: bool | None = None,
    snapshots: Path | None = None,
    then: Callable[[ChangeReport, CorpusUpdater], None] | None = None,
    jobs: int = 1,
) -> ChangeReport:
    """Refresh `corpus` from the hub for `repo_ids` (+ the `discover` most downloaded text-generation models),
    fetching up to `jobs` repos at once and applying them in the order of `repo_ids` (HubFetcher.fetch_many);
    `progress` (default: when stderr is a terminal) shows a bar on stderr.

    `then(report, updater)` runs once the corpus is updated and before the journal goes (the nightly job's
    behaviour diff): if it is killed, the next run reports the same changes again. When the run failed
    (`report.nothing_fetched`) it runs too, and must write nothing but its report: the journal stays, corpus/ is
    untouched (see the module docstring). `snapshots` makes the journal keep the old snapshot files of every
    changed template."""
    updater = CorpusUpdater(corpus, snapshots)
    ids = list(dict.fromkeys(repo_ids))
    if discover > 0:
        try:
            ids += [i for i in fetcher.discover(discover) if i not in ids]
        except CorpusError as e:
            updater.failures.append(Failure("<discovery>", getattr(e, "kind", "error"), str(e)))
    show = sys.stderr.isatty() if progress is None else progress
    bar: Any = None
    if show:
        import importlib

        # tqdm ships no type information; it is only a progress display, on stderr (stdout is the summary)
        bar = importlib.import_module("tqdm").tqdm(total=len(ids), desc="corpus refresh", unit="repo",
                                                   file=sys.stderr)
    # each repo's record is read before any is applied: applying a repo changes only its own record
    wanted = [(i, updater.manifest.repos.get(i), updater.skip_revision(i)) for i in ids]
    try:
        try:
            for fetched in fetcher.fetch_many(wanted, jobs=jobs,
                                              progress=(lambda done, _n: bar.update(done - bar.n)) if bar else None):
                updater.apply(fetched)
        finally:
            if bar is not None:
                bar.close()
        report = updater.report(fetcher.endpoint, fetcher.offline, fetcher.cache_path)
        failed = report.nothing_fetched
        if not failed:
            updater.flush()
        if then is not None:
            then(report, updater)
        if report_dir is not None:
            report.write(report_dir)
        if not failed:
            updater.close_journal()
    except OSError as e:
        # stop at once: the in-memory manifest may be ahead of the disk, and the disk is the consistent one
        raise CorpusError(f"cannot update {corpus}: {e.strerror or e}; re-run to resume") from e
    return report
