"""Project-wide pytest configuration: repository paths and the hub-safety environment.

Contributor fixtures (peg_tester, the GBNF oracle, snapshot extensions) live in the installed pytest plugin
`autoparser.testing.plugin`, so they also work from other checkouts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Tests never reach the real hub: huggingface_hub reads these when it is imported.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def test_data() -> Path:
    return ROOT / "tests" / "data"


GgufWriter = Callable[..., Path]


def write_gguf(path: Path, *, templates: Mapping[str, str] | None = None,
               tokens: Sequence[str] = ("<unk>", "<s>", "</s>", "hello"), bos: int | None = 1, eos: int | None = 2,
               tensor_bytes: int = 0, big_endian: bool = False) -> Path:
    """A GGUF file written by llama.cpp's own writer (the `gguf` package's GGUFWriter), the way its converter
    writes a model: templates as `add_chat_template` gets them from a tokenizer_config ("default" and named
    ones), a vocabulary with bos/eos ids, and `tensor_bytes` of tensor data after the header."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(path, "llama", endianess=gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE)
    w.add_token_list(list(tokens))
    w.add_token_types([gguf.TokenType.CONTROL if t.startswith("<") else gguf.TokenType.NORMAL for t in tokens])
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if templates:
        w.add_chat_template([{"name": k, "template": v} for k, v in templates.items()])
    if tensor_bytes:
        w.add_tensor("token_embd.weight", np.ones(tensor_bytes // 4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def gguf_writer() -> GgufWriter:
    """`gguf_writer(path, templates={...}, ...)`: write a small GGUF model file (see write_gguf)."""
    return write_gguf


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The corpus-wide tests of one template run one after the other, whichever file they are in: each process
    keeps a template's analysis, format and renders in small per-template caches (params/generator.py,
    corpus/roundtrip.py), which a file-by-file order over ~1 000 templates evicts before the next file asks again.
    Stable: the tests of one template keep their files' order, and pytest-xdist, which hands out consecutive tests
    to a worker, gives a template's tests mostly to one. (A test belongs to a template when its one
    parametrisation id names it: its corpus name, its file, or its seed origin as the golden sets name it,
    `templates/X.jinja`, `llamacpp:X.jinja`.)"""
    from autoparser.corpus import Corpus

    aliases: dict[str, str] = {}
    for entry in Corpus.load().entries:
        aliases[entry.name] = aliases[f"{entry.name}.jinja"] = entry.name
        for origin in entry.origins:
            folder, _, file = origin.removeprefix("seed:").partition("/")
            if origin.startswith("seed:") and file:
                aliases[f"{folder}/{file}"] = entry.name
                aliases[f"{'llamacpp' if folder == 'templates' else folder}:{file}"] = entry.name

    first: dict[str, int] = {}
    keyed = []
    for i, item in enumerate(items):
        callspec = getattr(item, "callspec", None)
        name = aliases.get(callspec.id) if callspec is not None else None
        # (a template's tests go where its first one was; the other tests keep their places)
        keyed.append((first.setdefault(name, i) if name is not None else i, i, item))
    items[:] = [item for _, _, item in sorted(keyed, key=lambda k: (k[0], k[1]))]
