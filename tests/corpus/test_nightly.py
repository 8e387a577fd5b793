"""The nightly job end to end against the fake hub: refresh, behaviour diff against snapshots, report, exit codes.

The templates are real: Qwen3's (corpus/templates), whose reasoning markers the hub then renames, and a small
ChatML one. What the report says comes from autoparser's own artefacts, so each test names the template
behaviour it relies on (Qwen3 renders `<think>\\n...\\n</think>\\n\\n` before the content of an assistant turn
with reasoning; the renamed copy renders `<reason>` instead).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants as hf_constants
import pytest
import yaml
from deadhub import DeadHub

import autoparser.corpus.nightly as nightly_mod
from autoparser.cli import main as cli_main
from autoparser.corpus import Corpus
from autoparser.corpus.artefacts import snapshot_key, template_artefacts
from autoparser.corpus.fakehub import FakeHub, FakeRepo
from autoparser.corpus.fetcher import HubFetcher
from autoparser.corpus.manifest import Manifest
from autoparser.corpus.nightly import (
    NIGHTLY_JSON,
    NIGHTLY_MD,
    ScenarioChange,
    add_report_section,
    compare_artefacts,
    nightly,
)
from autoparser.corpus.refresh import JOURNAL_NAME, read_repo_ids

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = (ROOT / "corpus" / "templates" / "Qwen__Qwen3-0.6B.jinja").read_text(encoding="utf-8")
RENAMED = QWEN3.replace("<think>", "<reason>").replace("</think>", "</reason>")
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# the same conversation format with other role markers: the assistant turn starts differently
CHATML_V2 = CHATML.replace("<|im_start|>", "<|turn|>")
IDS = ["org/reasoner", "org/chat"]


def _config(template: str) -> bytes:
    return json.dumps({"eos_token": "<|im_end|>", "chat_template": template}).encode()


@pytest.fixture
def hub(hf_isolated: Path) -> Iterator[FakeHub]:
    repos = {
        "org/reasoner": FakeRepo({"tokenizer_config.json": _config(QWEN3)}),
        "org/chat": FakeRepo({"chat_template.jinja": CHATML.encode()}),
        "org/gated": FakeRepo({"tokenizer_config.json": _config(CHATML + "{# gated #}")}, gated=True),
        "org/flaky": FakeRepo({"chat_template.jinja": (CHATML + "{# flaky #}").encode()}),
    }
    with FakeHub(repos) as h:
        yield h


@pytest.fixture
def fetcher(hub: FakeHub, hf_isolated: Path) -> Callable[[], HubFetcher]:
    # no back-off sleeps between retries of a 5xx
    return lambda: HubFetcher(endpoint=hub.url, cache_dir=hf_isolated, offline=False, sleep=lambda s: None)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(root.rglob("*"))}


def _digest(*roots: Path) -> dict[str, str]:
    """Every file and directory under the roots, files by the sha256 of their bytes (a root that does not exist
    is recorded as such)."""
    out: dict[str, str] = {}
    for root in roots:
        out[str(root)] = "dir" if root.is_dir() else "missing"
        for p in sorted(root.rglob("*")):
            out[str(p)] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _cli(tmp: Path, hub: FakeHub, *extra: str, ids: list[str] = IDS) -> int:
    (tmp / "ids.txt").write_text("\n".join(ids) + "\n")
    return cli_main(["corpus", "nightly", "--corpus", str(tmp / "corpus"), "--snapshots", str(tmp / "snapshots"),
                     "--ids", str(tmp / "ids.txt"), "--endpoint", hub.url, "--report", str(tmp / "report"), *extra])


def _snapshot_dir(tmp: Path, name: str) -> Path:
    entry = next(e for e in Corpus.load(tmp / "corpus").entries if e.name == name)
    return tmp / "snapshots" / snapshot_key(entry)


def test_a_template_that_renames_its_reasoning_markers(hub: FakeHub, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # first night: both templates are new; --update writes their snapshots
    assert _cli(tmp_path, hub, "--update") == 1
    assert "2 added" in capsys.readouterr().out
    first = json.loads((tmp_path / "report" / NIGHTLY_JSON).read_text())
    added = {t["name"]: t for t in first["templates"]}
    assert added["org__reasoner"]["summary"]["reasoning"] == {"mode": "TAG_BASED", "start": "<think>\n",
                                                              "end": "\n</think>\n\n"}
    written = _snapshot_dir(tmp_path, "org__reasoner")
    assert (written / "analysis.json").read_text() == template_artefacts(QWEN3)["analysis.json"]

    # an unchanged night: exit 0, nothing written anywhere
    (tmp_path / "report" / NIGHTLY_JSON).unlink()
    (tmp_path / "report" / NIGHTLY_MD).unlink()
    before = _tree(tmp_path / "corpus"), _tree(tmp_path / "snapshots")
    assert _cli(tmp_path, hub) == 0
    assert "0 changed" in capsys.readouterr().out
    assert (_tree(tmp_path / "corpus"), _tree(tmp_path / "snapshots")) == before
    assert not any((tmp_path / "report").iterdir())

    # the hub's template now marks reasoning with <reason>: exit 1, the report names both markers
    hub.repos["org/reasoner"].commit({"tokenizer_config.json": _config(RENAMED)})
    assert _cli(tmp_path, hub) == 1
    assert "1 changed (1 in behaviour)" in capsys.readouterr().out
    report = json.loads((tmp_path / "report" / NIGHTLY_JSON).read_text())
    [change] = report["templates"]
    assert (change["kind"], change["name"], change["origins"]) == ("changed", "org__reasoner",
                                                                   ["hub:org/reasoner#default"])
    fields = {c["path"]: (c["old"], c["new"]) for c in change["analysis"]}
    assert fields["reasoning.start"] == ("<think>\n", "<reason>\n")
    assert fields["reasoning.end"] == ("\n</think>\n\n", "\n</reason>\n\n")
    # the scenarios that render reasoning render the new markers (still parsed: the parser follows them)
    assert {"b_reasoning": ("pass", "pass")}.items() <= {s["scenario"]: (s["old"], s["new"])
                                                         for s in change["scenarios"]}.items()
    assert "grammar-thinking-on.gbnf" in change["grammar_diffs"]
    assert change["handler"] is None  # the same format parses both
    md = (tmp_path / "report" / NIGHTLY_MD).read_text()
    assert "### `org__reasoner`" in md and "`hub:org/reasoner#default`" in md
    assert '| `reasoning.start` | `"<think>\\n"` | `"<reason>\\n"` |' in md
    assert "grammar-thinking-on.gbnf" in md and "(diff)</summary>" in md and "<summary>template diff</summary>" in md

    # without --update the snapshots were left alone: a re-run has nothing new to say about the corpus ...
    assert (_snapshot_dir(tmp_path, "org__reasoner") / "analysis.json").read_text() == \
        template_artefacts(QWEN3)["analysis.json"]
    assert _cli(tmp_path, hub) == 0
    capsys.readouterr()


def test_update_writes_only_the_changed_templates_snapshots(hub: FakeHub, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(tmp_path, hub, "--update") == 1
    chat = _tree(_snapshot_dir(tmp_path, "org__chat"))
    hub.repos["org/reasoner"].commit({"tokenizer_config.json": _config(RENAMED)})
    assert _cli(tmp_path, hub, "--update") == 1
    capsys.readouterr()
    folder = _snapshot_dir(tmp_path, "org__reasoner")
    assert {p.name: p.read_text() for p in folder.iterdir()} == template_artefacts(RENAMED)
    assert _tree(_snapshot_dir(tmp_path, "org__chat")) == chat
    # a template gone from the hub: reported removed, its folder dropped with --update
    hub.repos["org/chat"].commit({"config.json": b"{}"})
    assert _cli(tmp_path, hub, "--update") == 1
    report = json.loads((tmp_path / "report" / NIGHTLY_JSON).read_text())
    assert [(t["kind"], t["name"]) for t in report["templates"]] == [("removed", "org__chat")]
    assert "## Removed templates" in (tmp_path / "report" / NIGHTLY_MD).read_text()
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [folder.name]
    capsys.readouterr()


def test_gated_and_failing_repos_are_reported_and_only_a_dead_hub_is_exit_2(
        hub: FakeHub, tmp_path: Path, fetcher: Callable[[], HubFetcher]) -> None:
    corpus, snaps, rep = tmp_path / "corpus", tmp_path / "snapshots", tmp_path / "report"
    hub.inject(r"^/api/models/org/flaky", 503, times=100)
    report = nightly(corpus, ["org/reasoner", "org/gated", "org/flaky"], fetcher(), snapshots=snaps,
                     report_dir=rep, progress=False)
    assert {(f["repo_id"], f["kind"]) for f in report.refresh.failed} == {("org/gated", "gated"),
                                                                         ("org/flaky", "server_error")}
    assert report.exit_code == 1  # the reasoner was added
    md = (rep / NIGHTLY_MD).read_text()
    assert "## Failed" in md and "| org/gated |" in md and "| org/flaky |" in md

    # the reasoner changes, but the hub is down for the whole run: exit 2, and a failed run leaves the checkout
    # byte for byte as it was (no new failures in the manifest either); only the report says what failed
    hub.repos["org/reasoner"].commit({"tokenizer_config.json": _config(RENAMED)})
    hub.faults.clear()
    hub.inject(r"^/", 500, times=1000)
    before = _digest(corpus, snaps)
    down = nightly(corpus, ["org/reasoner", "org/flaky"], fetcher(), snapshots=snaps, report_dir=rep,
                   progress=False, update=True)
    assert down.exit_code == 2 and down.nothing_fetched and not down.templates
    assert _digest(corpus, snaps) == before
    assert {f.repo_id for f in Manifest.read(corpus).failures} == {"org/flaky", "org/gated"}
    written = json.loads((rep / NIGHTLY_JSON).read_text())
    assert written["exit_code"] == 2 and {f["repo_id"] for f in written["failed"]} == {"org/reasoner", "org/flaky"}


@pytest.mark.parametrize("jobs", [1, 3])
def test_an_unreachable_hub_stops_the_job_at_the_first_connection(dead_hub: DeadHub, tmp_path: Path, jobs: int,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ids = [*IDS, "org/gated", "org/flaky", "org/a", "org/b", "org/c", "org/d"]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    code = cli_main(["corpus", "nightly", "--corpus", str(tmp_path / "corpus"), "--snapshots",
                     str(tmp_path / "snapshots"), "--ids", str(tmp_path / "ids.txt"), "--endpoint", dead_hub.url,
                     "--report", str(tmp_path / "report"), "--jobs", str(jobs)])
    err = capsys.readouterr().err
    # one attempt; with --jobs N at most the N already under way when the first one failed
    assert code == 2 and 1 <= len(dead_hub.attempts) <= jobs
    assert not (tmp_path / "corpus").exists() and not (tmp_path / "snapshots").exists()
    # one line: what failed, where, and the variables that decide it (HF_ENDPOINT, HF_HUB_OFFLINE)
    assert err.count("\n") == 1 and err.startswith("autoparser: error: corpus nightly: cannot reach the hub at "
                                                   f"{dead_hub.url} (")
    assert "HF_ENDPOINT" in err and "HF_HUB_OFFLINE" in err
    failed = json.loads((tmp_path / "report" / NIGHTLY_JSON).read_text())["failed"]
    assert [(f["repo_id"], f["kind"]) for f in failed] == [(r, "unreachable") for r in sorted(ids)]


def test_offline_on_a_fresh_clone_is_one_line_and_writes_nothing(hub: FakeHub, hf_isolated: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # a fresh clone: the committed corpus, whose manifest records no hub state (its templates were seeded), and
    # an empty hub cache. HF_HUB_OFFLINE means "read the hub cache only", as huggingface_hub reads it: nothing
    # is there, so the job says so once and fails, rather than failing every repo with "no earlier fetch"
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "corpus", corpus, ignore=shutil.ignore_patterns(".*"))
    assert Manifest.read(corpus).repos == {}
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    before = _digest(corpus)
    code = cli_main(["corpus", "nightly", "--corpus", str(corpus), "--snapshots", str(tmp_path / "snapshots"),
                     "--endpoint", hub.url, "--report", str(tmp_path / "report")])
    err = capsys.readouterr().err
    n = len(read_repo_ids(corpus / "model-ids.txt"))
    assert code == 2 and hub.requests == [] and err.count("\n") == 1
    assert f"offline mode (HF_HUB_OFFLINE=1) and none of the {n} repos is in the hub cache ({hf_isolated})" in err
    assert "nothing fetched, the corpus unchanged" in err and "HF_ENDPOINT" in err
    assert _digest(corpus) == before and not (tmp_path / "snapshots").exists()


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs."""


