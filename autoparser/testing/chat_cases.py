"""The C++ reference's chat cases (a chat_cases.jsonl) as the test suites use them.

Each case is a request on a seed template of the corpus, a model output and what the C++ produced. The
conformance suite checks them; the stream and codegen suites reuse their parsers. Known gaps are the cases of
ratchet/chat_cases.json beside the data; a case whose parser cannot be built is an expected failure only
when that ratchet lists it.

    CHAT = ChatCases(Path(__file__).parent.parent / "data")
    @pytest.mark.parametrize("index", range(len(CHAT.cases)), ids=CHAT.ids)
    def test_x(index): params = CHAT.params_or_xfail(index)
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from autoparser.corpus import Corpus
from autoparser.errors import AutoparserError
from autoparser.params import ChatParams, generate
from autoparser.testing.ratchet import Ratchet

__all__ = ["ChatCases", "template_source"]


@cache
def template_source(template_file: str) -> str:
    """A seed template of the embedded corpus, by file name (as chat cases and bench inputs name them)."""
    return Corpus.load().by_origin(f"seed:templates/{template_file}").read_text()


class ChatCases:
    def __init__(self, data: Path) -> None:
        self.cases: list[dict[str, Any]] = [
            json.loads(line) for line in (data / "chat_cases.jsonl").read_text(encoding="utf-8").splitlines()]
        self.ids = [f"{c['case']:03d}-{Path(c['template']).stem}" for c in self.cases]
        self.ratchet = Ratchet(data / "ratchet" / "chat_cases.json")
        self._params: dict[int, ChatParams] = {}

    @staticmethod
    def request(case: dict[str, Any]) -> dict[str, Any]:
        return dict(case["params"], now=case["now"])

    def params(self, index: int) -> ChatParams:
        """The generated parameters of case `index` (built once per process); AutoparserError if they cannot be."""
        if index not in self._params:
            case = self.cases[index]
            self._params[index] = generate(template_source(case["template"]), self.request(case))
        return self._params[index]

    def params_or_xfail(self, index: int) -> ChatParams:
        """`params`, or an expected failure when the ratchet lists the case (any other failure propagates)."""
        try:
            return self.params(index)
        except AutoparserError as e:
            listed = self.ratchet.entries.get(self.ids[index])
            if listed is None:
                raise
            pytest.xfail(f"no parser ({type(e).__name__}); ratchet {self.ratchet.path.name}: {listed}")
