"""Project-wide pytest configuration: repository paths and the hub-safety environment.

Contributor fixtures (peg_tester, the GBNF oracle, snapshot extensions) live in the installed pytest plugin
`autoparser.testing.plugin`, so they also work from other checkouts.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Tests never reach the real hub: huggingface_hub reads these when it is imported.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def test_data() -> Path:
    return ROOT / "tests" / "data"
