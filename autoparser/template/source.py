"""A chat template as loaded from a file: a Jinja text file, or a GGUF model file's header.

`load_template_file(path)` reads a local file; `autoparser.load_template` (corpus/source.py), the one resolver of
the library and the command line, adds hub repos and corpus names and uses this for every local file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoparser.errors import AutoparserError, TemplateError, read_text_input
from autoparser.template.gguf import gguf_templates, looks_like_gguf, read_gguf_file

__all__ = ["TemplateSource", "load_template_file"]


@dataclass(frozen=True)
class TemplateSource:
    """One chat template and where it came from. `name` names it in messages (the path, `path#variant`,
    `hf://org/name#variant`); `variant` is the named template chosen where the origin holds several ("default",
    "tool_use", ...; None for a template file); `bos_token` / `eos_token` are the special tokens' text llama.cpp
    would render it with, when the origin says (a GGUF's vocabulary), else None."""

    source: str
    name: str
    variant: str | None = None
    bos_token: str | None = None
    eos_token: str | None = None


def load_template_file(path: str | Path, *, variant: str | None = None) -> TemplateSource:
    """The template in a local file: a GGUF (named `.gguf` or starting with its magic; only the header is
    read) gives the template llama.cpp would use, or the named `variant`; any other file is the template's text.
    TemplateError (GGUFError for a GGUF) with a one-line reason when it cannot be read."""
    name = str(path)
    if looks_like_gguf(path):
        templates = gguf_templates(read_gguf_file(path), name=name)
        chosen, source = templates.select(variant, name)
        return TemplateSource(source, name if chosen == "default" else f"{name}#{chosen}", chosen,
                              templates.bos_token, templates.eos_token)
    if variant is not None:
        raise TemplateError(f"{name}: a template file holds one template; the variant {variant!r} can only be "
                            "chosen in a GGUF file or a hub repo")
    try:
        return TemplateSource(read_text_input(name, "template"), name)
    except AutoparserError as e:  # (read_text_input's error is the base class: a template input is a template's)
        raise TemplateError(str(e)) from None
