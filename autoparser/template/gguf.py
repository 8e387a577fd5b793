"""The chat templates and special tokens in a GGUF file's header, read as llama.cpp reads them.

Only the header is read: magic, version, tensor count, key/value count, then the key/value pairs; the reader
stops before the tensor infos and never touches tensor data. It reads through `read_at(offset, size)`, a
first chunk and then more, doubling, only while the header goes on, so a local file and a file on the hub
(HTTP Range requests, corpus/fetcher.py) are read by the same parser.

Why not the `gguf` package's GGUFReader (llama.cpp's own Python reader, 0.19.0): measured on a 544 MB file
with a 150k-token vocabulary (tokens, scores, types and 150k merges, as real models carry: a 6.9 MB header),
GGUFReader memory-maps the whole file and builds a numpy view for every part of every field and every tensor:
6.9 s and 900k numpy arrays before the first key can be looked up, against 0.29 s here. It needs the whole
file on disk (np.memmap of a path), so it cannot read a header from the first megabytes of a remote file, and
on a truncated file it fails with a numpy dtype error ("When changing to a larger dtype, its size must be a
divisor...") where this reader says "truncated GGUF header: the file ends at byte 1000000, inside the length
of tokenizer.ggml.tokens[63187]". The format is small (GGUF spec, ggml/docs/gguf.md), so this module reads
it directly, and the package is only a test dependency (its GGUFWriter writes the fixtures).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from autoparser.errors import GGUFError

__all__ = [
    "CHAT_TEMPLATE_KEY",
    "GGUF_MAGIC",
    "MAX_HEADER_BYTES",
    "GGUFHeader",
    "GGUFTemplates",
    "ReadAt",
    "gguf_templates",
    "looks_like_gguf",
    "read_gguf_file",
    "read_gguf_header",
]

GGUF_MAGIC = b"GGUF"
CHAT_TEMPLATE_KEY = "tokenizer.chat_template"
# A real header is a few MB (a 262k-token vocabulary with scores, types and merges is about 10 MB); anything
# past this is not a header worth reading (and a declared length of 2**60 must not make us try).
MAX_HEADER_BYTES = 256 * 1024 * 1024
FIRST_CHUNK = 1024 * 1024
_MAX_DEPTH = 4  # arrays of arrays: the spec allows them, llama.cpp writes none; bounded against hostile files

# GGUF value types (gguf_type in ggml/include/gguf.h): struct format and size of the fixed-size ones.
_STRING, _ARRAY = 8, 9
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4), 6: ("f", 4), 7: ("?", 1),
    10: ("Q", 8), 11: ("q", 8), 12: ("d", 8),
}

GGUFValue = int | float | bool | str | tuple["GGUFValue", ...]
ReadAt = Callable[[int, int], bytes]
"""`read_at(offset, size)`: up to `size` bytes from `offset`, fewer only where the file ends."""


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF header: `metadata` maps each key to its value (strings decoded as UTF-8, undecodable bytes kept
    as surrogate escapes; arrays as tuples); `size` is the byte where the key/value section ends."""

    version: int
    tensor_count: int
    metadata: Mapping[str, GGUFValue]
    size: int


@dataclass(frozen=True)
class GGUFTemplates:
    """What llama.cpp's `common_chat_templates_init` takes from a model: the chat templates by name ("default"
    for `tokenizer.chat_template`, `tool_use` for `tokenizer.chat_template.tool_use`, ...; the default first)
    and the text of the bos and eos tokens (None when the vocabulary has none)."""

    templates: Mapping[str, str]
    bos_token: str | None
    eos_token: str | None

    def select(self, variant: str | None, name: str) -> tuple[str, str]:
        """(variant name, source) of the template llama.cpp would use: `variant`, or the default, or (as
        `common_chat_templates_init` falls back) `tool_use` when there is no default. GGUFError naming the
        templates present when there is no such template."""
        if variant is None:
            for candidate in ("default", "tool_use"):
                if candidate in self.templates:
                    return candidate, self.templates[candidate]
            raise GGUFError(f"{name}: the GGUF has no default chat template (no {CHAT_TEMPLATE_KEY}); it has "
                            f"{_listing(self.templates)}: choose one with --variant")
        if variant not in self.templates:
            raise GGUFError(f"{name}: the GGUF has no chat template {variant!r}; it has {_listing(self.templates)}")
        return variant, self.templates[variant]


