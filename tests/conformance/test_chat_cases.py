"""The 463 cases of llama.cpp's chat test suite (tests/data/chat_cases.jsonl, produced by the C++ reference),
each run through peg_tester with the C++ harness's checks and comparison rules.

Two figures: the parsed message (every peg_tester check), and the rendered prompt compared with the prompt the
C++ rendered. Known gaps are listed in tests/data/ratchet/chat_cases.json and chat_prompts.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autoparser.testing.chat_cases import ChatCases, template_source
from autoparser.testing.peg_tester import PegTestFailure, peg_tester
from autoparser.testing.ratchet import Ratchet

DATA = Path(__file__).resolve().parent.parent / "data"
CHAT = ChatCases(DATA)
CASES, IDS, CASE_RATCHET = CHAT.cases, CHAT.ids, CHAT.ratchet
PROMPT_RATCHET = Ratchet(DATA / "ratchet" / "chat_prompts.json")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chat_case(case: dict[str, Any]) -> None:
    tester = peg_tester(case["template"], source=template_source(case["template"]), now=case["now"])
    t = tester.test(case["input"])
    t.request.update(CHAT.request(case))
    t.is_partial(case["is_partial"]).expect_reconstruction(case["expect_reconstruction"]).strict()
    failure = None
    try:
        t.expect(case["expect"])
    except PegTestFailure as e:
        failure = str(e)
    except Exception as e:
        failure = f"{type(e).__name__}: {e}"
    CASE_RATCHET.check(IDS[CASES.index(case)], failure)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chat_prompt(case: dict[str, Any]) -> None:
    """Our rendered prompt equals the C++'s (transformers semantics win where the two engines differ)."""
    from autoparser import generate

    failure = None
    try:
        got = generate(template_source(case["template"]), CHAT.request(case)).prompt
        want = case["cpp"]["prompt"]
        if got != want:
            k = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
            failure = f"prompt differs at {k}: C++ …{want[max(0, k - 40):k + 60]!r}\n ours …{got[max(0, k - 40):k + 60]!r}"
    except Exception as e:
        failure = f"{type(e).__name__}: {e}"
    PROMPT_RATCHET.check(IDS[CASES.index(case)], failure)


def test_ratchets_name_real_cases() -> None:
    CASE_RATCHET.check_known(IDS)
    PROMPT_RATCHET.check_known(IDS)
