"""Differential analysis vs the C++ reference records (tests/data/analysis*.jsonl, copied from the C++ run).

Every field of the record is compared (caps, modes, markers, every tools.* field, user/assistant start,
preserved tokens, additional stops). Records carrying `error` are templates the C++ could not analyse: there we
only require a clean result or a clean AutoparserError. Known gaps live in tests/data/ratchet/analysis.json.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from autoparser.analysis.analyzer import analyze_template
from autoparser.corpus import Corpus
from autoparser.errors import AutoparserError
from autoparser.testing.ratchet import Ratchet

DATA = Path(__file__).parent.parent / "data"
FILES = {"analysis.jsonl": "templates", "analysis_packages.jsonl": "packages", "analysis_hub.jsonl": "hub"}
RATCHET = Ratchet(DATA / "ratchet" / "analysis.json")


def _records() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for fname, folder in FILES.items():
        for line in (DATA / fname).read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            out.append((f"{folder}/{rec['template']}", folder, rec))
    return out


RECORDS = _records()
_CORPUS: list[Corpus] = []


def _source(folder: str, name: str) -> str:
    if not _CORPUS:
        _CORPUS.append(Corpus.load())
    return _CORPUS[0].by_origin(f"seed:{folder}/{name}").read_text()


def _differences(want: dict[str, Any], got: dict[str, Any], path: str = "") -> list[str]:
    diffs: list[str] = []
    for key, w in want.items():
        g = got.get(key, "<missing>")
        if isinstance(w, dict) and isinstance(g, dict):
            diffs.extend(_differences(w, g, f"{path}{key}."))
        elif g != w:
            diffs.append(f"{path}{key}: got {g!r}, C++ {w!r}")
    return diffs


def test_ratchet_names_existing_cases() -> None:
    RATCHET.check_known(case_id for case_id, _, _ in RECORDS)


@pytest.mark.parametrize(("case_id", "folder", "record"), RECORDS, ids=[c for c, _, _ in RECORDS])
def test_analysis_matches_cpp(case_id: str, folder: str, record: dict[str, Any]) -> None:
    source = _source(folder, record["template"])
    if "error" in record:
        # The C++ failed here; we must end cleanly (a result or an AutoparserError), never crash.
        with contextlib.suppress(AutoparserError):
            analyze_template(source, name=record["template"]).to_dict()
        return
    want = {k: v for k, v in record.items() if k != "template"}
    try:
        got = analyze_template(source, name=record["template"]).to_dict()
    except AutoparserError as err:
        RATCHET.check(case_id, f"raised {type(err).__name__}: {err}")
        return
    assert list(got) == list(want), "record shape differs from the C++ dump"
    diffs = _differences(want, got)
    RATCHET.check(case_id, "\n".join(diffs) if diffs else None)


def test_chat_template_input_and_crlf_give_the_same_analysis() -> None:
    from autoparser.template.render import ChatTemplate

    _, folder, rec = next(r for r in RECORDS if r[2]["template"].startswith("Qwen3"))
    src = _source(folder, rec["template"])
    plain = analyze_template(src).to_dict()
    assert analyze_template(ChatTemplate(src)).to_dict() == plain
    assert analyze_template(src.replace("\n", "\r\n")).to_dict() == plain


def test_syntax_error_is_template_error() -> None:
    from autoparser.errors import TemplateError

    with pytest.raises(TemplateError):
        analyze_template("{% for %}")
