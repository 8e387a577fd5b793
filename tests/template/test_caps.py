"""Capability probing equals the C++ `caps` record of every analysed seed, package and hub template."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from autoparser.errors import TemplateError
from autoparser.template.caps import TemplateCaps, template_caps

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CORPUS = ROOT / "corpus"
RATCHET_FILE = DATA / "ratchet" / "caps.json"

# analysis file -> the seed folder its `template` names live in (as written in the manifest's origins)
SOURCES = {
    "analysis.jsonl": "templates",
    "analysis_packages.jsonl": "packages",
    "analysis_hub.jsonl": "hub",
}


@cache
def _origins() -> dict[str, Path]:
    manifest_path = CORPUS / "manifest.json"
    if not manifest_path.exists():
        return {}
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    index: dict[str, Path] = {}
    for entry in manifest.get("templates", []):
        for origin in entry.get("origins", []):
            index[origin] = CORPUS / entry["file"]
    return index


def seed_template(kind: str, file: str) -> str:
    """Source of the corpus template that seed file `<kind>/<file>` became (via corpus/manifest.json)."""
    origin = f"seed:{kind}/{file}"
    path = _origins().get(origin)
    if path is None:
        pytest.fail(f"{origin} is not in corpus/manifest.json (is the corpus populated?)")
    return path.read_bytes().decode("utf-8")


def _records() -> list[Any]:
    params = []
    for data_file, kind in SOURCES.items():
        for line in (DATA / data_file).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if "error" in record:
                continue  # the C++ could not analyse it: no caps to compare
            params.append(pytest.param(kind, record, id=f"{kind}/{record['template']}"))
    return params


def _ratchet() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(RATCHET_FILE.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.corpus
@pytest.mark.parametrize(("kind", "record"), _records())
def test_caps_match_cpp(kind: str, record: dict[str, Any]) -> None:
    case_id = f"{kind}/{record['template']}"
    source = seed_template(kind, record["template"])
    got = template_caps(source, record["template"]).to_dict()
    expected = record["caps"]
    assert set(got) == set(expected)
    if case_id in _ratchet():
        assert got != expected, f"{case_id} now matches the C++: remove from ratchet"
        return
    diff = {k: {"ours": got[k], "cpp": v} for k, v in expected.items() if got[k] != v}
    assert not diff, diff


def test_ratchet_entries_exist() -> None:
    known = {p.id for p in _records()}
    stale = sorted(set(_ratchet()) - known)
    assert not stale, f"ratchet names unknown cases: {stale}"


def test_defaults_and_field_names() -> None:
    caps = TemplateCaps()
    assert caps.to_dict() == {
        "supports_tools": True,
        "supports_tool_calls": True,
        "supports_system_role": True,
        "supports_parallel_tool_calls": True,
        "supports_string_content": True,
        "supports_typed_content": False,
        "supports_object_arguments": False,
        "supports_preserve_reasoning": False,
        "supports_reasoning_effort": False,
    }


def test_plain_template_without_tools() -> None:
    src = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    caps = template_caps(src)
    assert caps.supports_system_role and caps.supports_string_content
    assert not caps.supports_tools and not caps.supports_tool_calls and not caps.supports_parallel_tool_calls
    assert not caps.supports_typed_content and not caps.supports_object_arguments


def test_typed_content_and_tools_detected() -> None:
    src = (
        "{% if tools %}{{ tools | tojson }}{% endif %}"
        "{% for m in messages %}"
        "{% if m.content is string %}{{ m.content }}{% else %}"
        "{% for part in m.content %}{{ part.text }}{% endfor %}{% endif %}"
        "{% for tc in m.tool_calls or [] %}{{ tc.function.name }}{{ tc.function.arguments | tojson }}{% endfor %}"
        "{% endfor %}"
        "{% if reasoning_effort %}effort={{ reasoning_effort }}{% endif %}"
    )
    caps = template_caps(src)
    assert caps.supports_typed_content and caps.supports_string_content
    assert caps.supports_tools and caps.supports_tool_calls and caps.supports_parallel_tool_calls
    assert caps.supports_object_arguments
    assert caps.supports_reasoning_effort
    assert not caps.supports_preserve_reasoning


@pytest.mark.parametrize(("loop", "object_arguments"), [
    ("{% for k, v in tc.function.arguments.items() %}{{ k }}={{ v }}{% endfor %}", True),
    ("{% for v in tc.function.arguments.values() %}{{ v }}{% endfor %}", True),
    # keys alone never read the value
    ("{% for k in tc.function.arguments %}{{ k }}{% endfor %}", False),
])
def test_a_loop_variable_printed_marks_the_argument_used(loop: str, object_arguments: bool) -> None:
    # The C++ engine marks a value used at every lookup of the name a loop binds it to (vLLM's functiongemma
    # template prints its arguments this way; the C++ then finds object arguments, and so must we).
    src = "{% for m in messages %}{% for tc in m.tool_calls or [] %}" + loop + "{% endfor %}{% endfor %}"
    assert template_caps(src).supports_object_arguments is object_arguments


def test_system_role_rejected_and_preserved_reasoning() -> None:
    src = (
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
        "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}"
    )
    caps = template_caps(src)
    assert not caps.supports_system_role
    assert caps.supports_preserve_reasoning


def test_syntax_error_raises_template_error() -> None:
    with pytest.raises(TemplateError, match="line 2"):
        template_caps("ok\n{% if %}")


def test_normalize_messages_for_content_caps() -> None:
    from autoparser.template.caps import normalize_messages

    parts = [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
        {"type": "media_marker", "text": "<img>"},
        {"type": "text", "text": "c"},
        {"type": "image_url", "image_url": {"url": "x"}},
    ]
    msgs = [{"role": "user", "content": parts}, {"role": "assistant", "content": "s"}]
    string_only = TemplateCaps()
    assert normalize_messages(msgs, string_only) == [
        {"role": "user", "content": "a\nb<img>c"},
        {"role": "assistant", "content": "s"},
    ]
    typed_only = TemplateCaps(supports_string_content=False, supports_typed_content=True)
    assert normalize_messages(msgs, typed_only)[1] == {"role": "assistant", "content": [{"type": "text", "text": "s"}]}
    assert normalize_messages(msgs, typed_only)[0] is msgs[0]
    both = TemplateCaps(supports_typed_content=True)
    assert normalize_messages(msgs, both) is msgs


def test_join_content_parts_reads_a_request_with_coerce_text() -> None:
    from types import MappingProxyType

    from autoparser.template.caps import join_content_parts

    # As JSON (the analysis' renders): dict parts only, a text that is not a string adds nothing. As the chat
    # layer reads a request's parts: any mapping is a part, its text written with str().
    parts = [{"type": "text", "text": 5}, MappingProxyType({"type": "text", "text": "b"})]
    assert join_content_parts(parts) == ""
    assert join_content_parts(parts, coerce_text=True) == "5\nb"


@pytest.mark.parametrize(
    ("src", "why"),
    [
        # C++ bind_parameters: a parameter past the argument count gets its default even if passed by keyword,
        # and a missing one without default raises.
        ("{% macro f(a, b, c) %}{{ a }}{% endmacro %}{% for m in messages %}{{ f(m.content, c=1) }}{% endfor %}",
         "macro binding"),
        # C++ reads selectattr(a, b) as test `a` with argument `b`: unknown test 'text' raises.
        ("{% for m in messages %}{{ m.content | selectattr('text', 'defined') | list | length }}{% endfor %}",
         "selectattr"),
        # C++ objects accept only a few filters; `first` on a message raises.
        ("{% for m in messages %}{{ m | first }}{{ m.content }}{% endfor %}", "object filter"),
    ],
)
def test_cpp_engine_failures_are_emulated(src: str, why: str) -> None:
    # The first probe fails in the C++ engine, so string content counts as unsupported there.
    assert not template_caps(src).supports_string_content, why


def test_undefined_builtins_and_string_concat_are_lenient_like_cpp() -> None:
    src = "{% for m in messages %}{{ 'T: ' + m.title.strip() + m.content + missing }}{% endfor %}"
    caps = template_caps(src)
    assert caps.supports_string_content and caps.supports_system_role
