"""Add the example tool templates of a peer engine's source distribution to corpus/ (committed data).

vLLM ships chat templates for the model families its tool parsers serve (`examples/tool_chat_template_*.jinja`);
the peer suite (tests/conformance/test_peers.py) runs those parsers' test vectors, so the corpus carries the
templates too. Each file keeps its provenance: the sdist and path it came from, its sha256, its licence. A text
already in the corpus gains an origin instead of a copy.

usage: python -m tools.add_peer_templates vllm-0.33.0.tar.gz [--corpus corpus]
"""

from __future__ import annotations

import argparse
import re
import tarfile
from pathlib import Path

from autoparser.corpus.manifest import Manifest, ManifestEntry, sha256_hex

# (the sdist's project name, its licence) -> what each file's entry says
_LICENCES = {"vllm": "Apache-2.0"}
_EXAMPLE = re.compile(r"^[^/]+/examples/(tool_chat_template_[A-Za-z0-9._-]+)\.jinja$")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("sdist", type=Path)
    p.add_argument("--corpus", type=Path, default=Path("corpus"))
    args = p.parse_args()
    project, _, version = args.sdist.name.removesuffix(".tar.gz").rpartition("-")
    if project not in _LICENCES:
        raise SystemExit(f"{args.sdist.name}: not a known peer sdist ({', '.join(_LICENCES)})")
    manifest = Manifest.read(args.corpus)
    by_sha = manifest.by_sha()
    added = shared = 0
    with tarfile.open(args.sdist) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            found = _EXAMPLE.match(member.name)
            data = tar.extractfile(member).read() if found and member.isfile() else None  # type: ignore[union-attr]
            if found is None or data is None:
                continue
            stem, digest = found.group(1), sha256_hex(data)
            origin = f"peer:{project}/examples/{stem}.jinja"
            entry = by_sha.get(digest)
            if entry is not None:
                if origin not in entry.origins:
                    entry.origins.append(origin)
                    shared += 1
                continue
            name = f"{project}__{stem}"
            (args.corpus / "templates" / f"{name}.jinja").write_bytes(data)
            entry = ManifestEntry(
                name=name, file=f"templates/{name}.jinja", sha256=digest, size=len(data),
                source_file=f"{project}=={version}:examples/{stem}.jinja", origins=[origin],
                licence_note=f"bundled in the PyPI sdist {project}=={version} ({_LICENCES[project]}); a template "
                             f"{project} ships for the model family its tool parser serves",
                model_hint=stem.removeprefix("tool_chat_template_"))
            manifest.templates.append(entry)
            by_sha[digest] = entry
            added += 1
    manifest.write(args.corpus)
    print(f"{added} templates added, {shared} origins added to templates already in the corpus")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
