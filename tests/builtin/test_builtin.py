"""llama.cpp's built-in chat formats (autoparser.builtin) against llama.cpp: the cases of its
tests/test-chat-template.cpp, and what its library renders for each built-in name and detects for each test
template and each corpus template (tests/data/builtin/, written by tools/port_builtin_cases.py; README there).
The test file's Jinja half (the same cases through `common_chat_templates_apply`) runs through `generate`.

Every case runs; one we cannot match must be listed, with its reason, in tests/data/ratchet/builtin.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from autoparser import generate
from autoparser.builtin import (
    LLM_CHAT_TEMPLATES,
    LlamaChatMessage,
    LlmChatTemplate,
    detect_builtin,
    llama_chat_apply_template,
    llama_chat_builtin_templates,
    llm_chat_apply_template,
    llm_chat_detect_template,
    llm_chat_template_from_str,
    messages_from_openai,
)
from autoparser.corpus import Corpus
from autoparser.errors import AutoparserError, TemplateError, UnknownBuiltinTemplateError
from autoparser.testing.ratchet import Ratchet

DATA = Path(__file__).resolve().parent.parent / "data"
CPP_TEST = json.loads((DATA / "builtin" / "test-chat-template.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((DATA / "builtin" / "reference.json").read_text(encoding="utf-8"))
RATCHET = Ratchet(DATA / "ratchet" / "builtin.json")
CASES = {c["id"]: c for c in CPP_TEST["cases"]}
PROBES = [([LlamaChatMessage(*m) for m in p["messages"]], bool(p["add_ass"])) for p in REFERENCE["probes"]]


def _chat(messages: list[list[str]]) -> list[LlamaChatMessage]:
    return [LlamaChatMessage(role, content) for role, content in messages]


def _prompts_digest(prompts: list[str]) -> str:
    """As tools/port_builtin_cases.py digests llama.cpp's prompts for the probes."""
    return hashlib.sha256(json.dumps(prompts, ensure_ascii=False).encode("utf-8")).hexdigest()


def _first_difference(want: str, got: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got)))
    return f"differs at {at}: llama.cpp {want[at:at + 40]!r}, we {got[at:at + 40]!r}"


def test_the_data_is_the_whole_test_file() -> None:
    # (what the port must have found: a drop here means the parser of the C++ lost cases)
    assert len(CASES) == 36 and CPP_TEST["add_generation_prompt"] is True
    assert CPP_TEST["source"]["file"] == "tests/test-chat-template.cpp" and CPP_TEST["source"]["licence"] == "MIT"
    assert [m[0] for m in CPP_TEST["conversation"]] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_builtin_names_are_llama_cpps() -> None:
    assert llama_chat_builtin_templates() == tuple(REFERENCE["builtin_templates"])
    assert set(LLM_CHAT_TEMPLATES) == set(REFERENCE["by_name"])


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_cpp_case_legacy_prompt(case_id: str) -> None:
    """llama_chat_apply_template(template text, conversation + the case's extra messages, add_ass) as the C++
    test calls it: detection from the text, then the built-in rendering."""
    case = CASES[case_id]
    chat = _chat(CPP_TEST["conversation"] + case["extra_conversation"])
    try:
        got = llama_chat_apply_template(case["template_str"], chat, CPP_TEST["add_generation_prompt"])
    except TemplateError as e:
        RATCHET.check(f"case:{case_id}", f"rejected: {e}")
        return
    want = case["expected_output"]
    RATCHET.check(f"case:{case_id}", None if got == want else _first_difference(want, got))


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_cpp_case_detection(case_id: str) -> None:
    """The format we detect for the case's template renders every probe as llama.cpp does for that text (the
    reference lists the names that do: both Granite 4 names render alike, so either is llama.cpp's)."""
    want = REFERENCE["cases"][case_id]
    got = detect_builtin(CASES[case_id]["template_str"])
    failure = None
    if got.name not in want["builtin"]:
        failure = f"we detect {got.label}, llama.cpp renders it as {want['builtin'] or 'no named format'}"
    RATCHET.check(f"detect:{case_id}", failure)


