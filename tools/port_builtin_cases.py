#!/usr/bin/env python3
"""Port llama.cpp's built-in chat-format cases into tests/data/builtin/, reproducibly.

    python tools/port_builtin_cases.py [LLAMA_CPP_DIR]

LLAMA_CPP_DIR is the vendored llama.cpp of llama-cpp-python 0.3.36 (default:
build/llama_cpp_python-0.3.36/vendor/llama.cpp, where the README's `pip download` + `tar` put it). Writes:

- `test-chat-template.json`: the cases of tests/test-chat-template.cpp, parsed from the C++ source (the shared
  conversation, each case's template, expected legacy and Jinja outputs, tokens, extra messages, and the name
  the test says must be rejected).
- `reference.json`: what llama.cpp itself (the `llama_cpp` package's libllama, the same commit) answers:
  its list of built-in names, each name's prompt for a few probe conversations, and, for each test case and
  each corpus template, the built-in formats whose prompts equal the ones llama.cpp renders for that text
  (detection, seen through `llama_chat_apply_template`, the only door the C API opens on it) with a digest of
  those prompts. Needs `pip install -e '.[oracle]'`; without it only the first file is written.

The C++ is parsed, not evaluated: string literals (with their escapes, adjacent ones joined, `U8C(...)` and
`u8` prefixes) and brace lists, in the positional order of `struct TestCase` (the `/* .field= */` comments
are checked against it, so a reordered struct cannot shift the data silently).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "tests" / "data" / "builtin"
DEFAULT_LLAMA_CPP = ROOT / "build" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
TEST_FILE = "tests/test-chat-template.cpp"
SOURCE = {"repository": "https://github.com/ggml-org/llama.cpp", "commit": "0c1e570",
          "vendored_in": "llama-cpp-python 0.3.36", "licence": "MIT"}

# Probe conversations: together they tell every built-in format from every other one (a system turn or none,
# the generation prompt on and off, the pseudo-roles Granite and EXAONE/Pangu render, spaces some formats trim,
# non-ASCII text), so equal prompts on all of them mean the same format.
_CONVERSATION = [("system", "You are a helpful assistant"), ("user", "Hello"), ("assistant", "Hi there"),
                 ("user", "Who are you"), ("assistant", "   I am an assistant   "), ("user", "Another question")]
PROBES: list[dict[str, Any]] = [
    {"messages": _CONVERSATION, "add_ass": True},
    {"messages": _CONVERSATION, "add_ass": False},
    {"messages": [("user", " Hi\t"), ("assistant_tool_call", "[call]"), ("tool_response", "{\"r\": 1}"),
                  ("tool", " 72 "), ("function", "f()"), ("assistant", " ok "), ("user", "ünï bye")],
     "add_ass": True},
]

# --- C++ source --------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<line>//[^\n]*) | (?P<block>/\*.*?\*/)
  | (?P<str>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\\n]|\\.)+') | (?P<id>[A-Za-z_]\w*|\d\w*) | (?P<punct>[^\s\w"'])
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "?": "?"}


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot tokenise C++ at {pos}: {text[pos:pos + 40]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind not in ("ws", "line"):
            out.append((kind, m.group()))
    return out


def c_literal(token: str) -> str:
    body = token[token.index('"') + 1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e == "x":
            digits = re.match(r"[0-9a-fA-F]+", body[i + 2:])
            assert digits, body[i:i + 6]
            out.append(chr(int(digits.group(), 16)))
            i += 2 + len(digits.group())
        elif e in "uU":
            n = 4 if e == "u" else 8
            out.append(chr(int(body[i + 2:i + 2 + n], 16)))
            i += 2 + n
        else:
            out.append(_ESCAPES[e])
            i += 2
    return "".join(out)


class _Reader:
    """Values of a C++ brace initialiser: strings, booleans and nested brace lists, with the designator comment
    that precedes each (None when there is none)."""

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks, self.i = toks, 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.toks[self.i]
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r} (token {self.i})")
        self.i += 1
        return tok

    def comment(self) -> str | None:
        label = None
        while self.peek()[0] == "block":
            m = re.match(r"/\*\s*\.(\w+)", self.take()[1])
            label = m.group(1) if m else label
        return label

    def value(self) -> Any:
        kind, text = self.peek()
        if kind == "str":
            parts = []
            while self.peek()[0] == "str":  # adjacent literals are one string
                parts.append(c_literal(self.take()[1]))
            return "".join(parts)
        if text == "U8C":  # the test's u8 cast macro: the literal inside is the value
            self.take()
            self.take("(")
            inner = self.value()
            self.take(")")
            return inner
        if text in ("true", "false"):
            self.take()
            return text == "true"
        if text == "{":
            return self.items()
        raise ValueError(f"unexpected {text!r} (token {self.i})")

    def items(self) -> list[tuple[str | None, Any]]:
        self.take("{")
        out: list[tuple[str | None, Any]] = []
        while True:
            label = self.comment()
            if self.peek()[1] == "}":
                self.take()
                return out
            out.append((label, self.value()))
            self.comment()
            if self.peek()[1] == ",":
                self.take()


def _plain(v: Any) -> Any:
    return [_plain(x) for _, x in v] if isinstance(v, list) else v


def _initialiser(toks: list[tuple[str, str]], *declaration: str) -> _Reader:
    """A reader at the `{` that follows the token sequence `declaration` (e.g. `test_cases`)."""
    texts = [t for _, t in toks]
    for i in range(len(texts)):
        if texts[i:i + len(declaration)] == list(declaration) and texts[i + len(declaration)] == "{":
            reader = _Reader(toks)
            reader.i = i + len(declaration)
            return reader
    raise ValueError(f"no initialiser for {' '.join(declaration)}")


def parse_test_file(text: str) -> dict[str, Any]:
    # (only the automated tests' body: what precedes it holds raw strings and preprocessor lines we never read)
    toks = tokens(text[text.index("int main_automated_tests(void) {"):])
    struct = re.search(r"struct TestCase \{(.*?)\n\s*\};", text, re.DOTALL)
    assert struct, "struct TestCase not found"
    fields: list[tuple[str, Any]] = []
    for m in re.finditer(r"(bool|std::string|std::vector<llama_chat_message>)\s+(\w+)\s*(?:=\s*([^;]*))?;",
                         struct.group(1)):
        kind, name, default = m.groups()
        fields.append((name, {"bool": default == "true", "std::string": ""}.get(kind, [])))
        assert default in (None, '""', "true", "false", "{}"), f"unexpected default {default!r} of {name}"
    conversation = _plain(_initialiser(toks, "conversation").items())
    cases = []
    for _, entry in _initialiser(toks, "test_cases").items():
        case: dict[str, Any] = dict(fields)
        assert len(entry) <= len(fields), f"more values than TestCase fields: {entry[0]}"
        for (label, value), (name, _) in zip(entry, fields, strict=False):
            assert label in (None, name), f"value labelled .{label} sits in field {name} (struct reordered?)"
            case[name] = _plain(value)
        cases.append({"id": case["name"], **case})
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids), "case names are not unique"
    invalid = re.search(r'llama_chat_apply_template\("([^"]*)"', text)
    gen = re.search(r"const auto add_generation_prompt = (true|false);", text)
    assert invalid and gen
    return {"conversation": conversation, "add_generation_prompt": gen.group(1) == "true",
            "invalid_template": invalid.group(1), "cases": cases}


# --- the C++ itself ----------------------------------------------------------------------------------------------

class Reference:
    """libllama's public chat-template functions, through the `llama_cpp` package's ctypes bindings."""

    def __init__(self) -> None:
        import llama_cpp

        self.lib = llama_cpp

    def builtin_names(self) -> list[str]:
        n = self.lib.llama_chat_builtin_templates(None, 0)
        out = (ctypes.c_char_p * n)()
        self.lib.llama_chat_builtin_templates(out, n)
        return [bytes(s or b"").decode("utf-8") for s in out]

    def apply(self, tmpl: str, messages: list[tuple[str, str]] | list[list[str]], add_ass: bool) -> str | None:
        """The prompt, or None when llama.cpp rejects the template (-1)."""
        chat = (self.lib.llama_chat_message * len(messages))(
            *(self.lib.llama_chat_message(r.encode(), c.encode()) for r, c in messages))
        key = tmpl.encode("utf-8")
        size = self.lib.llama_chat_apply_template(key, chat, len(messages), add_ass, None, 0)
        if size < 0:
            return None
        buf = ctypes.create_string_buffer(size + 1)
        got = self.lib.llama_chat_apply_template(key, chat, len(messages), add_ass, buf, size + 1)
        assert got == size
        return buf.raw[:size].decode("utf-8")

    def probe(self, tmpl: str) -> list[str] | None:
        prompts = [self.apply(tmpl, p["messages"], p["add_ass"]) for p in PROBES]
        if any(p is None for p in prompts):
            assert all(p is None for p in prompts), tmpl[:60]
            return None
        return [p for p in prompts if p is not None]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompts_digest(prompts: list[str]) -> str:
    """One digest of a template's prompts for all the probes (the tests compute the same from ours)."""
    return _digest(json.dumps(prompts, ensure_ascii=False))


