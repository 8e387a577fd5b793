"""Shared set-up of the tests that talk to the fake hub (autoparser.corpus.fakehub.FakeHub on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants as hf_constants
import huggingface_hub.utils._http as hf_http
import pytest
from deadhub import DeadHub


@pytest.fixture
def hf_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """huggingface_hub pointed at a fresh cache, online, with no token or endpoint from the machine; its own
    429 back-off does not sleep. huggingface_hub reads HF_* at import, so the constants are patched too.
    Returns the cache directory."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setattr(hf_http.time, "sleep", lambda s: None)  # type: ignore[attr-defined]
    return cache



@pytest.fixture
def dead_hub(monkeypatch: pytest.MonkeyPatch) -> DeadHub:
    """A 127.0.0.1 port with nothing listening (connection refused at once, no network needed), and every
    connection attempt made to it (deadhub.py)."""
    return DeadHub.open(monkeypatch)
