"""The hub fetcher and the refresh job against a real local HTTP server (no internet).

huggingface_hub reads HF_* at import: telemetry is switched off before the import here (tox also sets it), and
the constants are patched per test as well, in case another test module imported the library first.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants as hf_constants
import pytest
from deadhub import DeadHub

import autoparser.corpus.manifest as manifest_mod
import autoparser.corpus.refresh as refresh_mod
from autoparser.cli import main as cli_main
from autoparser.corpus import Corpus
from autoparser.corpus.fakehub import FakeHub, FakeRepo
from autoparser.corpus.fetcher import HubFetcher, extract_templates
from autoparser.corpus.manifest import Manifest, entry_name, safe_template_path, sanitize_component, sha256_hex
from autoparser.corpus.refresh import JOURNAL_NAME, ChangeReport, refresh
from autoparser.errors import CorpusError, HubError
from autoparser.template.gguf import read_gguf_header

ALPHA_DEFAULT = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
ALPHA_TOOLS = "{%- if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
ALPHA_JINJA = "{# from chat_template.jinja #}\n{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
BETA = "<s>{% for m in messages %}{{ m.content }}</s>{% endfor %}\r\n"
GAMMA = "{{ messages[0].content }}"
GAMMA_RAG = "{% for d in documents %}{{ d.text }}{% endfor %}"


def tokenizer_config(template: Any) -> bytes:
    return json.dumps({"bos_token": "<s>", "chat_template": template}).encode()


def fixture_repos() -> dict[str, FakeRepo]:
    return {
        "org/alpha": FakeRepo({
            "config.json": b"{}",
            "tokenizer_config.json": tokenizer_config([{"name": "default", "template": ALPHA_DEFAULT},
                                                       {"name": "tool_use", "template": ALPHA_TOOLS}]),
            "chat_template.jinja": ALPHA_JINJA.encode(),
        }, downloads=50),
        "org/beta": FakeRepo({"chat_template.jinja": BETA.encode()}, lfs=frozenset({"chat_template.jinja"}),
                             downloads=90),
        "org/gamma": FakeRepo({
            "chat_template.json": json.dumps({"chat_template": GAMMA}).encode(),
            "additional_chat_templates/rag.jinja": GAMMA_RAG.encode(),
        }, downloads=10),
        "org/gated": FakeRepo({"tokenizer_config.json": tokenizer_config(GAMMA + " gated")}, gated=True),
        "org/ghost": FakeRepo({"chat_template.jinja": b"{{ 'ghost' }}"},
                              ghosts=frozenset({"tokenizer_config.json"})),
        "org/malformed": FakeRepo({"tokenizer_config.json": b'{"chat_template": "{{ messages'}),
        "org/base": FakeRepo({"config.json": b"{}"}),
    }


GOOD = ["org/alpha", "org/beta", "org/gamma"]


@pytest.fixture
def hub(hf_isolated: Path) -> Iterator[FakeHub]:  # (hf_isolated: tests/corpus/conftest.py)
    with FakeHub(fixture_repos()) as h:
        yield h


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_fetcher(hub: FakeHub, tmp_path: Path, sleeps: list[float]) -> Callable[..., HubFetcher]:
    def make(**kw: Any) -> HubFetcher:
        args: dict[str, Any] = {"endpoint": hub.url, "cache_dir": tmp_path / "hf-cache", "offline": False,
                                "sleep": sleeps.append}
        args.update(kw)
        return HubFetcher(**args)

    return make


def run(corpus: Path, ids: list[str], fetcher: HubFetcher, report: Path | None = None, **kw: Any) -> ChangeReport:
    return refresh(corpus, ids, fetcher, report, progress=False, **kw)


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size, p.stat().st_ino)
            for p in sorted(root.rglob("*"))}


def assert_consistent(root: Path) -> Corpus:
    corpus = Corpus.load(root)
    for e in corpus.entries:
        e.verify()
        assert e.path.resolve().parent == (root / "templates").resolve()
    return corpus


# -- unit: extraction and names -----------------------------------------------------------------------------


def test_extract_string_list_and_files() -> None:
    [one] = extract_templates("tokenizer_config.json", tokenizer_config("abc"))
    assert (one.template_name, one.source_key, one.data) == ("default", "chat_template", b"abc")
    two = extract_templates("tokenizer_config.json", tokenizer_config([{"name": "default", "template": "a"},
                                                                      {"name": "rag", "template": "b"}]))
    assert [(t.template_name, t.source_key, t.data) for t in two] == [
        ("default", "chat_template[default]", b"a"), ("rag", "chat_template[rag]", b"b")]
    assert extract_templates("tokenizer_config.json", b'{"eos_token": "x"}') == []
    [j] = extract_templates("chat_template.json", json.dumps({"chat_template": "é"}).encode())
    assert j.data == "é".encode()
    [r] = extract_templates("additional_chat_templates/rag.jinja", b"x\r\n")
    assert (r.template_name, r.data) == ("rag", b"x\r\n")


@pytest.mark.parametrize(("data", "match"), [
    (b'{"chat_template": "{{ x', "invalid or truncated JSON"),
    (b"[1, 2]", "not an object"),
    (b'{"chat_template": 3}', "not a string or list"),
    (b'{"chat_template": [{"name": "a"}]}', "name, template"),
    (b"\xff\xfe{}", "not valid UTF-8"),
    (b"[" * 100000 + b"]" * 100000, "JSON"),
])
def test_extract_rejects_malformed(data: bytes, match: str) -> None:
    with pytest.raises(HubError, match=match) as info:
        extract_templates("tokenizer_config.json", data)
    assert info.value.kind == "malformed"


@pytest.mark.parametrize(("repo_id", "template", "expected"), [
    ("org/model", None, "org__model"),
    ("org/model", "tool_use", "org__model__tool_use"),
    ("gpt2", None, "gpt2"),
    ("../../etc", None, "_____etc"),
    ("org/../../etc/passwd", "../../x", "org______etc_passwd______x"),
    ("a/b\\c", "n/a\x00b", "a__b_c__n_a_b"),
    (".hidden/..", "..", "hidden______"),
])
def test_entry_names_are_safe(repo_id: str, template: str | None, expected: str) -> None:
    name = entry_name(repo_id, template)
    assert name == expected
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name)
    assert "/" not in name and ".." not in name


def test_safe_template_path_refuses_escapes(tmp_path: Path) -> None:
    assert safe_template_path(tmp_path, "org__m").parent == (tmp_path / "templates").resolve()
    for bad in ("../x", "a/b", ".hidden", "", "..", "x\x00"):
        with pytest.raises(CorpusError):
            safe_template_path(tmp_path, bad)
    assert sanitize_component("x" * 500) != sanitize_component("x" * 499)
    assert len(sanitize_component("x" * 500)) <= 120


# -- first fetch, unchanged re-fetch, changed revision ------------------------------------------------------


def test_first_fetch(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    report = run(corpus, GOOD, make_fetcher(), tmp_path / "reports")
    assert report.ok and not report.changed and not report.removed
    added = {a["origin"]: a["name"] for a in report.added}
    assert added == {
        "hub:org/alpha#default": "org__alpha",  # chat_template.jinja wins over tokenizer_config's default
        "hub:org/alpha#tokenizer_config": "org__alpha__tokenizer_config",
        "hub:org/alpha#tool_use": "org__alpha__tool_use",
        "hub:org/beta#default": "org__beta",
        "hub:org/gamma#default": "org__gamma",
        "hub:org/gamma#rag": "org__gamma__rag",
    }
    c = assert_consistent(corpus)
    assert c.by_name("org__alpha").read_text() == ALPHA_JINJA
    assert c.by_name("org__alpha__tokenizer_config").read_text() == ALPHA_DEFAULT
    assert c.by_name("org__beta").read_bytes() == BETA.encode()  # CRLF kept; came through the CDN redirect
    alpha = c.by_name("org__alpha__tool_use")
    assert alpha.repo_id == "org/alpha" and alpha.revision == hub.repos["org/alpha"].sha
    assert (alpha.source_file, alpha.source_key) == ("tokenizer_config.json", "chat_template[tool_use]")
    assert alpha.fetched_at and alpha.origins == ("hub:org/alpha#tool_use",)
    m = Manifest.read(corpus)
    assert m.repos["org/gamma"].files == ["additional_chat_templates/rag.jinja", "chat_template.json"]
    assert not (corpus / JOURNAL_NAME).exists()
    saved = json.loads((tmp_path / "reports" / "corpus-change-report.json").read_text())
    assert saved["summary"] == {"added": 6, "changed": 0, "removed": 0, "failed": 0}
    assert "| 6 | 0 | 0 | 0 |" in (tmp_path / "reports" / "corpus-change-report.md").read_text()
    assert not any(p.rsplit("/", 1)[-1] == "config.json" for p in hub.paths())  # only template files fetched


def test_unchanged_refetch_writes_nothing(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                          tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    run(corpus, GOOD, make_fetcher())
    before = snapshot(corpus)
    hub.requests.clear()
    report = run(corpus, GOOD, make_fetcher())
    assert report.ok and not (report.added or report.changed or report.removed)
    assert report.repos_unchanged == 3
    assert snapshot(corpus) == before
    assert all(p.startswith("/api/models/") for p in hub.paths()), hub.paths()  # model info only


def test_changed_revision_reports_diff(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                       tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    run(corpus, GOOD, make_fetcher())
    old_file = Corpus.load(corpus).by_name("org__alpha__tool_use").path
    alpha = hub.repos["org/alpha"]
    new_jinja = ALPHA_JINJA.replace("[{{ m.role }}]", "<{{ m.role }}>")
    alpha.commit({"tokenizer_config.json": tokenizer_config(ALPHA_DEFAULT),  # tool_use gone
                  "chat_template.jinja": new_jinja.encode()})
    gamma = hub.repos["org/gamma"]
    gamma.commit({**gamma.files, "additional_chat_templates/tool_use.jinja": b"{{ tools }}"})
    report = run(corpus, GOOD, make_fetcher(), tmp_path / "reports")
    assert report.ok
    [changed] = report.changed
    assert changed["origin"] == "hub:org/alpha#default" and changed["name"] == "org__alpha"
    assert "-{% for m in messages %}[{{ m.role }}] {{ m.content }}" in changed["diff"]
    assert "+{% for m in messages %}<{{ m.role }}> {{ m.content }}" in changed["diff"]
    assert changed["diff"].startswith("--- a/org__alpha.jinja\n+++ b/org__alpha.jinja\n")
    assert [r["origin"] for r in report.removed] == ["hub:org/alpha#tool_use"]
    assert [a["origin"] for a in report.added] == ["hub:org/gamma#tool_use"]
    c = assert_consistent(corpus)
    assert c.by_name("org__alpha").read_text() == new_jinja
    assert c.by_name("org__alpha").revision == alpha.sha
    assert not old_file.exists(), "a template no origin points at any more is deleted"
    assert c.by_name("org__gamma").revision == gamma.sha  # same text, new commit recorded
    md = (tmp_path / "reports" / "corpus-change-report.md").read_text()
    assert "## Changed" in md and "+{% for m in messages %}<{{ m.role }}>" in md and "## Removed" in md


def test_same_text_in_two_repos_is_one_file(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                            tmp_path: Path) -> None:
    hub.repos["org/beta-copy"] = FakeRepo({"tokenizer_config.json": tokenizer_config(BETA)})
    corpus = tmp_path / "corpus"
    run(corpus, ["org/beta", "org/beta-copy"], make_fetcher())
    [entry] = Corpus.load(corpus).entries
    assert entry.origins == ("hub:org/beta#default", "hub:org/beta-copy#default")
    assert entry.repo_id == "org/beta" and entry.shared_with == ("org/beta-copy",)


def test_fetched_text_equal_to_seed_joins_the_seed_entry(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                                         tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "templates").mkdir(parents=True)
    (corpus / "templates" / "llama.cpp__x.jinja").write_bytes(BETA.encode())
    m = Manifest(templates=[manifest_mod.ManifestEntry(
        name="llama.cpp__x", file="templates/llama.cpp__x.jinja", sha256=sha256_hex(BETA.encode()),
        size=len(BETA.encode()), origins=["seed:templates/x.jinja"])])
    m.write(corpus)
    run(corpus, ["org/beta"], make_fetcher())
    [entry] = Corpus.load(corpus).entries
    assert entry.name == "llama.cpp__x" and entry.repo_id == "org/beta"
    assert entry.origins == ("seed:templates/x.jinja", "hub:org/beta#default")


# -- failures -----------------------------------------------------------------------------------------------


def test_gated_401_403_then_token(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    report = run(corpus, ["org/gated"], make_fetcher())
    assert [(f["kind"], f["file"]) for f in report.failed] == [("gated", "tokenizer_config.json")]
    # the hub's bare "401 Client Error." says what it means and which variable changes it
    message = report.failed[0]["message"]
    assert "401" in message and "gated repo" in message and "needs authentication" in message
    assert "HF_TOKEN" in message and "\n" not in message
    report = run(corpus, ["org/gated"], make_fetcher(token="hf_wrong"))
    assert [f["kind"] for f in report.failed] == ["gated"] and "403" in report.failed[0]["message"]
    assert "has no access" in report.failed[0]["message"] and "HF_TOKEN" in report.failed[0]["message"]
    assert [f.kind for f in Manifest.read(corpus).failures] == ["gated"]
    report = run(corpus, ["org/gated"], make_fetcher(token="hf_good"))
    assert report.ok and [a["name"] for a in report.added] == ["org__gated"]
    assert Manifest.read(corpus).failures == []
    assert any({k.lower(): v for k, v in h.items()}.get("authorization") == "Bearer hf_good"
               for _, _, h in hub.requests)


def test_hf_token_from_environment(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert run(tmp_path / "corpus", ["org/gated"], make_fetcher()).ok


def test_hf_endpoint_from_environment(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url + "/")
    fetcher = HubFetcher(cache_dir=tmp_path / "hf-cache", offline=False)
    assert fetcher.endpoint == hub.url
    assert run(tmp_path / "corpus", ["org/beta"], fetcher).ok
    assert hub.paths()


def test_an_unreachable_hub_is_tried_once_and_named_in_one_line(dead_hub: DeadHub, hf_isolated: Path,
                                                                 tmp_path: Path, sleeps: list[float]) -> None:
    # nothing listens at the endpoint: the first connection fails, and the run asks nothing more of that hub
    fetcher = HubFetcher(endpoint=dead_hub.url, cache_dir=hf_isolated, offline=False, sleep=sleeps.append)
    report = run(tmp_path / "corpus", [*GOOD, "org/gated"], fetcher, discover=3)
    assert len(dead_hub.attempts) == 1 and sleeps == []
    assert {f["kind"] for f in report.failed} == {"unreachable"}
    assert [f["repo_id"] for f in report.failed] == ["<discovery>", "org/alpha", "org/beta", "org/gamma", "org/gated"]
    line = report.why_nothing_fetched()
    assert report.nothing_fetched and {f["message"] for f in report.failed} == {line}
    assert "\n" not in line and f"cannot reach the hub at {dead_hub.url}" in line and "Connection refused" in line
    assert "HF_ENDPOINT" in line and "HF_HUB_OFFLINE" in line
    assert not (tmp_path / "corpus").exists()  # a failed run makes nothing, not even the directory


def test_a_name_that_does_not_resolve_is_an_unreachable_hub(hf_isolated: Path, tmp_path: Path, sleeps: list[float],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # what a machine without network answers (no DNS query leaves this test: the resolver is the fake)
    lookups: list[str] = []

    def no_dns(host: str, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    fetcher = HubFetcher(endpoint="https://hub.invalid", cache_dir=hf_isolated, offline=False, sleep=sleeps.append)
    report = run(tmp_path / "corpus", GOOD, fetcher)
    assert lookups == ["hub.invalid"] and sleeps == []
    line = report.why_nothing_fetched()
    assert "cannot reach the hub at https://hub.invalid (" in line and "Name or service not known" in line
    assert "HF_ENDPOINT" in line and "HF_HUB_OFFLINE" in line


def test_persistent_failures_do_not_rewrite_the_manifest(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                                         tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    ids = ["org/beta", "org/gated", "org/nope", "org/ghost", "org/malformed"]
    first = run(corpus, ids, make_fetcher())
    before = snapshot(corpus)
    again = run(corpus, ids, make_fetcher())
    assert again.failed == first.failed and len(again.failed) == 4
    assert not (again.added or again.changed or again.removed)
    assert snapshot(corpus) == before


def test_missing_repo_and_missing_file(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                       tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    report = run(corpus, ["org/nope", "org/ghost", "org/base"], make_fetcher())
    kinds = {(f["repo_id"], f["kind"], f["file"]) for f in report.failed}
    assert kinds == {("org/nope", "missing_repo", None), ("org/ghost", "missing_file", "tokenizer_config.json"),
                     ("org/base", "no_template", None)}
    assert [a["origin"] for a in report.added] == ["hub:org/ghost#default"]  # the file that exists still counts
    m = Manifest.read(corpus)
    assert {(f.repo_id, f.kind) for f in m.failures} == {(r, k) for r, k, _ in kinds}
    assert_consistent(corpus)


def test_malformed_json_rejected_with_record(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                             tmp_path: Path) -> None:
    report = run(tmp_path / "corpus", ["org/malformed"], make_fetcher())
    [f] = report.failed
    assert (f["kind"], f["file"]) == ("malformed", "tokenizer_config.json")
    assert "invalid or truncated JSON" in f["message"]
    assert Corpus.load(tmp_path / "corpus").entries == ()


def test_429_then_success(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                          sleeps: list[float]) -> None:
    hub.inject(r"^/api/models/org/alpha$", 429, times=2, headers={"RateLimit": '"api";r=0;t=1', "Retry-After": "1"})
    hub.inject(r"^/org/beta/resolve/", 429, times=2, headers={"RateLimit": '"api";r=0;t=1'})
    hub.inject(r"^/api/models/org/gamma$", 503, times=1)
    report = run(tmp_path / "corpus", GOOD, make_fetcher())
    assert report.ok and len(report.added) == 6
    assert sleeps == [2.0, 4.0, 2.0]  # our backoff around model_info (the library does not retry it)
    assert hub.paths().count("/api/models/org/alpha?blobs=true") == 3


def test_persistent_5xx_is_a_bounded_failure(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                             tmp_path: Path, sleeps: list[float]) -> None:
    hub.inject(r"^/api/models/org/beta$", 502, times=100)
    report = run(tmp_path / "corpus", ["org/beta"], make_fetcher(max_attempts=3))
    assert [f["kind"] for f in report.failed] == ["server_error"]
    assert sleeps == [2.0, 4.0]


def test_body_cut_short(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                        caplog: pytest.LogCaptureFixture) -> None:
    corpus = tmp_path / "corpus"
    hub.inject(r"^/org/gamma/resolve/.*chat_template.json$", 200, times=1, truncate=True)
    report = run(corpus, ["org/gamma"], make_fetcher())
    assert report.ok  # one cut: the download is retried and the text is whole
    assert Corpus.load(corpus).by_name("org__gamma").read_text() == GAMMA
    gamma = hub.repos["org/gamma"]
    gamma.commit({**gamma.files, "chat_template.json": json.dumps({"chat_template": GAMMA + "!"}).encode()})
    hub.inject(r"^/org/gamma/resolve/.*chat_template.json$", 200, times=1000, truncate=True)
    report = run(corpus, ["org/gamma"], make_fetcher(max_attempts=2))
    assert [(f["kind"], f["file"]) for f in report.failed] == [("truncated", "chat_template.json")]
    c = assert_consistent(corpus)
    assert c.by_name("org__gamma").read_text() == GAMMA  # the old text stays; nothing half-written
    assert not report.changed and not report.removed


def test_oversize_refused_before_download(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                          tmp_path: Path) -> None:
    report = run(tmp_path / "corpus", ["org/alpha"], make_fetcher(max_template_bytes=20, max_config_bytes=30))
    over = {f["file"] for f in report.failed if f["kind"] == "oversize"}
    assert over == {"chat_template.jinja", "tokenizer_config.json"}
    assert not any("/resolve/" in p for p in hub.paths())


def test_oversize_checked_after_download(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the hub's size metadata is not trusted: a file larger than announced is refused once on disk
    hub.repos["org/big"] = FakeRepo({"chat_template.jinja": b"x" * 5000})
    fetcher = make_fetcher(max_template_bytes=4000)
    import huggingface_hub

    real = huggingface_hub.HfApi.model_info

    def lying_info(self: Any, *a: Any, **kw: Any) -> Any:
        info = real(self, *a, **kw)
        for s in info.siblings or []:
            s.size = 10
        return info

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lying_info)
    report = run(tmp_path / "corpus", ["org/big"], fetcher)
    assert [(f["kind"], f["file"]) for f in report.failed] == [("oversize", "chat_template.jinja")]


def test_malicious_names_stay_inside_corpus(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                            tmp_path: Path) -> None:
    hub.repos["org/evil"] = FakeRepo({
        "tokenizer_config.json": tokenizer_config([{"name": "../../../../etc/passwd", "template": "a"},
                                                   {"name": "..", "template": "b"},
                                                   {"name": "x/../../y", "template": "c"}]),
    })
    corpus = tmp_path / "work" / "corpus"
    report = run(corpus, ["org/evil", "../../etc", "org/../x"], make_fetcher())
    assert {f["repo_id"] for f in report.failed} == {"../../etc", "org/../x"}  # refused by the client
    outside = [p for p in (tmp_path / "work").rglob("*") if corpus not in p.parents and p != corpus]
    assert outside == []
    c = assert_consistent(corpus)
    assert sorted(e.name for e in c.entries) == ["org__evil___", "org__evil__________etc_passwd", "org__evil__x_____y"]
    assert all(e.path.parent == corpus / "templates" for e in c.entries)


# -- offline, discovery, CLI --------------------------------------------------------------------------------


def test_offline_from_cache(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    run(corpus, GOOD, make_fetcher())
    hub.requests.clear()
    hub.inject(r".", 500, times=10**6)  # any request now would fail loudly
    before = snapshot(corpus)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    fetcher = make_fetcher(offline=None)
    assert fetcher.offline
    report = run(corpus, [*GOOD, "org/never-fetched"], fetcher)
    assert hub.requests == []
    assert not (report.added or report.changed or report.removed)
    assert [(f["repo_id"], f["kind"]) for f in report.failed] == [("org/never-fetched", "offline")]
    assert [(f.repo_id, f.kind) for f in Manifest.read(corpus).failures] == [("org/never-fetched", "offline")]
    assert {k: v for k, v in snapshot(corpus).items() if k != "manifest.json"} == \
        {k: v for k, v in before.items() if k != "manifest.json"}  # templates untouched, only the record added
    # a corpus that lost a template file is rebuilt from the cache alone
    lost = Corpus.load(corpus).by_name("org__gamma__rag")
    m = Manifest.read(corpus)
    m.templates = [e for e in m.templates if e.name != lost.name]
    m.repos["org/gamma"].templates.pop("rag")
    m.write(corpus)
    lost.path.unlink()
    report = run(corpus, ["org/gamma"], make_fetcher(offline=True))
    assert [a["name"] for a in report.added] == ["org__gamma__rag"] and report.ok
    assert Corpus.load(corpus).by_name("org__gamma__rag").read_text() == GAMMA_RAG
    assert hub.requests == []


def test_jobs_fetch_repos_at_once_bounded_and_applied_in_order(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ids = [*GOOD, "org/gated", "org/ghost", "org/malformed", "org/base"]
    one_at_a_time = run(tmp_path / "one", ids, make_fetcher())

    # each model info waits (up to 5 s) until three are in flight: one worker at a time would never get there
    lock, three_in = threading.Lock(), threading.Event()
    active, peak = [0], [0]

    def on_request(method: str, raw: str) -> None:
        if not raw.startswith("/api/models/"):
            return
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] == 3:
                three_in.set()
        three_in.wait(5)
        if raw.startswith("/api/models/org/alpha"):  # the first repo answers after the others
            time.sleep(0.2)
        with lock:
            active[0] -= 1

    hub.on_request = on_request
    parallel = refresh(tmp_path / "three", ids, make_fetcher(), None, progress=True, jobs=3)
    assert three_in.is_set() and peak[0] == 3  # in parallel, and never more than --jobs at once
    # the same corpus and report as one at a time: results are applied in the order of the ids
    assert _strip_times(Manifest.read(tmp_path / "three")) == _strip_times(Manifest.read(tmp_path / "one"))
    assert _report_key(parallel) == _report_key(one_at_a_time)
    err = capsys.readouterr().err  # the progress bar is on stderr, and reaches the end
    assert "corpus refresh" in err and f"{len(ids)}/{len(ids)}" in err


def test_discovery_adds_most_downloaded(hub: FakeHub, make_fetcher: Callable[..., HubFetcher],
                                        tmp_path: Path) -> None:
    report = run(tmp_path / "corpus", ["org/gamma"], make_fetcher(), discover=2)
    assert {a["repo_id"] for a in report.added} == {"org/gamma", "org/beta", "org/alpha"}
    assert any(p.startswith("/api/models?") and "sort=downloads" in p and "limit=2" in p for p in hub.paths())


def test_cli_exit_codes_and_report(hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    ids = tmp_path / "ids.txt"
    ids.write_text("# tracked\norg/alpha\n\norg/beta  # lfs\norg/alpha\n")
    argv = ["corpus", "refresh", "--corpus", str(corpus), "--ids", str(ids), "--endpoint", hub.url,
            "--report", str(tmp_path / "rep")]
    assert cli_main(argv) == 0
    assert "4 added" in capsys.readouterr().out
    ids.write_text("org/alpha\norg/nope\n")
    assert cli_main(argv) == 1
    data = json.loads((tmp_path / "rep" / "corpus-change-report.json").read_text())
    assert [(f["repo_id"], f["kind"]) for f in data["failed"]] == [("org/nope", "missing_repo")]
    assert cli_main(["corpus", "refresh", "--corpus", str(corpus), "--ids", str(tmp_path / "none.txt")]) == 2
    # the refreshed corpus is what `corpus report` reads
    out = tmp_path / "out"
    assert cli_main(["corpus", "report", "--corpus", str(corpus), "--snapshots", str(tmp_path / "none"),
                     "--out", str(out)]) == 0
    assert "4 templates" in capsys.readouterr().out
    assert all(f"| {name} |" in (out / "report.md").read_text() for name in Corpus.load(corpus).names())


def test_default_ids_file_in_corpus(hub: FakeHub, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "model-ids.txt").write_text("org/beta\n")
    assert cli_main(["corpus", "refresh", "--corpus", str(corpus), "--endpoint", hub.url,
                     "--report", str(tmp_path / "rep")]) == 0
    assert Corpus.load(corpus).names() == ("org__beta",)


# -- kill and resume ----------------------------------------------------------------------------------------


class Killed(BaseException):
    """Stands in for SIGKILL at a write: nothing after it runs, no cleanup handlers of ours."""


def _changed_hub(hub: FakeHub) -> None:
    alpha, beta, gamma = hub.repos["org/alpha"], hub.repos["org/beta"], hub.repos["org/gamma"]
    alpha.commit({"tokenizer_config.json": tokenizer_config(ALPHA_DEFAULT),
                  "chat_template.jinja": (ALPHA_JINJA + "{# v2 #}").encode()})
    beta.commit({"chat_template.jinja": b"{{ 'beta v2' }}"})
    gamma.commit({**gamma.files, "additional_chat_templates/extra.jinja": b"{{ 'extra' }}"})


def _strip_times(m: Manifest) -> dict[str, Any]:
    raw = m.to_json()
    for t in raw["templates"]:
        t["fetched_at"] = None
    for r in raw["repos"].values():
        r["fetched_at"] = None
    return raw


def _report_key(r: ChangeReport) -> tuple[Any, ...]:
    return (sorted((a["origin"], a["name"]) for a in r.added),
            sorted((c["origin"], c["name"], c["diff"]) for c in r.changed),
            sorted(x["origin"] for x in r.removed), r.failed)


def test_kill_at_every_write_then_resume(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base"
    run(base, GOOD, make_fetcher())
    _changed_hub(hub)

    writes: list[Path] = []
    real_write = manifest_mod.atomic_write_bytes
    kill_at: list[int] = [-1]

    def counting_write(path: Path, data: bytes) -> None:
        if len(writes) == kill_at[0]:
            raise Killed
        writes.append(path)
        real_write(path, data)

    monkeypatch.setattr(manifest_mod, "atomic_write_bytes", counting_write)
    monkeypatch.setattr(refresh_mod, "atomic_write_bytes", counting_write)

    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    expected = run(ref, GOOD, make_fetcher())
    expected_manifest = _strip_times(Manifest.read(ref))
    total = len(writes)
    assert total >= 6 and expected.changed and expected.added and expected.removed

    assert total == 11  # journal, then per repo: [interim manifest], new files, manifest
    real_close = refresh_mod.CorpusUpdater.close_journal

    def killed_close(self: refresh_mod.CorpusUpdater) -> None:
        raise Killed

    for k in range(total + 1):  # k == total: every write done, killed before the sweep and the report
        root = tmp_path / f"k{k}"
        shutil.copytree(base, root)
        writes.clear()
        kill_at[0] = k
        if k == total:
            monkeypatch.setattr(refresh_mod.CorpusUpdater, "close_journal", killed_close)
        with pytest.raises(Killed):
            run(root, GOOD, make_fetcher())
        monkeypatch.setattr(refresh_mod.CorpusUpdater, "close_journal", real_close)
        assert_consistent(root)  # whatever the manifest names is there, byte for byte
        kill_at[0] = -1
        resumed = run(root, GOOD, make_fetcher())
        assert _strip_times(Manifest.read(root)) == expected_manifest, f"kill at write {k}"
        assert _report_key(resumed) == _report_key(expected), f"kill at write {k}"
        assert not (root / JOURNAL_NAME).exists()
        on_disk = {p.name for p in (root / "templates").iterdir()}
        assert on_disk == {Path(e.file).name for e in Manifest.read(root).templates}, f"kill at write {k}"


@pytest.mark.parametrize("kill_after", [3, 6])
def test_sigkill_subprocess_then_resume(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                                        kill_after: int) -> None:
    corpus = tmp_path / "corpus"
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(GOOD) + "\n")
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
           "HF_HUB_CACHE": str(tmp_path / "hf-cache"), "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("HF_TOKEN", None)
    env.pop("HF_HUB_OFFLINE", None)
    seen: list[str] = []
    killed = threading.Event()
    proc_box: list[subprocess.Popen[bytes]] = []

    def hook(method: str, path: str) -> None:
        seen.append(path)
        if len(seen) == kill_after and proc_box:
            os.kill(proc_box[0].pid, signal.SIGKILL)
            killed.set()

    hub.on_request = hook
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoparser", "corpus", "refresh", "--corpus", str(corpus), "--ids", str(ids),
         "--endpoint", hub.url, "--report", str(tmp_path / "rep")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc_box.append(proc)
    proc.wait(timeout=60)
    hub.on_request = None
    assert killed.is_set() and proc.returncode == -signal.SIGKILL
    if (corpus / "manifest.json").exists():
        assert_consistent(corpus)
    report = run(corpus, GOOD, make_fetcher())
    assert report.ok
    c = assert_consistent(corpus)
    assert set(c.names()) == {"org__alpha", "org__alpha__tokenizer_config", "org__alpha__tool_use", "org__beta",
                              "org__gamma", "org__gamma__rag"}


def test_disk_error_stops_the_run_cleanly(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    run(corpus, ["org/beta"], make_fetcher())

    def full(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(refresh_mod, "atomic_write_bytes", full)
    monkeypatch.setattr(manifest_mod, "atomic_write_bytes", full)
    with pytest.raises(CorpusError, match="No space left on device; re-run to resume"):
        run(corpus, GOOD, make_fetcher())
    assert Corpus.load(corpus).names() == ("org__beta",)
    assert_consistent(corpus)


def test_two_templates_swap_texts(hub: FakeHub, make_fetcher: Callable[..., HubFetcher], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    run(corpus, ["org/gamma"], make_fetcher())
    gamma = hub.repos["org/gamma"]
    gamma.commit({"chat_template.json": json.dumps({"chat_template": GAMMA_RAG}).encode(),
                  "additional_chat_templates/rag.jinja": GAMMA.encode()})
    report = run(corpus, ["org/gamma"], make_fetcher())
    assert sorted(c["origin"] for c in report.changed) == ["hub:org/gamma#default", "hub:org/gamma#rag"]
    c = assert_consistent(corpus)
    assert c.by_origin("hub:org/gamma#default").read_text() == GAMMA_RAG
    assert c.by_origin("hub:org/gamma#rag").read_text() == GAMMA
    assert len(c.entries) == 2


# -- a hub repo id as a command's template ----------------------------------------------------------------


@pytest.fixture
def hub_env(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The commands read the hub as a user's environment says: HF_ENDPOINT here, the hub fixture's cache."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.chdir(tmp_path)  # (a bare org/name is a file first: none here)
    return hub


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _as_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / f"t{abs(hash(text))}.jinja"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_hub_repo_is_a_template(hub_env: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # chat_template.jinja is alpha's default (it overrides tokenizer_config's), tool_use its named template
    for argv, text in ((["hf://org/alpha"], ALPHA_JINJA), (["org/alpha"], ALPHA_JINJA),
                       (["hf://org/alpha#tool_use"], ALPHA_TOOLS), (["org/alpha", "--variant", "tool_use"], ALPHA_TOOLS),
                       (["org/gamma#rag"], GAMMA_RAG)):
        code, out, err = _cli(capsys, "analyze", "--json", *argv)
        assert (code, out) == _cli(capsys, "analyze", "--json", _as_file(tmp_path, text))[:2], err
    assert any("/org/alpha/resolve/" in p for p in hub_env.paths())


def test_a_file_comes_before_a_repo_of_the_same_name(hub_env: FakeHub, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "alpha").write_text(GAMMA, encoding="utf-8")
    assert _cli(capsys, "analyze", "--json", "org/alpha")[1] == _cli(capsys, "analyze", "--json",
                                                                     _as_file(tmp_path, GAMMA))[1]
    assert hub_env.requests == []


def test_hub_template_errors_are_one_line(hub_env: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in ((["hf://org/nope"], "org/nope: "), (["hf://org/gated"], "org/gated: gated repo: it needs authentication; set HF_TOKEN"),
                         (["hf://org/base"], "org/base: no chat template file in the repo"),
                         (["hf://org/alpha#rag"], "org/alpha: no chat template 'rag' in the repo; it has default, "
                                                  "tokenizer_config, tool_use"),
                         (["hf://org/alpha#rag", "--variant", "tool_use"], "names the template 'rag', --variant"),
                         (["hf://not a repo"], "not a hub repo id")):
        for command in (["analyze"], ["parse"], ["export", "response-template"]):
            code, out, err = _cli(capsys, *command, *argv)
            assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, (argv, err)


def test_hub_template_honours_token_and_offline(hub_env: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    gated = _cli(capsys, "analyze", "--json", _as_file(tmp_path, GAMMA + " gated"))[1]
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert _cli(capsys, "analyze", "--json", "hf://org/gated")[:2] == (0, gated)
    # offline, the hub cache answers (the revision main pointed at, the files cached at it), no request is made
    hub_env.requests.clear()
    hub_env.inject(r".", 500, times=10**6)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    r = _cli(capsys, "analyze", "--json", "hf://org/gated")
    assert r[:2] == (0, gated), r[2]
    code, _, err = _cli(capsys, "analyze", "hf://org/alpha")
    assert code == 2 and "org/alpha: offline mode (HF_HUB_OFFLINE=1) and the repo is not in the hub cache (" in err
    assert hub_env.requests == []


# -- GGUF repos: the template from the first GGUF's header, read with Range requests ----------------------

GGUF_T = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{{ eos_token }}"
GGUF_TOOLS = "{{ tools | tojson }}" + GGUF_T
PAYLOAD = 8 * 1024 * 1024


@pytest.fixture
def gguf_repo(hub: FakeHub, tmp_path: Path, gguf_writer: Callable[..., Path]) -> bytes:
    """org/model-GGUF: quantisations and a projector, all served through the CDN listener (as LFS files are);
    each GGUF has 8 MiB of tensor data behind a header longer than the fetcher's first chunk in these tests."""
    tokens = ["<unk>", "<s>", "</s>", *(f"token-{i}" for i in range(2000))]
    data = gguf_writer(tmp_path / "m.gguf", templates={"default": GGUF_T, "tool_use": GGUF_TOOLS}, tokens=tokens,
                       tensor_bytes=PAYLOAD).read_bytes()
    projector = gguf_writer(tmp_path / "p.gguf", templates={"default": "projector"}).read_bytes()
    files = {"README.md": b"# GGUF", "model-Q4_K_M.gguf": data, "model-Q8_0.gguf": data,
             "mmproj-model-f16.gguf": projector}
    hub.repos["org/model-GGUF"] = FakeRepo(files, lfs=frozenset(f for f in files if f.endswith(".gguf")))
    return data


