"""llama.cpp's own GBNF engine as a test oracle, reached in its `libllama.so` with ctypes (no model).

It is the engine we re-implement the emitter for, so it accepts exactly what llama.cpp accepts (empty
alternatives, `.`, `{m,n}`, and its parse errors). The functions are internal, mangled C++ symbols of
`libllama.so` (the ones llama.cpp's own tests/test-gbnf-validator.cpp uses), so `available()` checks every symbol
before use. The library is the one `$AUTOPARSER_LIBLLAMA` names: this project's tox builds the reference
llama.cpp once (`python -m tools.cpp_oracle`, beside the live oracle's driver, which links the same library) and
points it there. Without that variable it is the one llama-cpp-python ships (the `oracle` extra, pinned exactly at
0.3.36, whose symbols are these): a pip install for a project that uses peg_tester outside this checkout. Reading
the grammar's stack vector assumes the libstdc++/libc++ `std::vector` layout (begin, end, capacity), i.e. Linux
or macOS.

Feeding is per code point, like test-gbnf-validator: `accepts` = the whole text is a complete match,
`viable_prefix` = the text can still be extended into one, `stop` = where it stops following a text and what it
takes there.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import tempfile
import threading
from collections.abc import Iterable
from typing import Any

from autoparser.errors import GrammarError

_SYMBOLS = {
    "init": "_Z23llama_grammar_init_implPK11llama_vocabPKcS3_bPS3_mPKim",
    "accept": "_Z20llama_grammar_acceptP13llama_grammarj",
    "stacks": "_Z24llama_grammar_get_stacksP13llama_grammar",
    "free": "_Z23llama_grammar_free_implP13llama_grammar",
    "clone": "_Z24llama_grammar_clone_implRK13llama_grammar",
}

_lock = threading.Lock()
_fns: dict[str, Any] | None = None
_load_error = ""


def _load() -> dict[str, Any] | None:
    global _fns, _load_error
    if _fns is not None or _load_error:
        return _fns
    try:
        path = library()
        lib = ctypes.CDLL(str(path))
        missing = [s for s in _SYMBOLS.values() if not hasattr(lib, s)]
        if missing:
            raise OSError(f"{path} lacks {missing} (a llama.cpp whose grammar functions are these: the reference "
                          "tools/cpp_oracle builds, or llama-cpp-python 0.3.36)")
    except (ImportError, OSError) as e:
        _load_error = f"llama.cpp grammar engine unavailable: {e}"
        return None
    init = getattr(lib, _SYMBOLS["init"])
    init.restype = ctypes.c_void_p
    init.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool, ctypes.c_void_p,
                     ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    accept = getattr(lib, _SYMBOLS["accept"])
    accept.restype = None
    accept.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    stacks = getattr(lib, _SYMBOLS["stacks"])
    stacks.restype = ctypes.c_void_p
    stacks.argtypes = [ctypes.c_void_p]
    free = getattr(lib, _SYMBOLS["free"])
    free.restype = None
    free.argtypes = [ctypes.c_void_p]
    clone = getattr(lib, _SYMBOLS["clone"])
    clone.restype = ctypes.c_void_p
    clone.argtypes = [ctypes.c_void_p]
    _fns = {"init": init, "accept": accept, "stacks": stacks, "free": free, "clone": clone}
    return _fns


def library() -> pathlib.Path:
    """The libllama.so to load: `$AUTOPARSER_LIBLLAMA`, else llama-cpp-python's (ImportError or OSError saying
    which was looked for)."""
    named = os.environ.get("AUTOPARSER_LIBLLAMA")
    if named:
        if not pathlib.Path(named).is_file():
            raise OSError(f"AUTOPARSER_LIBLLAMA={named} is no file (python -m tools.cpp_oracle puts libllama.so "
                          "beside the driver it builds)")
        return pathlib.Path(named)
    try:
        import llama_cpp
    except ImportError as e:
        raise ImportError(f"{e}: install llama-cpp-python==0.3.36, or set AUTOPARSER_LIBLLAMA to a libllama.so "
                          "(autoparser's `python -m tools.cpp_oracle` builds the reference's)") from e
    return pathlib.Path(llama_cpp.__file__).parent / "lib" / "libllama.so"


def available() -> bool:
    return _load() is not None


def unavailable_reason() -> str:
    _load()
    return _load_error


def require_oracle() -> None:
    """In a test: skip when the engine is missing, but fail instead when AUTOPARSER_REQUIRE_ORACLE=1 (tox/CI)."""
    import pytest

    if available():
        return
    if os.environ.get("AUTOPARSER_REQUIRE_ORACLE") == "1":
        pytest.fail(f"{unavailable_reason()} (AUTOPARSER_REQUIRE_ORACLE=1)")
    pytest.skip(unavailable_reason())


_P64 = ctypes.POINTER(ctypes.c_uint64)


class LlamaGrammar:
    """A grammar compiled by llama.cpp. Raises GrammarError (with llama.cpp's message) if it does not parse."""

    def __init__(self, gbnf: str, root: str = "root") -> None:
        fns = _load()
        if fns is None:
            raise GrammarError(_load_error)
        self._fns = fns
        self.text = gbnf
        with _lock, tempfile.TemporaryFile() as err:
            # llama.cpp reports parse errors on stderr: capture fd 2 around the call
            saved = os.dup(2)
            try:
                os.dup2(err.fileno(), 2)
                self._g = fns["init"](None, gbnf.encode("utf-8", "surrogateescape"), root.encode(), False, None, 0,
                                      None, 0)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            err.seek(0)
            message = err.read().decode("utf-8", "replace").strip()
        if not self._g:
            raise GrammarError(f"llama.cpp cannot parse the grammar: {message or 'unknown error'}")

    def __del__(self) -> None:
        g = getattr(self, "_g", None)
        if g:
            self._fns["free"](g)
            self._g = None

    def _stack_info(self, g: int) -> tuple[int, bool]:
        outer = ctypes.cast(self._fns["stacks"](g), _P64)
        n = (outer[1] - outer[0]) // 24
        if not n:
            return 0, False
        inner = ctypes.cast(ctypes.c_void_p(outer[0]), _P64)
        return n, any(inner[3 * i] == inner[3 * i + 1] for i in range(n))

    def _run(self, text: str) -> tuple[bool, bool]:
        g = self._fns["clone"](self._g)
        try:
            for ch in text:
                self._fns["accept"](g, ord(ch))
                if self._stack_info(g)[0] == 0:
                    return False, False
            _n, complete = self._stack_info(g)
            return True, complete
        finally:
            self._fns["free"](g)

    def accepts(self, text: str) -> bool:
        """The whole text is a complete match of the grammar."""
        return self._run(text)[1]

    def viable_prefix(self, text: str) -> bool:
        """The text can still be extended into a match."""
        return self._run(text)[0]

    def stop(self, text: str, candidates: Iterable[str]) -> tuple[int, list[str]]:
        """Where the grammar stops following `text`: the index of the first code point it rejects (len(text) when
        it takes them all), and which of the `candidates` (single characters) it would take there instead."""
        fns = self._fns
        g = fns["clone"](self._g)
        try:
            at = len(text)
            for i, ch in enumerate(text):
                fns["accept"](g, ord(ch))
                if self._stack_info(g)[0] == 0:
                    at = i
                    break
        finally:
            fns["free"](g)
        g = fns["clone"](self._g)
        try:
            for ch in text[:at]:
                fns["accept"](g, ord(ch))
            taken = []
            for ch in candidates:
                trial = fns["clone"](g)
                try:
                    fns["accept"](trial, ord(ch))
                    if self._stack_info(trial)[0]:
                        taken.append(ch)
                finally:
                    fns["free"](trial)
            return at, taken
        finally:
            fns["free"](g)
