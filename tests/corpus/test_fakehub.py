"""`autoparser corpus fake-hub DIR`: the tests' fake hub serving a directory, and the README's nightly job
without network, run as written (its paths and port moved under the test's temporary directory).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoparser.cli import build_parser
from autoparser.corpus.fakehub import DirectoryHub
from autoparser.corpus.fetcher import HubFetcher

ROOT = Path(__file__).resolve().parents[2]
README_BLOCK = re.compile(r"#### The nightly job without network\n.*?```sh\n(.*?)```", re.DOTALL)


def _readme_block() -> str:
    found = README_BLOCK.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md has no 'The nightly job without network' section with a sh block"
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(tmp: Path) -> dict[str, str]:
    """A user's shell without hub settings of its own, whose `autoparser` is this checkout's."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "autoparser"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m autoparser "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(ROOT),
               HF_HOME=str(tmp / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_IMPLICIT_TOKEN="1")
    return env


def _start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """The command started in the background, and the first line it prints (once it listens)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stdout is not None
    return proc, proc.stdout.readline()


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[str]]]:
    """Background processes a test started, stopped (by their own pid) however the test ends."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.terminate()
        proc.communicate(timeout=10)  # (reads and closes its pipes)


def test_the_readme_runs_the_nightly_job_against_a_local_hub(tmp_path: Path,
                                                             stopped: list[subprocess.Popen[str]]) -> None:
    port = str(_free_port())
    block = _readme_block().replace("/tmp/", f"{tmp_path}/").replace("8765", port)
    lines = block.splitlines()
    [serve] = [i for i, line in enumerate(lines) if "autoparser corpus fake-hub" in line]
    env = _env(tmp_path)
    # the lines before the hub, then the hub in the background as the README starts it; a script would race its
    # start, so the test waits for the line it prints once it listens
    subprocess.run(["bash", "-c", "\n".join(lines[:serve])], cwd=ROOT, env=env, check=True)
    command = lines[serve].split("&", 1)[0]
    proc, first = _start(shlex.split(command), env)
    stopped.append(proc)
    assert first.startswith(f"corpus fake-hub: 1 repo from {tmp_path}/hub at http://127.0.0.1:{port} ")
    done = subprocess.run(["bash", "-c", "\n".join(lines[serve + 1:])], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    runs = [line for line in done.stdout.splitlines() if line.startswith("corpus nightly: ")]
    assert len(runs) == 2, done.stdout + done.stderr
    assert "1 added" in runs[0] and "1 changed (1 in behaviour)" in runs[1], runs
    # the report the last line prints: the renamed reasoning markers, old and new
    assert '| `reasoning.start` | `"<think>\\n"` | `"<reason>\\n"` |' in done.stdout
    # the checkout's corpus and the user's hub cache were not used
    assert (tmp_path / "c" / "manifest.json").exists() and (tmp_path / "hub-cache").is_dir()
    assert not (tmp_path / "hf-home" / "hub").exists()


def test_the_readme_commands_are_the_command_lines() -> None:
    parser = build_parser()
    commands = [part.split("#", 1)[0].strip().rstrip("&").strip()
                for line in _readme_block().splitlines() for part in line.split(";")]
    commands = [c for c in commands if c.startswith("autoparser ")]
    assert len(commands) == 3  # the hub, the first night, the night after the change
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])  # exits (SystemExit) on an option the command does not take


def test_a_directory_is_a_hub(hf_isolated: Path, tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "org" / "model"
    (repo / "additional_chat_templates").mkdir(parents=True)
    (repo / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ 'one' }}"}))
    (repo / "additional_chat_templates" / "tool_use.jinja").write_text("{{ 'tools' }}")
    (repo / ".notes").write_text("not served")
    locked = tmp_path / "hub" / "org" / "locked"
    locked.mkdir()
    (locked / "chat_template.jinja").write_text("{{ 'locked' }}")
    (locked / ".gated").touch()
    with DirectoryHub(tmp_path / "hub") as hub:
        fetcher = HubFetcher(endpoint=hub.url, cache_dir=hf_isolated, offline=False, sleep=lambda s: None)
        first = fetcher.fetch_repo("org/model")
        assert sorted(first.files) == ["additional_chat_templates/tool_use.jinja", "tokenizer_config.json"]
        assert {t.template_name: t.data for t in first.templates} == {"default": b"{{ 'one' }}",
                                                                      "tool_use": b"{{ 'tools' }}"}
        gated = fetcher.fetch_repo("org/locked")
        assert [(f.kind, f.file) for f in gated.failures] == [("gated", "chat_template.jinja")]
        assert HubFetcher(endpoint=hub.url, cache_dir=hf_isolated, offline=False, token="any").fetch_repo(
            "org/locked").templates[0].data == b"{{ 'locked' }}"
        # an edit is a new commit; the one read before stays readable at its sha
        (repo / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ 'two' }}"}))
        second = fetcher.fetch_repo("org/model")
        assert second.revision != first.revision and second.templates[0].data == b"{{ 'two' }}"
        assert first.revision is not None and first.revision in hub.repos["org/model"].history
        shutil.rmtree(locked)
        assert fetcher.fetch_repo("org/locked").failures[0].kind == "missing_repo"


def test_the_command_says_what_is_wrong_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from autoparser.cli import main

    assert main(["corpus", "fake-hub", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"autoparser: error: corpus fake-hub: no directory {tmp_path / 'none'}\n"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["corpus", "fake-hub", "--port", str(taken.getsockname()[1]), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot listen on 127.0.0.1:" in err and "in use" in err