def _listing(templates: Mapping[str, str]) -> str:
    return ", ".join(templates) if templates else "none"


class _Cursor:
    """Sequential reads over `read_at`, fetching a first chunk and then twice as much each time it runs out."""

    def __init__(self, read_at: ReadAt, name: str, first_chunk: int, max_bytes: int) -> None:
        self.read_at = read_at
        self.name = name
        self.chunk = max(16, first_chunk)
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.pos = 0
        self.little = True

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        while len(self.buf) < end:
            if end > self.max_bytes:
                raise GGUFError(f"{self.name}: GGUF header larger than {self.max_bytes} bytes ({what} would end at "
                                f"byte {end}): not read")
            size = min(max(self.chunk, end - len(self.buf)), self.max_bytes - len(self.buf))
            data = self.read_at(len(self.buf), size)
            if not data:
                raise GGUFError(f"{self.name}: truncated GGUF header: the file ends at byte {len(self.buf)}, inside "
                                f"{what}")
            self.buf += data
            self.chunk *= 2

    def take(self, fmt: str, size: int, what: str, count: int = 1) -> tuple[object, ...]:
        self.need(size * count, what)
        order = "<" if self.little else ">"
        values = struct.unpack_from(f"{order}{count}{fmt}", self.buf, self.pos)
        self.pos += size * count
        return values

    def u32(self, what: str) -> int:
        value = self.take("I", 4, what)[0]
        assert isinstance(value, int)
        return value

    def u64(self, what: str) -> int:
        value = self.take("Q", 8, what)[0]
        assert isinstance(value, int)
        return value

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        if n > self.max_bytes:
            raise GGUFError(f"{self.name}: malformed GGUF header, or one over {self.max_bytes} bytes: {what} claims "
                            f"{n} bytes")
        self.need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", "surrogateescape")

    def value(self, vtype: int, what: str, depth: int = 0) -> GGUFValue:
        if vtype == _STRING:
            return self.string(what)
        scalar = _SCALARS.get(vtype)
        if scalar is not None:
            value = self.take(*scalar, what)[0]
            assert isinstance(value, int | float | bool)
            return value
        if vtype != _ARRAY:
            raise GGUFError(f"{self.name}: malformed GGUF header: {what} has unknown value type {vtype}")
        if depth >= _MAX_DEPTH:
            raise GGUFError(f"{self.name}: malformed GGUF header: {what} nests arrays deeper than {_MAX_DEPTH}")
        itype = self.u32(f"the item type of {what}")
        count = self.u64(f"the length of {what}")
        if count > self.max_bytes:  # every item takes at least one byte
            raise GGUFError(f"{self.name}: malformed GGUF header, or one over {self.max_bytes} bytes: {what} claims "
                            f"{count} items")
        scalar = _SCALARS.get(itype)
        if scalar is not None:  # one unpack for the whole array (token types, scores: 100k+ items)
            return tuple(self.take(scalar[0], scalar[1], what, count))  # type: ignore[arg-type]
        return tuple(self.value(itype, f"{what}[{i}]", depth + 1) for i in range(count))


