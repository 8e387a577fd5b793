"""`autoparser parse TEMPLATE [--tools tools.json] [--strict] < output.txt`: print the parsed message as JSON.

A malformed output is recovered (the repairs on stderr, exit 0); with `--strict` it is rejected as llama.cpp
rejects it (exit 1, with the position and an excerpt).
"""

from __future__ import annotations

import argparse
import json
import sys

from autoparser.chat.request import checked_tools
from autoparser.errors import AutoparserError, ParseError, cli_error, read_stdin, read_text_input


def read_tools(path: str) -> list[object]:
    """The OpenAI-style tools in the JSON file `path` (`--tools` of parse and analyze); AutoparserError with a
    one-line reason when it cannot be read or is not a JSON array."""
    text = read_text_input(path, "tools")
    try:
        tools = json.loads(text)
    except json.JSONDecodeError as e:
        raise AutoparserError(f"{path}: invalid JSON: {e}") from None
    if not isinstance(tools, list):
        kind = {"dict": "object", "str": "string", "int": "number", "float": "number", "bool": "boolean"}
        raise AutoparserError(f"{path}: expected a JSON array of tools, got a JSON "
                              f"{kind.get(type(tools).__name__, 'null')}")
    try:
        checked_tools(tools)
    except AutoparserError as e:
        raise AutoparserError(f"{path}: {e}") from None
    return tools


def run_parse(args: argparse.Namespace, source: str, name: str) -> int:
    """Parse stdin with the parser generated for `source` (the template named `name` in messages)."""
    from autoparser.params import generate

    try:
        tools = read_tools(args.tools) if args.tools else []
    except AutoparserError as e:
        return cli_error(str(e), 2)
    request = {"messages": [{"role": "user", "content": "Hey there!"}], "tools": tools,
               "reasoning_format": args.reasoning_format, "enable_thinking": not args.no_thinking,
               "parallel_tool_calls": args.parallel_tool_calls}
    try:
        params = generate(source, request)
    except AutoparserError as e:
        # (generate() compiles a source text, whose errors name it `<template>`: here it has a file name)
        return cli_error(str(e).splitlines()[0].replace("<template>", name), 2)
    output = read_stdin("model output").decode("utf-8", "surrogateescape")
    try:
        msg = params.parse(output, is_partial=args.partial, strict=args.strict)
    except ParseError as e:
        return cli_error(f"{name}: {e}", 1)
    print(json.dumps(msg.to_dict(), ensure_ascii=False, indent=2))
    # What was repaired to read a malformed output, one line each; the output was read, so the exit code is 0.
    for d in msg.diagnostics:
        print(f"autoparser: repaired: {d.message}", file=sys.stderr)
    return 0
