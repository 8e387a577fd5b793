"""vLLM's `beam` parser's grammar side, for the consumers' check of our response_template export
(autoparser/corpus/constrained.py `beam_results`): the modules that derive a structural tag from a response_template
(`vllm/parser/response_template_grammar.py` and the response-template parser it reads templates with,
`vllm/parser/chat_parsing/`), taken from vLLM's PyPI sdist. They need only `regex`; the rest of vLLM (CUDA, torch
of its own) is neither installed nor imported.

    python -m tools.vllm_beam      # downloads the sdist once, keeps the modules in the cache, prints where

The sdist comes from PyPI's file host, pinned by its sha256 (pip cannot download it: it reads an sdist's metadata
by building it, which vLLM's build cannot do without CUDA); nothing of it is committed. `tox -e consumers` runs
this first.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "0.33.0"
# PyPI's file for vllm==0.33.0's sdist (https://pypi.org/project/vllm/0.33.0/#files) and its digest.
URL = ("https://files.pythonhosted.org/packages/f7/25/aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/"
       f"vllm-{VERSION}.tar.gz")
SHA256 = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"
# What is kept: beam's grammar derivation and the parser whose templates it reads.
MODULES = ("vllm/parser/response_template_grammar.py", "vllm/parser/chat_parsing/")


def root() -> Path:
    """The folder to put on sys.path: it holds a `vllm` package of the kept modules alone."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "autoparser" / f"vllm-{VERSION}-beam"


def fetch() -> Path:
    """The modules, from the cache or downloaded once; SystemExit with the reason when they cannot be had."""
    where = root()
    if (where / MODULES[0]).is_file():
        return where
    print(f"vllm_beam: downloading the vllm=={VERSION} sdist ({URL})", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "vllm.tar.gz"
        try:
            with urllib.request.urlopen(URL, timeout=120) as r, archive.open("wb") as out:
                while chunk := r.read(1 << 20):
                    out.write(chunk)
        except OSError as e:
            raise SystemExit(f"vllm_beam: could not download the vllm=={VERSION} sdist: {e}") from e
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != SHA256:
            raise SystemExit(f"vllm_beam: the vllm=={VERSION} sdist's sha256 is {digest}, not {SHA256} (a truncated "
                             "or altered download)")
        top = f"vllm-{VERSION}/"
        with tarfile.open(archive) as t:
            members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(".py")
                       and any(m.name[len(top):].startswith(k) for k in MODULES)]
            if not any(m.name == top + MODULES[0] for m in members):
                raise SystemExit(f"vllm_beam: the vllm=={VERSION} sdist holds no {MODULES[0]}")
            staging = Path(tmp) / "tree"
            t.extractall(staging, members=members, filter="data")
        # the packages above the kept modules, empty: importing them must not import the rest of vLLM
        for package in ("vllm", "vllm/parser"):
            (staging / top / package / "__init__.py").write_text("")
        where.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / top, where)
    return where


if __name__ == "__main__":
    print(fetch())
