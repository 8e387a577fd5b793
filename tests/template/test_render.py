"""Unit tests of the guarded, transformers-compatible template renderer."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from autoparser.errors import TemplateError
from autoparser.template.render import ChatTemplate, normalize_source

USER = [{"role": "user", "content": "Hi"}]


def render(src: str, messages: list[dict[str, object]] | None = None, **kw: object) -> str:
    return ChatTemplate(src).render(messages if messages is not None else USER, **kw)  # type: ignore[arg-type]


def test_normalize_source_matches_cpp_rules() -> None:
    assert normalize_source("a\r\nb\rc\n\n") == "a\nb\nc\n"
    assert normalize_source("x") == "x"
    assert normalize_source("x\n") == "x"


def test_trailing_newline_dropped_once_like_jinja2_and_cpp() -> None:
    assert render("A\n") == "A"
    assert render("A\n\n") == "A\n"
    assert render("A\r\n\r\n") == "A\n"
    assert ChatTemplate("A\r\nB\n").source == "A\nB"


def test_trim_and_lstrip_blocks() -> None:
    assert render("  {% if true %}\nX\n  {% endif %}\nY") == "X\nY"


def test_loopcontrols() -> None:
    assert render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "012"


def test_generation_block_renders_body() -> None:
    assert render("{% generation %}G{{ 1 }}{% endgeneration %}") == "G1"


def test_tojson_like_transformers() -> None:
    value = {"b": "é<>&", "a": [1, 2]}
    assert render("{{ v | tojson }}", v=value) == json.dumps(value, ensure_ascii=False)
    assert render("{{ v | tojson(indent=2) }}", v=value) == json.dumps(value, ensure_ascii=False, indent=2)
    assert render("{{ v | tojson(separators=(',', ':')) }}", v=value) == '{"b":"é<>&","a":[1,2]}'
    assert render("{{ v | tojson(sort_keys=true) }}", v=value) == '{"a": [1, 2], "b": "é<>&"}'
    assert render("{{ v | tojson(ensure_ascii=true) }}", v="é") == '"\\u00e9"'


def test_raise_exception_carries_message() -> None:
    with pytest.raises(TemplateError, match="System role not supported"):
        render("{{ raise_exception('System role not supported') }}")


def test_strftime_now_uses_injected_clock() -> None:
    t = ChatTemplate("{{ strftime_now('%Y-%m-%d %H:%M') }}")
    assert t.render(USER, now=datetime(2024, 7, 26, 13, 5)) == "2024-07-26 13:05"
    before = datetime.now().replace(second=0, microsecond=0)
    got = datetime.strptime(t.render(USER), "%Y-%m-%d %H:%M")  # default: the real local clock
    assert before <= got <= datetime.now()


def test_context_transformers_default() -> None:
    t = ChatTemplate(
        "{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}|{{ bos_token }}|"
        "{{ enable_thinking is defined }}|{{ messages[0].thinking }}|{{ foo }}"
    )
    msgs = [{"role": "assistant", "content": "x", "reasoning_content": "R"}]
    assert t.render(msgs, bos_token="<s>", foo="bar") == "False|True|True|<s>|False|R|bar"
    assert t.render(msgs, enable_thinking=False).split("|")[4] == "True"


def test_context_cpp() -> None:
    t = ChatTemplate(
        "{{ add_generation_prompt is defined }}|{{ tools is defined }}|{{ enable_thinking }}|"
        "{{ messages[0].thinking is defined }}|{{ preserve_thinking }}|{{ clear_thinking }}|{{ reasoning_strength }}"
    )
    msgs = [{"role": "assistant", "content": "x", "reasoning_content": "R"}]
    out = t.render(msgs, cpp_context=True, tools=[], extra_context={"preserve_reasoning": True,
                                                                     "reasoning_effort": "low"})
    assert out == "False|False|True|False|True|False|low"
    out = t.render(msgs, cpp_context=True, tools=[{"type": "function"}], add_generation_prompt=True,
                   enable_thinking=False)
    assert out.split("|")[:3] == ["True", "True", "False"]


def test_cpp_add_bos_eos_strip() -> None:
    t = ChatTemplate("{{ bos_token }}X{{ eos_token }}")
    assert t.render(USER, bos_token="<s>", eos_token="</s>", cpp_context=True, add_bos=True, add_eos=True) == "X"
    assert t.render(USER, bos_token="<s>", eos_token="</s>") == "<s>X</s>"


def test_generation_prompt_suffix() -> None:
    t = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                     "{% if add_generation_prompt %}<assistant>{% endif %}")
    assert t.generation_prompt(USER) == "<assistant>"
    # A common prefix ending inside a code point: the C++ compares bytes (é = c3 a9, ê = c3 aa).
    t2 = ChatTemplate("{% if add_generation_prompt %}ê{% else %}é{% endif %}")
    assert t2.generation_prompt(USER) == b"\xaa".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    "src",
    [
        "{{ messages.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ raise_exception.__globals__ }}",
        "{{ messages.append(1) }}",
        "{% set ns = namespace() %}{% set ns._x = 1 %}",
        "{{ dict.__call__.__globals__ }}",
    ],
)
def test_sandbox_blocks_escapes(src: str) -> None:
    try:
        out = render(src)
    except TemplateError:
        return
    assert "class" not in out and "module" not in out and "function" not in out, out


def test_sandbox_dunder_attribute_is_undefined_or_error() -> None:
    with pytest.raises(TemplateError):
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}")


def test_range_is_bounded() -> None:
    with pytest.raises(TemplateError, match="range"):
        render("{% for i in range(10**9) %}{% endfor %}")


def test_infinite_loop_hits_time_limit() -> None:
    t = ChatTemplate(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}"
        "{% endfor %}{% endfor %}{% endfor %}",
        time_limit=0.5,
    )
    start = time.monotonic()
    with pytest.raises(TemplateError, match="time limit"):
        t.render(USER)
    assert time.monotonic() - start < 5


def test_recursive_macro_explosion_hits_a_guard() -> None:
    t = ChatTemplate(
        "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% else %}x{% endif %}{% endmacro %}{{ f(60) }}",
        time_limit=0.5,
    )
    with pytest.raises(TemplateError):
        t.render(USER)


def test_string_explosion_hits_size_guard() -> None:
    t = ChatTemplate(
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        max_output=1_000_000,
    )
    with pytest.raises(TemplateError, match="limit"):
        t.render(USER)
    with pytest.raises(TemplateError, match="limit"):
        ChatTemplate("{{ 'x' * 100000000 }}", max_output=1_000_000).render(USER)


def test_output_size_guard() -> None:
    t = ChatTemplate("{% for i in range(100000) %}{{ 'abcdefghij' }}{% endfor %}", max_output=100_000)
    with pytest.raises(TemplateError, match="output"):
        t.render(USER)
    assert len(ChatTemplate("{% for i in range(1000) %}ab{% endfor %}", max_output=2000).render(USER)) == 2000


def test_syntax_error_reports_line() -> None:
    with pytest.raises(TemplateError, match=r"line 3"):
        ChatTemplate("a\nb\n{% if x %}\n", name="bad.jinja")
    with pytest.raises(TemplateError, match=r"bad\.jinja"):
        ChatTemplate("{{ x | no_such_filter }}", name="bad.jinja").render(USER)


def test_runtime_python_error_is_template_error() -> None:
    with pytest.raises(TemplateError):
        render("{{ 1 / 0 }}")
    with pytest.raises(TemplateError):
        render("{{ messages[0].content + 1 }}")


def test_immutable() -> None:
    t = ChatTemplate("x")
    with pytest.raises(AttributeError):
        t.source = "y"  # type: ignore[misc]


def test_invalid_escape_in_a_string_literal_is_not_a_syntax_error() -> None:
    # Runs under filterwarnings=error: jinja2 alone would raise TemplateSyntaxError("invalid escape sequence").
    from autoparser import generate
    from autoparser.template.caps import template_caps

    source = "{%- set pattern = '\\s+' -%}{% for m in messages %}{{ m.content }}{% endfor %}[{{ pattern }}]"
    tmpl = ChatTemplate(source)
    assert tmpl.render([{"role": "user", "content": "hi"}]) == "hi[\\s+]"
    assert template_caps(tmpl).supports_system_role is not None
    assert generate(source, {"messages": [{"role": "user", "content": "hi"}]}).prompt == "hi[\\s+]"
