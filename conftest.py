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
