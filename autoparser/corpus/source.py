"""Where a command's template comes from: the one resolver of a TEMPLATE argument for every command.

A file (a Jinja template, or a GGUF whose header holds the templates: template/source.py).
"""

from __future__ import annotations

from autoparser.template.source import TemplateSource, load_template

__all__ = ["resolve_template"]


def resolve_template(argument: str, *, variant: str | None = None) -> TemplateSource:
    """The template a command argument names, with the named `variant` where its origin holds several."""
    return load_template(argument, variant=variant)
