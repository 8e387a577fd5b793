"""A small fake Hugging Face hub: a real HTTP/1.1 server on 127.0.0.1, for running the corpus jobs without network.

It answers what huggingface_hub calls when the fetcher reads a repo: model listing, model info (with siblings
and sizes), HEAD/GET resolve with X-Repo-Commit / ETag / Content-Length, X-Error-Code on errors (401/403 for a
gated repo without a good token), LFS-style 302 redirects to a second listener acting as the CDN, and Range
requests (206 + Content-Range, 416). The tests drive it in-process (repos as FakeRepo, faults injected per path
pattern, every request logged); `autoparser corpus fake-hub DIR` serves a directory the same way.

It lives in the package, not under tests/, so that the tests and the command are one implementation: what a
contributor sees offline is what the tests check. Only the standard library is used.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    gated: bool = False
    downloads: int = 0
    lfs: frozenset[str] = frozenset()  # files served through a 302 to the CDN listener
    ghosts: frozenset[str] = frozenset()  # listed in model info, but 404 EntryNotFound on download
    history: dict[str, dict[str, bytes]] = field(default_factory=dict)
    sha: str = ""

    def __post_init__(self) -> None:
        self.commit(self.files)

    def commit(self, files: dict[str, bytes]) -> str:
        """A new revision: new sha, older revisions stay downloadable by sha."""
        self.files = dict(files)
        self.sha = _sha(json.dumps(sorted((k, v.hex()) for k, v in files.items())) + str(len(self.history)))
        self.history[self.sha] = self.files
        return self.sha


@dataclass
class Fault:
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    truncate: bool = False  # send a Content-Length larger than the body, then close


class FakeHub:
    """The hub for `repos` (id -> FakeRepo), at `url` once entered (`with FakeHub(...) as hub:`). A gated repo
    answers 401 without a token and 403 with one not in `valid_tokens` (None: any token is good)."""

    def __init__(self, repos: dict[str, FakeRepo], valid_tokens: frozenset[str] | None = frozenset({"hf_good"}),
                 *, port: int = 0) -> None:
        self.repos = repos
        self.valid_tokens = valid_tokens
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.served: dict[str, int] = {}  # file name -> body bytes sent for it (every listener, every request)
        self.on_request: Callable[[str, str], None] | None = None
        self._lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._handle(self, head=True, cdn=False)

            def do_GET(self) -> None:
                hub._handle(self, head=False, cdn=False)

        class CdnHandler(Handler):
            def do_HEAD(self) -> None:
                hub._handle(self, head=True, cdn=True)

            def do_GET(self) -> None:
                hub._handle(self, head=False, cdn=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        try:
            self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), CdnHandler)
        except OSError:
            self._server.server_close()
            raise
        self._server.daemon_threads = True
        self._cdn.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self._cdn.server_address[1]}"
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------------------

    def __enter__(self) -> FakeHub:
        for srv in (self._server, self._cdn):
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        for srv in (self._server, self._cdn):
            srv.shutdown()
            srv.server_close()

    def sync(self) -> None:
        """Called before each request is answered: a hub whose repos live elsewhere (DirectoryHub) reads them."""

    # -- test controls --------------------------------------------------------------------------------------

    def inject(self, pattern: str, status: int, times: int = 1, headers: dict[str, str] | None = None,
               truncate: bool = False) -> None:
        with self._lock:
            self.faults.append(Fault(re.compile(pattern), status, times, dict(headers or {}), truncate))

    def paths(self, method: str | None = None) -> list[str]:
        return [p for m, p, _ in self.requests if method is None or m == method]

    # -- responses ------------------------------------------------------------------------------------------

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              head: bool = False, truncate: bool = False) -> None:
        h.send_response(status)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        for k, v in hdrs.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body) + (1000 if truncate else 0)))
        if truncate:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        if not head:
            h.wfile.write(body)
            h.wfile.flush()

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, head: bool,
               extra: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": code}).encode()
        self._send(h, status, body, {"X-Error-Code": code, **(extra or {})}, head=head)

    def _handle(self, h: BaseHTTPRequestHandler, *, head: bool, cdn: bool) -> None:
        self.sync()
        raw = h.path
        split = urlsplit(raw)
        path = split.path
        method = "HEAD" if head else "GET"
        with self._lock:
            self.requests.append((method, raw, dict(h.headers.items())))
            fault = next((f for f in self.faults
                          if f.times > 0 and f.pattern.search(path) and not (f.truncate and head)), None)
            if fault is not None:
                fault.times -= 1
        if self.on_request is not None:
            self.on_request(method, raw)
        if fault is not None and not fault.truncate:
            body = json.dumps({"error": f"injected {fault.status}"}).encode()
            self._send(h, fault.status, body, fault.headers, head=head)
            return
        if path == "/api/agent-harnesses":
            self._send(h, 200, b'{"standardEnvVars": [], "harnesses": {}}', head=head)
            return
        if path == "/api/models":
            self._list_models(h, parse_qs(split.query), head)
            return
        m = re.fullmatch(r"/api/models/(.+?)(?:/revision/([^/]+))?", path)
        if m:
            self._model_info(h, unquote(m.group(1)), unquote(m.group(2)) if m.group(2) else None,
                             "blobs=true" in split.query, head)
            return
        m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if m:
            self._resolve(h, unquote(m.group(1)), unquote(m.group(2)), unquote(m.group(3)), head, cdn,
                          truncate=fault is not None and fault.truncate)
            return
        self._send(h, 404, b'{"error": "no route"}', head=head)

    def _list_models(self, h: BaseHTTPRequestHandler, query: dict[str, list[str]], head: bool) -> None:
        ranked = sorted(self.repos.items(), key=lambda kv: (-kv[1].downloads, kv[0]))
        limit = int(query.get("limit", ["1000"])[0])
        body = [{"id": rid, "modelId": rid, "downloads": r.downloads, "pipeline_tag": "text-generation",
                 "private": False, "tags": ["text-generation"]} for rid, r in ranked[:limit]]
        self._send(h, 200, json.dumps(body).encode(), head=head)

    def _model_info(self, h: BaseHTTPRequestHandler, repo_id: str, revision: str | None, blobs: bool,
                    head: bool) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(h, 404, "RepoNotFound", head)
            return
        files = repo.files if revision in (None, "main") else repo.history.get(revision or "")
        if files is None:
            self._error(h, 404, "RevisionNotFound", head)
            return
        listed = {**files, **{g: b"" for g in repo.ghosts if g not in files}}
        siblings = [{"rfilename": name, **({"size": len(data), "blobId": _sha(name)} if blobs else {})}
                    for name, data in sorted(listed.items())]
        sha = repo.sha if revision in (None, "main") else revision
        body = {"id": repo_id, "modelId": repo_id, "sha": sha, "private": False,
                "gated": "manual" if repo.gated else False, "siblings": siblings, "tags": [],
                "downloads": repo.downloads}
        self._send(h, 200, json.dumps(body).encode(), head=head)

    def _resolve(self, h: BaseHTTPRequestHandler, repo_id: str, revision: str, filename: str, head: bool,
                 cdn: bool, truncate: bool) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._error(h, 404, "RepoNotFound", head)
            return
        if repo.gated and not cdn:
            auth = h.headers.get("Authorization", "")
            token = auth.removeprefix("Bearer ").strip()
            if not token:
                self._error(h, 401, "GatedRepo", head)
                return
            if self.valid_tokens is not None and token not in self.valid_tokens:
                self._error(h, 403, "GatedRepo", head)
                return
        sha = repo.sha if revision == "main" else revision
        files = repo.history.get(sha)
        if files is None:
            self._error(h, 404, "RevisionNotFound", head)
            return
        data = files.get(filename)
        if data is None:
            self._error(h, 404, "EntryNotFound", head, {"X-Repo-Commit": sha})
            return
        etag = f'"{hashlib.sha1(data).hexdigest()}"'
        if filename in repo.lfs and not cdn:
            self._send(h, 302, b"", {
                "Location": f"{self.cdn_url}/{repo_id}/resolve/{sha}/{filename}",
                "X-Repo-Commit": sha, "X-Linked-Etag": etag, "X-Linked-Size": str(len(data)), "ETag": etag,
            }, head=head)
            return
        headers = {"Content-Type": "application/octet-stream", "X-Repo-Commit": sha, "ETag": etag,
                   "Accept-Ranges": "bytes"}
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", h.headers.get("Range", "").strip())
        if wanted and not head:  # a ranged read (RFC 9110 14.2): 206 with the part, 416 past the end
            start = int(wanted.group(1))
            end = min(int(wanted.group(2)) if wanted.group(2) else len(data) - 1, len(data) - 1)
            if start >= len(data):
                self._send(h, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            part = data[start:end + 1]
            self._record_served(filename, len(part))
            self._send(h, 206, part, {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"})
            return
        if not head:
            self._record_served(filename, len(data))
        self._send(h, 200, data, headers, head=head, truncate=truncate and not head)

    def _record_served(self, filename: str, n: int) -> None:
        with self._lock:
            self.served[filename] = self.served.get(filename, 0) + n


GATED_MARKER = ".gated"


def read_repo_directory(root: Path) -> dict[str, tuple[dict[str, bytes], bool]]:
    """repo id -> (file path in the repo -> bytes, gated) for every ROOT/<org>/<name>/ folder: the hub's repo
    ids and paths, so a template is put where the hub has it (org/name/tokenizer_config.json,
    org/name/chat_template.jinja, org/name/additional_chat_templates/tool_use.jinja). Names starting with a dot
    are not served; an empty `.gated` file makes the repo gated."""
    out: dict[str, tuple[dict[str, bytes], bool]] = {}

    def folders(p: Path) -> list[Path]:
        return sorted(c for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))

    for org in folders(root):
        for repo in folders(org):
            files = {f.relative_to(repo).as_posix(): f.read_bytes() for f in sorted(repo.rglob("*"))
                     if f.is_file() and not any(part.startswith(".") for part in f.relative_to(repo).parts)}
            out[f"{org.name}/{repo.name}"] = (files, (repo / GATED_MARKER).exists())
    return out


class DirectoryHub(FakeHub):
    """The hub over a directory (read_repo_directory), read again before every request: an edited file is a new
    commit (a new sha) the next time the hub is asked, as a push would be, and the commits seen before stay
    downloadable by sha while the server runs. A gated repo takes any token."""

    def __init__(self, root: Path, *, port: int = 0) -> None:
        self.root = root
        super().__init__({}, None, port=port)
        self.sync()

    def sync(self) -> None:
        found = read_repo_directory(self.root)
        with self._lock:
            repos: dict[str, FakeRepo] = {}
            for repo_id, (files, gated) in found.items():
                repo = self.repos.get(repo_id)
                if repo is None:
                    repo = FakeRepo(files, gated=gated)
                elif files != repo.files:
                    repo.commit(files)
                repo.gated = gated
                repos[repo_id] = repo
            self.repos = repos  # (one assignment: a request being answered sees the old dict or the new)
