"""pytest plugin (entry point `pytest11`): the fixtures contributors write chat tests with.

    def test_qwen_call(peg_tester):
        t = peg_tester("Qwen__Qwen3-0.6B")  # a corpus name, or the path of any .jinja file
        t.test("<tool_call>...</tool_call>").tools([...]).expect({...})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def peg_tester() -> Callable[..., Any]:
    """Factory: peg_tester(path_or_corpus_name, source=None, now="2026-01-01") -> PegTester."""
    from autoparser.testing.peg_tester import peg_tester as factory

    return factory


@pytest.fixture
def gbnf_oracle() -> Any:
    """llama.cpp's own GBNF engine (`LlamaGrammar`); fails, never skips, when AUTOPARSER_REQUIRE_ORACLE=1."""
    from autoparser.testing.gbnf_oracle import LlamaGrammar, require_oracle

    require_oracle()
    return LlamaGrammar


@pytest.fixture
def artefact_snapshot(snapshot: Any, request: pytest.FixtureRequest) -> Any:
    """Per-template artefact snapshots at snapshots/<key>/<file> (autoparser.testing.snapshots.ArtefactSnapshot):

        artefact_snapshot.check(key, {"analysis.json": text, ...})      # all files, one failure with every diff
        assert text == artefact_snapshot(key, "analysis.json")          # one file
    """
    from autoparser.testing.snapshots import ArtefactSnapshot

    option = request.config.option
    return ArtefactSnapshot(snapshot, colors=not getattr(option, "no_colors", False),
                            detailed=str(getattr(option, "diff_mode", "detailed")) != "disabled")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "oracle: checked by llama.cpp's own GBNF engine")


__all__ = ["artefact_snapshot", "gbnf_oracle", "peg_tester"]