def _entry(corpus: Path, origin: str) -> manifest_mod.ManifestEntry:
    return next(e for e in Manifest.read(corpus).templates if origin in e.origins)


def test_a_gguf_repo_gives_the_templates_in_its_header(hub: FakeHub, gguf_repo: bytes, tmp_path: Path,
                                                       make_fetcher: Callable[..., HubFetcher]) -> None:
    corpus = tmp_path / "corpus"
    report = run(corpus, ["org/model-GGUF"], make_fetcher(gguf_first_chunk=4096))
    assert report.ok, report.failed
    sha = hub.repos["org/model-GGUF"].sha
    for origin, text, key in (("hub:org/model-GGUF#model-Q4_K_M.gguf", GGUF_T, "tokenizer.chat_template"),
                              ("hub:org/model-GGUF#model-Q4_K_M.gguf:tool_use", GGUF_TOOLS,
                               "tokenizer.chat_template.tool_use")):
        entry = _entry(corpus, origin)
        assert (corpus / entry.file).read_text(encoding="utf-8") == text
        assert (entry.repo_id, entry.revision, entry.source_file, entry.source_key) == \
            ("org/model-GGUF", sha, "model-Q4_K_M.gguf", key)
    assert Manifest.read(corpus).repos["org/model-GGUF"].files == ["model-Q4_K_M.gguf"]
    # Only the header of the first model GGUF was read, in ranges; never its tensor data, nor any other file.
    header = read_gguf_header(lambda offset, size: gguf_repo[offset:offset + size], name="m").size
    gets = [{k.lower(): v for k, v in hdrs.items()} for m, p, hdrs in hub.requests if m == "GET" and ".gguf" in p]
    assert len(gets) > 1 and all(g.get("range", "").startswith("bytes=") for g in gets)
    assert set(hub.served) == {"model-Q4_K_M.gguf"}
    starts = [int(g["range"].removeprefix("bytes=").split("-")[0]) for g in gets]
    assert max(starts) < header  # each request was for bytes the header still needed
    assert header <= hub.served["model-Q4_K_M.gguf"] < 2 * header + 4096 < PAYLOAD // 50
    # unchanged on the next run, nothing read again
    hub.served.clear()
    assert run(corpus, ["org/model-GGUF"], make_fetcher()).repos_unchanged == 1 and hub.served == {}


