"""SGLang's parsers in their own environment, for the cross-engine matrix's `sglang` column
(autoparser/matrix/sglang_bridge.py runs in it).

    python -m tools.sglang_env      # makes it once (about 30 s), prints its interpreter

The parsers come from the PyPI package `llm-router-utils` (Apache-2.0), an extraction of SGLang's tool-call
and reasoning parsers, its template detection and its chat serving's request side. It pins its own
transformers (and xgrammar, for constrained decoding, which reading outputs does not need), so it gets a
virtual environment of its own, and only what reading outputs imports: the package without its declared
dependencies, then those its modules import (`REQUIREMENTS`, the versions it pins where it pins them; no torch).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

from autoparser.matrix.engines import BRIDGE, default_sglang_python

PACKAGE = "llm-router-utils==0.8.1"
REQUIREMENTS = ("transformers==5.19.0", "openai==2.6.1", "pydantic", "jinja2", "orjson", "partial_json_parser",
                "json_repair")


def make() -> Path:
    """The environment's interpreter, made (or remade, when the pins changed) here; SystemExit with pip's reason
    when it cannot be."""
    python = default_sglang_python()
    home = python.parent.parent
    stamp = home / "autoparser-pins.txt"
    pins = "\n".join((PACKAGE, *REQUIREMENTS)) + "\n"
    if python.is_file() and stamp.is_file() and stamp.read_text() == pins:
        return python
    if home.exists():
        shutil.rmtree(home)
    print(f"sglang_env: making {home} ({PACKAGE})", file=sys.stderr)
    venv.create(home, with_pip=True)
    for args in (["--no-deps", PACKAGE], list(REQUIREMENTS)):
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise SystemExit(f"sglang_env: could not install {' '.join(args)}: {said}")
    # the bridge must start: an empty run imports everything it reads outputs with
    check = subprocess.run([str(python), str(BRIDGE)], input="", capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"sglang_env: the bridge does not start in {home}: {check.stderr.strip()[-500:]}")
    stamp.write_text(pins)
    return python



if __name__ == "__main__":
    print(make())
