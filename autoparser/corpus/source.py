"""Where a command's template comes from: the one resolver of a TEMPLATE argument for every command.

- a file: a Jinja template, or a GGUF whose header holds the templates (template/source.load_template);
- `hf://org/name` (`hf://org/name#tool_use` for a named template, as the manifest's origins say
  `hub:org/name#tool_use`), or a bare `org/name` when no such file exists: the repo's template, fetched by the
  corpus fetcher (corpus/fetcher.py: the hub cache, HF_ENDPOINT, HF_HUB_OFFLINE and HF_TOKEN apply, and its
  one-line errors for gated or missing repos).
"""

from __future__ import annotations

import re
from pathlib import Path

from autoparser.corpus.fetcher import HubFetcher
from autoparser.errors import TemplateError
from autoparser.template.source import TemplateSource, load_template

__all__ = ["HUB_SCHEME", "resolve_template"]

HUB_SCHEME = "hf://"
# A hub repo id, as the hub spells them: one slash, letters, digits, `-`, `_`, `.` (and an optional #variant).
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(?:#[^#\s]+)?")


def resolve_template(argument: str, *, variant: str | None = None, fetcher: HubFetcher | None = None
                     ) -> TemplateSource:
    """The template a command argument names, with the named `variant` where its origin holds several.
    `fetcher` reads the hub (default: a HubFetcher configured from the environment)."""
    if argument.startswith(HUB_SCHEME):
        return _from_hub(argument.removeprefix(HUB_SCHEME), variant, fetcher)
    if not Path(argument).exists() and _REPO_ID.fullmatch(argument):
        return _from_hub(argument, variant, fetcher)
    return load_template(argument, variant=variant)


def _from_hub(spec: str, variant: str | None, fetcher: HubFetcher | None) -> TemplateSource:
    repo_id, _, fragment = spec.partition("#")
    if not _REPO_ID.fullmatch(repo_id):
        raise TemplateError(f"{HUB_SCHEME}{spec}: not a hub repo id (org/name)")
    if fragment and variant and fragment != variant:
        raise TemplateError(f"{HUB_SCHEME}{spec}: names the template {fragment!r}, --variant {variant!r}")
    chosen = (fetcher or HubFetcher()).fetch_repo(repo_id).select(fragment or variant)
    name = HUB_SCHEME + repo_id + ("" if chosen.template_name == "default" else f"#{chosen.template_name}")
    return TemplateSource(chosen.data.decode("utf-8", "surrogateescape"), name, chosen.template_name)
