"""One template, compiled once per semantics: transformers' jinja2 for prompts, llama.cpp's engine (cpp.py) for
the capability probes and the analyzer. generate() compiles a new source exactly twice and probes it once."""

from __future__ import annotations

import uuid
from typing import Any

import jinja2
import pytest

from autoparser import generate
from autoparser.template import caps as caps_module
from autoparser.template.cpp import CPP_ENV
from autoparser.template.render import ChatTemplate

CHATML = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
          "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, int], list[int]]:
    compiles: dict[str, int] = {}
    probes: list[int] = []
    from_string = jinja2.Environment.from_string

    def counted(env: jinja2.Environment, source: Any, *args: Any, **kwargs: Any) -> jinja2.Template:
        key = "cpp" if env is CPP_ENV else "hf"
        compiles[key] = compiles.get(key, 0) + 1
        return from_string(env, source, *args, **kwargs)

    probe_all = caps_module._probe_all

    def counted_probe(*args: Any) -> Any:
        probes.append(1)
        return probe_all(*args)

    monkeypatch.setattr(jinja2.Environment, "from_string", counted)
    monkeypatch.setattr(caps_module, "_probe_all", counted_probe)
    return compiles, probes


def test_generate_compiles_once_per_semantics_and_probes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles, probes = _counting(monkeypatch)
    source = CHATML + "{# " + uuid.uuid4().hex + " #}"  # a source no cache has seen
    request = {"messages": [{"role": "user", "content": "hi"}]}
    params = generate(source, request)
    assert params.prompt == "<|im_start|>user\nhi<|im_end|><|im_start|>assistant"
    assert compiles == {"hf": 1, "cpp": 1}
    assert len(probes) == 1
    generate(source, dict(request, add_generation_prompt=False))
    assert compiles == {"hf": 1, "cpp": 1} and len(probes) == 1, "a second request recompiled or re-probed"


def test_a_chat_template_compiles_the_cpp_flavour_on_first_use_only(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles, _ = _counting(monkeypatch)
    tmpl = ChatTemplate(CHATML)
    assert compiles == {"hf": 1}
    assert tmpl.cpp is tmpl.cpp
    assert compiles == {"hf": 1, "cpp": 1}


@pytest.mark.parametrize(("source", "hf", "cpp"), [
    # null or undefined next to a string count as "" (runtime.cpp workaround_concat_null_with_str)
    ("{{ 'a' + none }}|{{ 'b' + missing }}", None, "a|b"),
    # a string concatenates with a number (value::as_string)
    ("{{ 'n=' + 1 }}", None, "n=1"),
    # objects and null print nothing; arrays print their items
    ("[{{ {'k': 1} }}][{{ none }}][{{ [1, 'x', [2]] }}]", "[{'k': 1}][None][[1, 'x', [2]]]", "[][][1x2]"),
    # the builtins of an undefined value answer with empty values; any other call of an undefined fails
    ("{{ missing.strip() }}.", None, "."),
    ("{{ missing.nothing() }}", None, None),
    # `selectattr` is an array builtin: the C++ has no such filter on a string
    ("{{ 'abc' | selectattr('x', 'equalto', 1) | list }}", "[]", None),
    # lists and dicts are mutable in the C++ engine
    ("{% set xs = [] %}{{ xs.append(2) or xs }}", None, "2"),
    # a loop filter tests each item in a scope of its own, and the loop variable does not leak (llama.cpp b11434,
    # common/jinja/runtime.cpp, makes that scope only around the test: the same output, one scope less per item)
    ("{% set x = 'o' %}{% for x in ['a', 'b', 'c'] if x != 'b' %}{{ x }}{{ loop.index }}{% endfor %}{{ x }}",
     "a1c2o", "a1c2o"),
])
def test_the_cpp_flavour(source: str, hf: str | None, cpp: str | None) -> None:
    """Each row is a leniency (or a strictness) of llama.cpp's engine against transformers' jinja2."""
    tmpl = ChatTemplate(source)

    def run(render: Any) -> str | None:
        try:
            return str(render())
        except Exception:
            return None

    assert run(lambda: tmpl.render([])) == hf
    assert run(lambda: "".join(tmpl.cpp.generate({}))) == cpp
