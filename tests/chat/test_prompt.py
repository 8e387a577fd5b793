"""The prompt generate() renders: llama.cpp's context, and transformers' where a template fails in llama.cpp's.

llama.cpp leaves `tools` undefined in a request without tools; transformers passes None. A template that tests
`tools is none` and otherwise prints `tools | tojson` (OLMo 3, DeepHat) fails in llama.cpp's context for every
request without tools: llama.cpp answers with an error, we render what transformers renders and say so in
`ChatParams.template_context`. Everywhere else the prompt stays llama.cpp's.
"""

from __future__ import annotations

import pytest

from autoparser import generate
from autoparser.errors import TemplateError

USER = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}

# OLMo 3's shape: `tools is none`, else the tools as JSON
NONE_OR_JSON = ("{%- if tools is none %}[no tools]{% else %}[{{ tools | tojson }}]{% endif %}"
                "{%- for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                "{%- if add_generation_prompt %}<assistant>{% endif %}")


def test_a_template_failing_on_undefined_tools_renders_as_transformers_renders_it() -> None:
    params = generate(NONE_OR_JSON, {"messages": USER})
    assert params.template_context == "transformers"
    assert params.prompt == "[no tools]<user>Hi<assistant>"
    assert params.generation_prompt == "<assistant>"
    assert params.parse("Hello").content == "Hello"


def test_with_tools_the_same_template_renders_in_llama_cpp_context() -> None:
    params = generate(NONE_OR_JSON, {"messages": USER, "tools": [TOOL]})
    assert params.template_context == "llama.cpp"
    assert params.prompt.startswith('[[{"type": "function"')


def test_a_template_both_contexts_render_keeps_llama_cpp_semantics() -> None:
    # `tools is defined` tells the two contexts apart: llama.cpp leaves `tools` undefined without tools
    source = "{% if tools is defined %}[tools]{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    params = generate(source, {"messages": USER})
    assert params.template_context == "llama.cpp"
    assert params.prompt == "Hi"


def test_a_template_failing_in_both_contexts_raises_llama_cpp_contexts_error() -> None:
    source = ("{% if tools is not defined %}{{ raise_exception('tools undefined') }}"
              "{% elif tools is none %}{{ raise_exception('tools none') }}{% endif %}{{ tools | tojson }}")
    with pytest.raises(TemplateError, match="tools undefined"):
        generate(source, {"messages": USER})