def detection(ref: Reference, by_name: dict[str, list[str]], text: str) -> dict[str, Any]:
    """What llama.cpp does with a template text: rejected, or the names whose prompts it renders exactly
    (several when formats render alike on every probe: granite-4.0 and granite-4.1; none for DOTS1, which has
    no name), with a digest of the prompts."""
    prompts = ref.probe(text)
    if prompts is None:
        return {"rejected": True, "builtin": [], "prompts_sha256": None}
    return {"rejected": False, "builtin": sorted(n for n, p in by_name.items() if p == prompts),
            "prompts_sha256": prompts_digest(prompts)}


def reference_data(ref: Reference, cases: list[dict[str, Any]]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from autoparser.corpus import Corpus

    names = ref.builtin_names()
    by_name = {n: ref.probe(n) or [] for n in names}
    conv = [tuple(m) for m in PROBES[0]["messages"]]
    for case in cases:  # the test file's expectations hold for the library we read the rest from
        got = ref.apply(case["template_str"], [*conv, *(tuple(m) for m in case["extra_conversation"])], True)
        assert got == case["expected_output"], f"libllama disagrees with {TEST_FILE} on {case['id']}"
    corpus = Corpus.load(ROOT / "corpus")
    return {
        "probes": [{"messages": [list(m) for m in p["messages"]], "add_ass": p["add_ass"]} for p in PROBES],
        "builtin_templates": names,
        "by_name": by_name,
        "cases": {c["id"]: detection(ref, by_name, c["template_str"]) for c in cases},
        "corpus": {e.name: {"sha256": _digest(e.read_text()), **detection(ref, by_name, e.read_text())}
                   for e in corpus.entries},
    }


def main(argv: list[str]) -> int:
    llama_cpp_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_LLAMA_CPP
    test_file = llama_cpp_dir / TEST_FILE
    if not test_file.is_file():
        print(f"{test_file}: not found (pass the vendored llama.cpp directory)", file=sys.stderr)
        return 2
    ported = parse_test_file(test_file.read_text(encoding="utf-8"))
    DEST.mkdir(parents=True, exist_ok=True)
    source = {**SOURCE, "file": TEST_FILE, "ported_by": "tools/port_builtin_cases.py"}
    _write(DEST / "test-chat-template.json", {"source": source, **ported})
    try:
        ref = Reference()
    except ImportError:
        print("llama_cpp is not installed: reference.json not written (pip install -e '.[oracle]')",
              file=sys.stderr)
        return 1
    data = reference_data(ref, ported["cases"])
    _write(DEST / "reference.json", {"source": {**SOURCE, "file": "src/llama-chat.cpp (through libllama)",
                                                "ported_by": "tools/port_builtin_cases.py"}, **data})
    return 0


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