def read_gguf_header(read_at: ReadAt, *, name: str, first_chunk: int = FIRST_CHUNK,
                     max_bytes: int = MAX_HEADER_BYTES) -> GGUFHeader:
    """The header of the GGUF file `read_at` reads (`name` says which in errors). GGUFError when it is not a
    GGUF file, its version is not one llama.cpp reads (2, 3), or the header is truncated or malformed."""
    cur = _Cursor(read_at, name, first_chunk, max_bytes)
    try:
        cur.need(4, "the magic")
    except GGUFError:
        raise GGUFError(f"{name}: not a GGUF file (shorter than its 4-byte magic)") from None
    magic = bytes(cur.buf[:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{name}: not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")
    cur.pos = 4
    version = cur.u32("the version")
    if version & 0xFFFF == 0 and version:  # written for the other byte order (GGUFWriter can write big-endian)
        cur.little = False
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise GGUFError(f"{name}: GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)")
    tensor_count = cur.u64("the tensor count")
    kv_count = cur.u64("the key/value count")
    if kv_count > max_bytes:  # every pair takes more than one byte
        raise GGUFError(f"{name}: malformed GGUF header, or one over {max_bytes} bytes: it claims {kv_count} keys")
    metadata: dict[str, GGUFValue] = {}
    for i in range(kv_count):
        key = cur.string(f"key {i}")
        vtype = cur.u32(f"the type of {key}")
        if key in metadata:
            raise GGUFError(f"{name}: malformed GGUF header: key {key} appears twice")
        metadata[key] = cur.value(vtype, key)
    return GGUFHeader(version, tensor_count, MappingProxyType(metadata), cur.pos)


def read_gguf_file(path: str | Path, *, first_chunk: int = FIRST_CHUNK) -> GGUFHeader:
    """The header of a local GGUF file (only the header's bytes are read)."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            def read_at(offset: int, size: int) -> bytes:
                fh.seek(offset)
                return fh.read(size)

            return read_gguf_header(read_at, name=name, first_chunk=first_chunk)
    except OSError as e:
        raise GGUFError(f"cannot read GGUF file {name}: {e.strerror or e}") from None


def looks_like_gguf(path: str | Path) -> bool:
    """Whether `path` is to be read as GGUF: named `.gguf`, or starting with the GGUF magic."""
    if str(path).lower().endswith(".gguf"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _token(header: GGUFHeader, key: str) -> str | None:
    """The text of the token whose id is under `key` (tokenizer.ggml.bos_token_id, ...), as llama.cpp's
    `common_token_to_piece(vocab, id, special=true)` gives it for the control tokens bos and eos are: the
    vocabulary entry itself. None when the model has no such token (llama.cpp then passes "")."""
    token_id = header.metadata.get(key)
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(token_id, int) or isinstance(token_id, bool) or not isinstance(tokens, tuple):
        return None
    if not 0 <= token_id < len(tokens):
        return None
    text = tokens[token_id]
    return text if isinstance(text, str) else None


def gguf_templates(header: GGUFHeader, *, name: str) -> GGUFTemplates:
    """The chat templates and bos/eos text of a GGUF header. GGUFError when it holds no chat template, or a
    template that is not UTF-8 text."""
    found: dict[str, str] = {}
    prefix = CHAT_TEMPLATE_KEY + "."
    keys = [CHAT_TEMPLATE_KEY, *sorted(k for k in header.metadata if k.startswith(prefix))]
    for key in keys:
        if key not in header.metadata:
            continue
        value = header.metadata[key]
        if not isinstance(value, str):
            raise GGUFError(f"{name}: {key} is not a string in the GGUF header")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise GGUFError(f"{name}: {key} is not UTF-8 text (byte {e.start} of it)") from None
        found["default" if key == CHAT_TEMPLATE_KEY else key.removeprefix(prefix)] = value
    if not found:
        raise GGUFError(f"{name}: the GGUF has no chat template (no {CHAT_TEMPLATE_KEY} key in its header)")
    return GGUFTemplates(MappingProxyType(found), _token(header, "tokenizer.ggml.bos_token_id"),
                         _token(header, "tokenizer.ggml.eos_token_id"))
