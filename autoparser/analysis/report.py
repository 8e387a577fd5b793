"""`autoparser analyze TEMPLATE [--json]`: print a template's analysis as a table or as the C++ record JSON."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from autoparser.analysis.analyzer import analyze_template
from autoparser.analysis.model import TemplateAnalysis
from autoparser.builtin import detect_builtin
from autoparser.errors import AutoparserError, TemplateError, cli_error

__all__ = ["builtin_line", "format_table", "run_analyze"]

# The key of `analyze --json` that says what llama.cpp does with the text without --jinja. Beside the C++ record,
# not in it: the record is the Jinja analysis, compared field by field with llama.cpp's.
BUILTIN_KEY = "builtin_format"


def run_analyze(source: str, path: str, *, as_json: bool = False) -> int:
    """Print the analysis of `source` (named `path` in messages); 0, or 2 with a one-line error on stderr."""
    analysis: TemplateAnalysis | None = None
    try:
        analysis = analyze_template(source, name=path)
        if dataclasses.replace(analysis, caps=TemplateAnalysis().caps) == TemplateAnalysis():
            # Every field a default: maybe no analysis conversation rendered. The strict analysis says so
            # (a default analysis is no description of the template).
            analyze_template(source, name=path, strict=True)
    except TemplateError as err:
        if as_json and analysis is not None:
            # The C++ analyses such a template as all defaults: --json prints that record beside the failure.
            print(json.dumps(analysis.to_dict(), ensure_ascii=False, indent=2))
        return cli_error(str(err).replace("\n", " "))
    except AutoparserError as err:
        return cli_error(str(err).replace("\n", " "))
    except Exception as err:
        return cli_error(f"{path}: {type(err).__name__}: {err}".replace("\n", " "))
    if as_json:
        builtin = detect_builtin(source)
        detected = builtin.label if builtin.supported else None  # null: llama.cpp rejects it without --jinja
        record = {**analysis.to_dict(), **analysis.beyond_cpp(), BUILTIN_KEY: detected}
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        print(format_table(analysis))
        print(builtin_line(source))
    return 0


def builtin_line(source: str) -> str:
    """One line: the built-in format llama.cpp renders this template's text as without --jinja (its legacy
    path detects a format from substrings and never runs the template), or that it rejects it."""
    builtin = detect_builtin(source)
    if builtin.supported:
        return f"== Built-in format (llama.cpp without --jinja): {builtin.label}"
    return "== Built-in format (llama.cpp without --jinja): none (rejected: \"this custom template is not supported\")"


def _rows(prefix: str, d: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows.extend(_rows(key + ".", v))
        elif isinstance(v, str):
            rows.append((key, json.dumps(v, ensure_ascii=False)))
        elif isinstance(v, list):
            rows.append((key, ", ".join(json.dumps(x, ensure_ascii=False) for x in v) or "-"))
        else:
            rows.append((key, str(v)))
    return rows


def format_table(analysis: TemplateAnalysis) -> str:
    """Two columns, one row per field; empty markers are shown as "" so their absence is visible."""
    d = analysis.to_dict()
    sections = [
        ("Capabilities", _rows("", d["caps"])),
        ("Roles", [("user_start", json.dumps(d["user_start"], ensure_ascii=False)),
                   ("assistant_start", json.dumps(d["assistant_start"], ensure_ascii=False))]),
        ("Reasoning", _rows("reasoning.", d["reasoning"])),
        ("Content", _rows("content.", d["content"])),
        ("Tools", _rows("tools.", d["tools"])),
        ("Tokens", [("preserved_tokens", ", ".join(json.dumps(t, ensure_ascii=False)
                                                   for t in d["preserved_tokens"]) or "-"),
                    ("additional_stops", ", ".join(json.dumps(t, ensure_ascii=False)
                                                   for t in d["additional_stops"]) or "-")]),
    ]
    beyond = analysis.beyond_cpp()
    if beyond:
        sections.append(("Beyond the C++", _rows("", beyond["beyond_cpp"])))
    width = max(len(k) for _, rows in sections for k, _ in rows)
    lines: list[str] = []
    for title, rows in sections:
        lines.append(f"== {title}")
        lines.extend(f"  {k.ljust(width)}  {v}" for k, v in rows)
    return "\n".join(lines)