JINJA_CASES = sorted(c["id"] for c in CPP_TEST["cases"] if c["supported_with_jinja"])


@pytest.mark.parametrize("case_id", JINJA_CASES)
def test_cpp_case_jinja_prompt(case_id: str) -> None:
    """The test's other half: the same conversation through the Jinja path (`common_chat_templates_apply` with
    use_jinja, our `generate`), against `expected_output_jinja` (or `expected_output` where the test leaves it
    empty: both paths agree)."""
    case = CASES[case_id]
    messages = [{"role": r, "content": c} for r, c in CPP_TEST["conversation"] + case["extra_conversation"]]
    want = case["expected_output_jinja"] or case["expected_output"]
    try:
        got = generate(case["template_str"], {"messages": messages, "add_generation_prompt": True}).prompt
    except AutoparserError as e:
        RATCHET.check(f"jinja:{case_id}", f"{type(e).__name__}: {e}")
        return
    failure = None if got == want else _first_difference(want, got)
    tokens = [t for t in (case["bos_token"], case["eos_token"]) if t]
    if failure and tokens:
        # generate() renders with empty BOS/EOS tokens (a request carries none); the C++ test sets the case's.
        # That must be the whole difference, as the ratchet says: anything else fails here, listed or not.
        stripped = want
        for token in tokens:
            stripped = stripped.replace(token, "")
        assert got == stripped, f"beyond the missing tokens {tokens}: {_first_difference(stripped, got)}"
        failure = f"rendered without the tokens {tokens}: {failure}"
    RATCHET.check(f"jinja:{case_id}", failure)


def test_invalid_template_is_rejected() -> None:
    invalid = CPP_TEST["invalid_template"]
    assert llm_chat_detect_template(invalid) is LlmChatTemplate.UNKNOWN
    with pytest.raises(UnknownBuiltinTemplateError) as err:
        llama_chat_apply_template(invalid, _chat(CPP_TEST["conversation"]), True)
    assert "\n" not in str(err.value) and repr(invalid) in str(err.value) and "--jinja" in str(err.value)


@pytest.mark.parametrize("name", REFERENCE["builtin_templates"])
def test_prompt_by_name(name: str) -> None:
    """Each built-in name renders every probe conversation exactly as libllama does (the name goes through
    detection, which takes a name before any heuristic)."""
    got = [llama_chat_apply_template(name, chat, add_ass) for chat, add_ass in PROBES]
    want = REFERENCE["by_name"][name]
    failures = [f"probe {i}: {_first_difference(w, g)}" for i, (w, g) in enumerate(zip(want, got, strict=True))
                if w != g]
    RATCHET.check(f"name:{name}", "; ".join(failures) or None)


def test_corpus_detection_and_prompts() -> None:
    """For every corpus template, what llama.cpp's legacy path does with its text: rejects it, or renders the
    probes as the format we detect renders them (same prompts, digest compared)."""
    corpus = {e.name: e for e in Corpus.load().entries}
    results: dict[str, str | None] = {}
    for name, want in REFERENCE["corpus"].items():
        entry = corpus.get(name)
        if entry is None:
            results[f"corpus:{name}"] = "no longer in the corpus: run tools/port_builtin_cases.py"
            continue
        text = entry.read_text()
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != want["sha256"]:
            results[f"corpus:{name}"] = "template changed since the reference: run tools/port_builtin_cases.py"
            continue
        results[f"corpus:{name}"] = _corpus_failure(text, want)
    assert len(results) > 900  # the whole corpus, not a stale fragment of it
    RATCHET.check_many(results)


