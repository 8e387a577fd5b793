"""Every error autoparser raises. One hierarchy, so callers can catch `AutoparserError` and lose nothing.

Inside the engines failure is a value (a FAIL parse result, a None diff); these exceptions exist only at the
API edges, each carrying enough context (position, path, repo, rule) to act on without a traceback. Commands
report them with cli_error.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Sequence

__all__ = [
    "AnalysisError",
    "AutoparserError",
    "CorpusError",
    "ExportError",
    "GGUFError",
    "GrammarError",
    "HubError",
    "NothingToExport",
    "ParseError",
    "SchemaError",
    "SerializationError",
    "TemplateError",
    "UnknownBuiltinTemplateError",
    "UnknownKeyError",
    "check_keys",
    "cli_error",
    "read_stdin",
    "read_text_input",
]


class AutoparserError(Exception):
    """Base class of every error raised by autoparser."""


class TemplateError(AutoparserError):
    """A chat template could not be compiled or rendered (syntax error, raise_exception, sandbox limit)."""


class UnknownBuiltinTemplateError(TemplateError):
    """llama.cpp's built-in (non-Jinja) path has no format for this: a name not in its list, or a template text
    none of its detection heuristics recognises (llama.cpp returns -1 and asks for --jinja)."""


class GGUFError(TemplateError):
    """A chat template could not be read from a GGUF header: not a GGUF file, a truncated or malformed header,
    no chat template in it, or no template of the variant asked for."""


class AnalysisError(AutoparserError):
    """The differential analyzer could not derive a consistent description of a template."""


class GrammarError(AutoparserError):
    """A PEG arena or GBNF grammar is malformed (unknown rule, invalid node, bad character class)."""


class SerializationError(GrammarError):
    """A serialised PEG arena could not be loaded (bad JSON, unknown node type, dangling id)."""


class SchemaError(GrammarError):
    """A JSON schema cannot be converted to GBNF. `path` points at the offending node (JSON pointer)."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(f"JSON schema error at {path or '/'}: {message}" if path else message)


class ExportError(AutoparserError):
    """What the analysis derives cannot be said in another engine's language (a response_template, a structural
    tag, a Lark grammar); the message says why."""


class NothingToExport(ExportError):
    """The template marks nothing in its output (no reasoning, content markers or tool calls): the whole output is
    content, which a reader takes as it comes without any file."""


class CorpusError(AutoparserError):
    """The template corpus or its manifest is inconsistent or cannot be written."""


class HubError(CorpusError):
    """The Hugging Face hub refused or broke a request (gated, missing, rate-limited, truncated body)."""

    def __init__(self, message: str, repo_id: str = "", kind: str = "error") -> None:
        self.repo_id = repo_id
        self.kind = kind
        super().__init__(f"{repo_id}: {message}" if repo_id else message)


class UnknownKeyError(AutoparserError, ValueError):
    """A mapping given to the API holds a key it does not take (a request's `"tool"`, an expected message's
    `"reasoning"`): refused, because a misspelt key would otherwise change nothing without a word. Also a
    ValueError, which peg_tester's `expect()` raised for it before this class existed."""


def check_keys(keys: Iterable[object], known: Sequence[str], *, caller: str, where: str) -> None:
    """UnknownKeyError for the first of `keys` not in `known`: `CALLER: unknown key 'tool' in WHERE (did you
    mean 'tools'?); it has messages, tools, ...` (the suggestion only where one is close)."""
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownKeyError(f"{caller}: unknown key {key!r} in {where}{hint}; it has {', '.join(known)}")


class ParseError(AutoparserError):
    """Model output does not match the expected format.

    Carries the byte-free position (code point index) where parsing stopped, what was expected there,
    and a caret excerpt of the input so the message alone shows where things went wrong.
    """

    def __init__(self, message: str, *, text: str = "", position: int = 0, expected: str = "") -> None:
        self.text = text
        self.position = position
        self.expected = expected
        self.reason = message
        super().__init__(self._render())

    def excerpt(self, width: int = 60) -> str:
        """Two lines: the input around `position` (newlines shown as ⏎) and a caret under it."""
        lo = max(0, self.position - width // 2)
        hi = min(len(self.text), self.position + width // 2)
        before = self.text[lo:self.position].replace("\n", "⏎")
        after = self.text[self.position:hi].replace("\n", "⏎")
        lead = "…" if lo > 0 else ""
        tail = "…" if hi < len(self.text) else ""
        return f"{lead}{before}{after}{tail}\n{' ' * (len(lead) + len(before))}^"

    def _render(self) -> str:
        parts = [self.reason]
        where = f"at position {self.position}"
        if self.expected:
            where += f", expected {self.expected}"
        parts.append(where)
        if self.text or self.position == 0:
            parts.append(self.excerpt())
        return "\n".join(parts)


def cli_error(message: str, code: int = 2, *, first_line: bool = False) -> int:
    """Print `autoparser: error: MESSAGE` on stderr, the one line in which every command reports a failure, and
    return `code` for the command to exit with (2 bad input, 1 output that does not parse or a job that failed).

    `first_line`: only the first line of the stripped message ("error" when it is blank), for messages that may
    carry more (a template error's excerpt); other callers make their message one line themselves.
    """
    if first_line:
        message = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"autoparser: error: {message}", file=sys.stderr)
    return code


def read_stdin(what: str) -> bytes:
    """All of stdin (`what` it holds: "model output", "schema"). On a terminal a line on stderr says what is
    awaited first: a user who typed only the command would otherwise wait on a silent terminal."""
    if sys.stdin.isatty():
        print(f"autoparser: reading the {what} from stdin; end it with Ctrl-D", file=sys.stderr)
    return sys.stdin.buffer.read()


def read_text_input(path: str, what: str) -> str:
    """The text of the file a user named (`what`: "template", "tools", "schema"), or of stdin for `-`, as UTF-8;
    an AutoparserError with a one-line reason when it cannot be read or is not text (a binary file, another
    encoding), so that no command goes on with garbage or answers with a traceback."""
    if path == "-":
        data, path = read_stdin(what), "stdin"
    else:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise AutoparserError(f"cannot read {what} {path}: {e.strerror or e}") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise AutoparserError(f"{path}: not a {what} file: byte {nul} is NUL, which no text file holds")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AutoparserError(f"{path}: not a {what} file: byte {e.start} (0x{data[e.start]:02x}) is not UTF-8 "
                              "text") from None
