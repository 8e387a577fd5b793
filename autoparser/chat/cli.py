"""`autoparser parse TEMPLATE [--tools tools.json] < output.txt`: print the parsed message as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoparser.errors import AutoparserError, ParseError


def _error(message: str, code: int) -> int:
    print(f"autoparser: error: {message}", file=sys.stderr)
    return code


def run_parse(args: argparse.Namespace) -> int:
    from autoparser.chat.generator import generate

    try:
        source = Path(args.template).read_text(encoding="utf-8")
    except OSError as e:
        return _error(f"cannot read {args.template}: {e.strerror or e}", 2)
    tools = []
    if args.tools:
        try:
            tools = json.loads(Path(args.tools).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            return _error(f"cannot read tools from {args.tools}: {e}", 2)
        if not isinstance(tools, list):
            return _error(f"{args.tools}: expected a JSON array of tools", 2)
    request = {"messages": [{"role": "user", "content": "Hey there!"}], "tools": tools,
               "reasoning_format": args.reasoning_format, "enable_thinking": not args.no_thinking,
               "parallel_tool_calls": args.parallel_tool_calls}
    try:
        params = generate(source, request)
    except AutoparserError as e:
        return _error(str(e).splitlines()[0], 2)
    output = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    try:
        msg = params.parse(output, is_partial=args.partial)
    except ParseError as e:
        print(f"autoparser: {e}", file=sys.stderr)
        return 1
    print(json.dumps(msg.to_dict(), ensure_ascii=False, indent=2))
    return 0
