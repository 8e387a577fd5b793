"""corpus/manifest.json: the record of every template file, plus safe names and atomic writes.

The manifest is the single source of truth: a template file that it does not name does not exist for the
loader. Writers therefore put template files in place first and the manifest last, so a process killed at any
point leaves a manifest that only names files whose bytes match its sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from autoparser.errors import CorpusError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "TEMPLATES_DIR",
    "Failure",
    "Manifest",
    "ManifestEntry",
    "RepoRecord",
    "atomic_write_bytes",
    "entry_name",
    "safe_template_path",
    "sanitize_component",
    "sha256_hex",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
TEMPLATES_DIR = "templates"
_MAX_COMPONENT = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sanitize_component(text: str) -> str:
    """One file-name component from untrusted text (repo id part, template name).

    Only [A-Za-z0-9._-] survive; runs of anything else (slashes, backslashes, NUL, spaces) become one `_`.
    Leading dots are dropped so nothing becomes hidden or `..`, and `..` inside is broken up so no reader
    mistakes it for a parent reference. Overlong names keep a hash suffix so they stay unique.
    """
    out = _UNSAFE.sub("_", text)
    out = out.replace("..", "_")
    out = out.lstrip(".-")
    if not out:
        out = "_"
    if len(out) > _MAX_COMPONENT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        out = f"{out[:_MAX_COMPONENT - 13]}-{digest}"
    return out


def entry_name(repo_id: str, template_name: str | None = None) -> str:
    """`<org>__<model>[__<name>]` for a hub repo id and an optional named template (tool_use, rag, ...)."""
    org, sep, model = repo_id.partition("/")
    parts = [sanitize_component(org), sanitize_component(model)] if sep else [sanitize_component(repo_id)]
    if template_name and template_name != "default":
        parts.append(sanitize_component(template_name))
    return "__".join(parts)


def safe_template_path(root: Path, name: str) -> Path:
    """The file of template `name` under root/templates, refusing anything that would land elsewhere."""
    if sanitize_component(name) != name:
        raise CorpusError(f"unsafe template name {name!r}")
    base = (root / TEMPLATES_DIR).resolve()
    path = (base / f"{name}.jinja").resolve()
    if path.parent != base:
        raise CorpusError(f"template name {name!r} escapes {base}")
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a hidden temp file in the same directory and os.replace, so readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; corpus files are ordinary committed data
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class ManifestEntry:
    """One template file. Mutable while a writer builds the manifest; the loader exposes a frozen view."""

    name: str
    file: str
    sha256: str
    size: int
    repo_id: str | None = None
    revision: str | None = None
    source_file: str | None = None
    source_key: str | None = None
    fetched_at: str | None = None
    origins: list[str] = field(default_factory=list)
    shared_with: list[str] = field(default_factory=list)
    licence_note: str | None = None
    model_hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "sha256": self.sha256,
            "size": self.size,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "source_file": self.source_file,
            "source_key": self.source_key,
            "fetched_at": self.fetched_at,
            "origins": list(self.origins),
            "shared_with": sorted(set(self.shared_with)),
            "licence_note": self.licence_note,
            "model_hint": self.model_hint,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ManifestEntry:
        try:
            return _read_record(cls, raw, {
                "name": _str, "file": _str, "sha256": _str, "size": _int, "repo_id": _opt_str, "revision": _opt_str,
                "source_file": _opt_str, "source_key": _opt_str, "fetched_at": _opt_str, "origins": _str_list,
                "shared_with": _str_list, "licence_note": _opt_str, "model_hint": _opt_str})
        except KeyError as e:
            raise CorpusError(f"manifest entry lacks {e.args[0]!r}: {dict(raw)!r:.200}") from None


@dataclass(frozen=True)
class Failure:
    """Something the fetcher could not get: kind is gated | missing_repo | missing_file | no_template |
    rate_limited | server_error | truncated | malformed | oversize | offline | network | unreachable (no
    connection to the hub could be opened: the run stopped asking) | error."""

    repo_id: str
    kind: str
    message: str
    file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "kind": self.kind, "file": self.file, "message": self.message}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Failure:
        try:
            return _read_record(cls, raw, {"repo_id": _str, "kind": _str, "message": _str, "file": _opt_str})
        except KeyError as e:
            raise CorpusError(f"manifest failure lacks {e.args[0]!r}") from None


@dataclass
class RepoRecord:
    """What the last successful fetch of a hub repo saw: its commit and which template files it had.

    The hub keeps no metadata in its cache, so offline refreshes replay downloads from this record.
    """

    revision: str
    files: list[str] = field(default_factory=list)
    fetched_at: str | None = None
    # template name -> {"sha256", "source_file", "source_key"}: what each hub origin pointed at
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "files": sorted(self.files),
            "fetched_at": self.fetched_at,
            "templates": {
                k: {"sha256": v.get("sha256"), "source_file": v.get("source_file"), "source_key": v.get("source_key")}
                for k, v in sorted(self.templates.items())
            },
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RepoRecord:
        try:
            return _read_record(cls, raw, {"revision": _str, "files": _str_list, "fetched_at": _opt_str,
                                           "templates": _templates_map})
        except KeyError as e:
            raise CorpusError(f"manifest repo record lacks {e.args[0]!r}") from None


@dataclass
class Manifest:
    templates: list[ManifestEntry] = field(default_factory=list)
    repos: dict[str, RepoRecord] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    # -- reading --------------------------------------------------------------------------------------------

    @classmethod
    def read(cls, root: Path) -> Manifest:
        path = root / MANIFEST_NAME
        try:
            raw = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise CorpusError(f"no {MANIFEST_NAME} in {root}") from None
        except OSError as e:
            raise CorpusError(f"cannot read {path}: {e.strerror or e}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorpusError(f"{path}: invalid JSON: {e}") from None
        return cls.from_json(raw, where=str(path))

    @classmethod
    def read_or_empty(cls, root: Path) -> Manifest:
        return cls.read(root) if (root / MANIFEST_NAME).exists() else cls()

    @classmethod
    def from_json(cls, raw: Any, where: str = MANIFEST_NAME) -> Manifest:
        if not isinstance(raw, dict):
            raise CorpusError(f"{where}: top level is not an object")
        if raw.get("version") != MANIFEST_VERSION:
            raise CorpusError(f"{where}: unsupported manifest version {raw.get('version')!r}")
        templates = raw.get("templates", [])
        failures = raw.get("failures", [])
        repos = raw.get("repos", {})
        if not isinstance(templates, list) or not isinstance(failures, list) or not isinstance(repos, dict):
            raise CorpusError(f"{where}: templates/failures must be lists and repos an object")
        for item in [*templates, *failures, *repos.values()]:
            if not isinstance(item, dict):
                raise CorpusError(f"{where}: manifest records must be objects, got {item!r:.80}")
        m = cls(
            templates=[ManifestEntry.from_json(t) for t in templates],
            repos={str(k): RepoRecord.from_json(v) for k, v in repos.items()},
            failures=[Failure.from_json(f) for f in failures],
        )
        seen: set[str] = set()
        for e in m.templates:
            if e.name in seen:
                raise CorpusError(f"{where}: duplicate template name {e.name!r}")
            seen.add(e.name)
        return m

    # -- writing --------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "templates": [e.to_json() for e in sorted(self.templates, key=lambda e: e.name)],
            "repos": {k: self.repos[k].to_json() for k in sorted(self.repos)},
            "failures": [
                f.to_json() for f in sorted(self.failures, key=lambda f: (f.repo_id, f.file or "", f.kind))
            ],
        }

    def dumps(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n").encode("utf-8")

    def write(self, root: Path) -> bool:
        """Write manifest.json atomically; returns False (and writes nothing) when the bytes are unchanged."""
        data = self.dumps()
        path = root / MANIFEST_NAME
        try:
            if path.read_bytes() == data:
                return False
        except OSError:
            pass
        atomic_write_bytes(path, data)
        return True

    # -- lookups --------------------------------------------------------------------------------------------

    def by_name(self) -> dict[str, ManifestEntry]:
        return {e.name: e for e in self.templates}

    def by_sha(self) -> dict[str, ManifestEntry]:
        return {e.sha256: e for e in self.templates}

    def names(self) -> set[str]:
        return {e.name for e in self.templates}

    def unique_name(self, base: str, taken: Iterable[str] | None = None) -> str:
        used = set(taken) if taken is not None else self.names()
        if base not in used:
            return base
        n = 2
        while f"{base}__{n}" in used:
            n += 1
        return f"{base}__{n}"


_D = TypeVar("_D", bound="DataclassInstance")


def _read_record(cls: type[_D], raw: Mapping[str, Any], readers: Mapping[str, Callable[[Any, str], Any]]) -> _D:
    """A manifest record from its JSON object: each field, in declaration order, read under its own name by its
    reader (which checks the value's type); a field left out takes its default. KeyError names a required
    field that is left out (each caller says which record lacks it)."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in raw:
            values[f.name] = readers[f.name](raw[f.name], f.name)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise KeyError(f.name)
    return cls(**values)


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise CorpusError(f"manifest field {what!r} must be a string, got {v!r:.80}")
    return v


def _opt_str(v: Any, what: str) -> str | None:
    return None if v is None else _str(v, what)


def _int(v: Any, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise CorpusError(f"manifest field {what!r} must be an integer, got {v!r:.80}")
    return v


def _str_list(v: Any, what: str) -> list[str]:
    if not isinstance(v, list):
        raise CorpusError(f"manifest field {what!r} must be a list")
    return [_str(x, what) for x in v]


def _templates_map(v: Any, what: str) -> dict[str, dict[str, Any]]:
    if not isinstance(v, dict):
        raise CorpusError(f"manifest repo record {what!r} must be an object")
    out: dict[str, dict[str, Any]] = {}
    for k, rec in v.items():
        if not isinstance(rec, dict) or not isinstance(rec.get("sha256"), str):
            raise CorpusError(f"manifest repo record template {k!r} lacks a sha256")
        out[str(k)] = {"sha256": rec["sha256"], "source_file": _opt_str(rec.get("source_file"), "source_file"),
                       "source_key": _opt_str(rec.get("source_key"), "source_key")}
    return out
