"""Where a template comes from: `load_template`, the one resolver of a TEMPLATE argument, for every command and
for the library (`autoparser.load_template("Qwen__Qwen3-0.6B")` is what `autoparser analyze Qwen__Qwen3-0.6B` reads).

- a file: a Jinja template, or a GGUF whose header holds the templates (template/source.load_template_file);
- `hf://org/name` (`hf://org/name#tool_use` for a named template, as the manifest's origins say
  `hub:org/name#tool_use`), or a bare `org/name` when no such file exists: the repo's template, fetched by the
  corpus fetcher (corpus/fetcher.py: the hub cache, HF_ENDPOINT, HF_HUB_OFFLINE and HF_TOKEN apply, and its
  one-line errors for gated or missing repos);
- a corpus template's name (`Qwen__Qwen3-0.6B`), when no such file exists: the template of the corpus
  `Corpus.load()` finds (as `peg_tester` resolves it).
"""

from __future__ import annotations

import re
from pathlib import Path

from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.fetcher import HubFetcher
from autoparser.errors import CorpusError, TemplateError
from autoparser.template.source import TemplateSource, load_template_file

__all__ = ["HUB_SCHEME", "load_template"]

HUB_SCHEME = "hf://"
# A hub repo id, as the hub spells them: one slash, letters, digits, `-`, `_`, `.` (and an optional #variant).
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(?:#[^#\s]+)?")


def load_template(path: str | Path, *, variant: str | None = None, fetcher: HubFetcher | None = None
                  ) -> TemplateSource:
    """The template `path` names (a file, a hub repo or a corpus name, as above), with the named `variant` where
    its origin holds several; a one-line TemplateError (GGUFError for a GGUF), or HubError, when there is none.
    `fetcher` reads the hub (default: a HubFetcher configured from the environment)."""
    argument = str(path)
    if argument.startswith(HUB_SCHEME):
        return _from_hub(argument.removeprefix(HUB_SCHEME), variant, fetcher)
    if not Path(argument).exists() and _REPO_ID.fullmatch(argument):
        return _from_hub(argument, variant, fetcher)
    if not Path(argument).exists() and variant is None and _CORPUS_NAME.fullmatch(argument):
        entry = _corpus_entry(argument)
        if entry is None:
            raise TemplateError(f"cannot read template {argument}: no such file, nor a corpus template of that name")
        return TemplateSource(entry.read_text(), entry.name)
    return load_template_file(argument, variant=variant)


# A corpus name: no path separator, no suffix (the corpus names its templates `org__model`).
_CORPUS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _corpus_entry(name: str) -> CorpusEntry | None:
    """The corpus template called `name`, or None (then the argument is reported as a missing file)."""
    try:
        return Corpus.load().by_name(name)
    except CorpusError:
        return None


def _from_hub(spec: str, variant: str | None, fetcher: HubFetcher | None) -> TemplateSource:
    repo_id, _, fragment = spec.partition("#")
    if not _REPO_ID.fullmatch(repo_id):
        raise TemplateError(f"{HUB_SCHEME}{spec}: not a hub repo id (org/name)")
    if fragment and variant and fragment != variant:
        raise TemplateError(f"{HUB_SCHEME}{spec}: names the template {fragment!r}, --variant {variant!r}")
    chosen = (fetcher or HubFetcher()).fetch_repo(repo_id).select(fragment or variant)
    name = HUB_SCHEME + repo_id + ("" if chosen.template_name == "default" else f"#{chosen.template_name}")
    return TemplateSource(chosen.data.decode("utf-8", "surrogateescape"), name, chosen.template_name)