def test_a_gguf_template_is_its_own_origin_only_when_it_differs(hub: FakeHub, gguf_repo: bytes, tmp_path: Path,
                                                                make_fetcher: Callable[..., HubFetcher]) -> None:
    hub.repos["org/same"] = FakeRepo({"chat_template.jinja": GGUF_T.encode(), "m.gguf": gguf_repo})
    hub.repos["org/other"] = FakeRepo({"chat_template.jinja": GAMMA.encode(), "m.gguf": gguf_repo})
    corpus = tmp_path / "corpus"
    assert run(corpus, ["org/model-GGUF", "org/same", "org/other"], make_fetcher()).ok
    m = Manifest.read(corpus)
    assert set(m.repos["org/same"].templates) == {"default", "m.gguf:tool_use"}  # the default is the GGUF's too
    assert set(m.repos["org/other"].templates) == {"default", "m.gguf", "m.gguf:tool_use"}
    # deduplicated by sha256: one file for the GGUF template wherever it comes from
    entry = _entry(corpus, "hub:org/model-GGUF#model-Q4_K_M.gguf")
    assert sorted(entry.origins) == ["hub:org/model-GGUF#model-Q4_K_M.gguf", "hub:org/other#m.gguf",
                                     "hub:org/same#default"]
    assert sum(e.sha256 == sha256_hex(GGUF_T.encode()) for e in m.templates) == 1