def _corpus_failure(text: str, want: dict[str, Any]) -> str | None:
    got = detect_builtin(text)
    if want["rejected"] or not got.supported:
        return None if want["rejected"] == (not got.supported) else \
            f"llama.cpp {'rejects' if want['rejected'] else 'renders'} it, we detect {got.label}"
    prompts = [llm_chat_apply_template(got.template, chat, add_ass) for chat, add_ass in PROBES]
    if _prompts_digest(prompts) != want["prompts_sha256"]:
        return f"we detect {got.label}, whose prompts differ from llama.cpp's ({want['builtin'] or 'no name'})"
    return None


def test_corpus_reference_covers_the_corpus() -> None:
    """A template added to the corpus without re-running the port would go unchecked: name it."""
    missing = sorted(set(Corpus.load().names()) - set(REFERENCE["corpus"]))
    assert not missing, f"not in tests/data/builtin/reference.json (run tools/port_builtin_cases.py): {missing}"


def test_ratchet_names_existing_cases() -> None:
    RATCHET.check_known([f"case:{c}" for c in CASES] + [f"detect:{c}" for c in CASES]
                        + [f"jinja:{c}" for c in JINJA_CASES]
                        + [f"name:{n}" for n in REFERENCE["builtin_templates"]]
                        + [f"corpus:{n}" for n in REFERENCE["corpus"]])


# --- the API's edges ----------------------------------------------------------------------------------------------

def test_unknown_name_is_one_precise_line() -> None:
    with pytest.raises(UnknownBuiltinTemplateError) as err:
        llm_chat_template_from_str("chatml2")
    message = str(err.value)
    assert "\n" not in message and message.startswith("'chatml2' is not a llama.cpp built-in chat template")
    assert "chatml, " in message  # the known names follow, so the fix is in the message


def test_detection_order_decides_between_overlapping_markers() -> None:
    # Phi-4 and SmolVLM templates contain ChatML's opener: the more specific marker must win
    assert llm_chat_detect_template("<|im_start|>x<|im_sep|>") is LlmChatTemplate.PHI_4
    assert llm_chat_detect_template("<|im_start|><end_of_utterance>") is LlmChatTemplate.SMOLVLM
    # a text that starts with "mistral" is a Mistral/llama2 family template even without [INST]
    assert llm_chat_detect_template("mistral-ish") is LlmChatTemplate.LLAMA_2
    # DOTS1 is only ever detected: it has no name, so it is labelled by its C++ enumerator
    dots = detect_builtin("{{ '<|endofuserprompt|>' }}")
    assert (dots.name, dots.label, dots.supported) == (None, "LLM_CHAT_TEMPLATE_DOTS1", True)


def test_text_after_a_nul_is_not_seen() -> None:
    # llama.cpp's C API takes the template and the messages as C strings
    assert detect_builtin("x\0<|im_start|>").label == "none"
    chat = [LlamaChatMessage("user", "Hi\0 hidden")]
    assert llama_chat_apply_template("chatml", chat, False) == "<|im_start|>user\nHi<|im_end|>\n"


def test_none_is_chatml() -> None:
    chat = [LlamaChatMessage("user", "Hi")]
    assert llama_chat_apply_template(None, chat) == llama_chat_apply_template("chatml", chat)


def test_openai_messages_as_the_legacy_path_passes_them() -> None:
    conv = {"messages": [
        {"role": "system", "content": None},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
                                     {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "ok", "tool_calls": []},
    ]}
    assert messages_from_openai(conv) == (LlamaChatMessage("system", ""), LlamaChatMessage("user", "a\nb"),
                                          LlamaChatMessage("assistant", "ok"))
    assert messages_from_openai(conv["messages"]) == messages_from_openai(conv)
    for bad, needle in [({"msgs": []}, "a conversation is a JSON list"), ([{"content": "x"}], "message 0"),
                        ([{"role": "user", "content": 3}], "message 0: content")]:
        with pytest.raises(AutoparserError, match=needle):
            messages_from_openai(bad)