def test_killed_while_writing_snapshots_then_resumed(hub: FakeHub, tmp_path: Path,
                                                     fetcher: Callable[[], HubFetcher],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, snaps, rep = tmp_path / "corpus", tmp_path / "snapshots", tmp_path / "report"
    assert nightly(corpus, IDS, fetcher(), snapshots=snaps, update=True, progress=False).exit_code == 1
    hub.repos["org/reasoner"].commit({"tokenizer_config.json": _config(RENAMED)})
    hub.repos["org/chat"].commit({"chat_template.jinja": CHATML_V2.encode()})

    real = nightly_mod._write_snapshot
    calls: list[str] = []

    def write_then_die(snapshots: Path, name: str, arts: Any) -> None:
        if calls:
            raise Killed
        calls.append(name)
        real(snapshots, name, arts)

    monkeypatch.setattr(nightly_mod, "_write_snapshot", write_then_die)
    with pytest.raises(Killed):
        nightly(corpus, IDS, fetcher(), snapshots=snaps, report_dir=rep, update=True, progress=False)
    assert calls == ["org__chat"] and (corpus / JOURNAL_NAME).exists()
    assert not rep.exists()
    monkeypatch.setattr(nightly_mod, "_write_snapshot", real)

    # the next night the hub is down: a failed run does not finish the killed one, it touches nothing
    hub.inject(r"^/", 503, times=1000)
    before = _digest(corpus, snaps)
    assert nightly(corpus, IDS, fetcher(), snapshots=snaps, update=True, progress=False).exit_code == 2
    assert _digest(corpus, snaps) == before
    hub.faults.clear()

    report = nightly(corpus, IDS, fetcher(), snapshots=snaps, report_dir=rep, update=True, progress=False)
    assert report.refresh.repos_unchanged == 2  # the corpus was already up to date: the journal told the story
    assert [(t.kind, t.name) for t in report.templates] == [("changed", "org__chat"), ("changed", "org__reasoner")]
    chat = {c.path: (c.old, c.new) for c in report.templates[0].behaviour.analysis}
    # compared with the snapshot as it was before the killed run, not the one it had rewritten
    assert chat["assistant_start"] == ("<|im_start|>assistant", "<|turn|>assistant")
    assert not (corpus / JOURNAL_NAME).exists()
    assert nightly(corpus, IDS, fetcher(), snapshots=snaps, progress=False).exit_code == 0


def test_scenario_directions_and_markdown_cells() -> None:
    assert [ScenarioChange("s", a, b).direction for a, b in
            (("pass", "fail"), ("fail", "pass"), ("fail", "error"), ("pass", "pass"), (None, "pass"))] == \
        ["stopped passing", "started passing", "status changed", "output changed", "started passing"]
    old = template_artefacts(CHATML)
    new = template_artefacts(CHATML_V2)
    b = compare_artefacts(old, new)
    assert b.changed and not compare_artefacts(old, old).changed
    assert {c.path for c in b.analysis} >= {"assistant_start", "user_start"}


def test_the_workflow_runs_the_job_and_opens_one_pull_request() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers["schedule"][0]["cron"] and "workflow_dispatch" in triggers
    steps = [s for job in wf["jobs"].values() for s in job["steps"]]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "tox -e nightly" in runs and "--update" in runs
    assert "secrets.HF_TOKEN" in json.dumps(wf)
    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    assert uses["actions/upload-artifact"]["with"]["path"].startswith("reports/nightly")
    pr = uses["peter-evans/create-pull-request"]["with"]
    assert pr["body-path"] == "reports/nightly/nightly-report.md" and pr["branch"]
    tox = (ROOT / "tox.ini").read_text()
    section = tox.split("[testenv:nightly]", 1)[1].split("\n[", 1)[0]
    assert "autoparser corpus nightly" in section and "HF_TOKEN" in section


def test_jobs_after_the_nightly_add_their_sections_to_its_report(tmp_path: Path) -> None:
    # (the upstream watch and the cross-engine matrix): each section once, a second run replaces its own
    assert add_report_section(tmp_path, "## A\n\na\n") is False  # no report: nothing changed tonight
    (tmp_path / NIGHTLY_MD).write_text("# Nightly\n\n2 templates changed.\n", encoding="utf-8")
    assert add_report_section(tmp_path, "## A\n\nfirst\n") and add_report_section(tmp_path, "## B\n\nb\n")
    assert add_report_section(tmp_path, "## A\n\nsecond\n")
    assert (tmp_path / NIGHTLY_MD).read_text(encoding="utf-8") == \
        "# Nightly\n\n2 templates changed.\n\n## B\n\nb\n\n## A\n\nsecond\n"