def test_a_gguf_without_a_template_or_a_broken_one_is_a_failure(hub: FakeHub, gguf_repo: bytes, tmp_path: Path,
                                                                 gguf_writer: Callable[..., Path],
                                                                 make_fetcher: Callable[..., HubFetcher]) -> None:
    bare = gguf_writer(tmp_path / "bare.gguf").read_bytes()
    hub.repos["org/bare"] = FakeRepo({"bare.gguf": bare})
    hub.repos["org/cut"] = FakeRepo({"cut.gguf": gguf_repo[:5000]})
    report = run(tmp_path / "corpus", ["org/bare", "org/cut"], make_fetcher(gguf_first_chunk=1024))
    assert [(f["repo_id"], f["file"], f["kind"]) for f in report.failed] == \
        [("org/bare", "bare.gguf", "no_template"), ("org/cut", "cut.gguf", "malformed")]
    assert "truncated GGUF header: the file ends at byte 5000" in report.failed[1]["message"]


def test_a_gguf_repo_is_a_command_template(hub_env: FakeHub, gguf_repo: bytes, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for argv, text in ((["hf://org/model-GGUF"], GGUF_T), (["org/model-GGUF", "--variant", "tool_use"], GGUF_TOOLS)):
        code, out, err = _cli(capsys, "analyze", "--json", *argv)
        assert (code, out) == _cli(capsys, "analyze", "--json", _as_file(tmp_path, text))[:2], err
