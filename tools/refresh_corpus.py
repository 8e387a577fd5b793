"""Nightly entry point: the same job as `autoparser corpus refresh` (same arguments)."""

from __future__ import annotations

import sys

from autoparser.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["corpus", "refresh", *sys.argv[1:]]))
