"""Fetch chat templates from the Hugging Face hub, through huggingface_hub only (its API, downloads and session).

For one repo: `model_info` gives the commit sha and the file list; every template file present is downloaded
at that exact commit with `hf_hub_download` (so the hub cache serves re-runs and offline mode), parsed, and
every template in it extracted. A repo with GGUF files also gives the templates in its first GGUF's header
that its template files do not hold: the header is read with HTTP Range requests through huggingface_hub's
session and auth headers (template/gguf.py parses it), never the multi-GB file. Everything downloaded is
untrusted: sizes are capped, JSON is validated, and the text is returned as bytes to be stored, never rendered.

huggingface_hub reads HF_* variables at import time, so the endpoint is passed explicitly on every call.

A hub that cannot be connected to (no network, a wrong HF_ENDPOINT, a DNS failure) is unreachable for the rest
of the run after the first failed connection: retrying every repo would only multiply the wait (about 15 s a
repo with the back-off) and bury the one useful line, which names the endpoint and the variables that decide it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from autoparser.corpus.manifest import Failure, RepoRecord
from autoparser.errors import GGUFError, HubError, TemplateError
from autoparser.template.gguf import (
    CHAT_TEMPLATE_KEY,
    FIRST_CHUNK,
    GGUFHeader,
    gguf_templates,
    read_gguf_file,
    read_gguf_header,
)

__all__ = [
    "ADDITIONAL_DIR",
    "TEMPLATE_FILES",
    "Extracted",
    "HubFetcher",
    "RepoFetch",
    "extract_templates",
]

TOKENIZER_CONFIG = "tokenizer_config.json"
CHAT_TEMPLATE_JINJA = "chat_template.jinja"
CHAT_TEMPLATE_JSON = "chat_template.json"
ADDITIONAL_DIR = "additional_chat_templates/"
# Lowest precedence first: transformers lets chat_template.jinja override the others for the default template.
TEMPLATE_FILES = (TOKENIZER_CONFIG, CHAT_TEMPLATE_JSON, CHAT_TEMPLATE_JINJA)
MAX_TEMPLATE_BYTES = 2 * 1024 * 1024
MAX_CONFIG_BYTES = 20 * 1024 * 1024

T = TypeVar("T")


@dataclass(frozen=True)
class Extracted:
    """One template found in one file: `template_name` is "default" or the hub's name (tool_use, rag, ...)."""

    template_name: str
    source_file: str
    source_key: str | None
    data: bytes


@dataclass
class RepoFetch:
    """The outcome for one repo. revision is None when the repo itself could not be read."""

    repo_id: str
    revision: str | None
    files: list[str] = field(default_factory=list)
    templates: list[Extracted] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    unchanged: bool = False

    def select(self, variant: str | None = None) -> Extracted:
        """The template a user means by this repo (and `variant`): the named template, else the default; a
        GGUF-only repo's come from its GGUF (`<file>.gguf`, `<file>.gguf:<variant>`). HubError with the repo's
        own failure (gated, missing, no template file) or TemplateError naming the templates it has."""
        if self.revision is None or not self.templates:
            failure = self.failures[0] if self.failures else Failure(self.repo_id, "no_template",
                                                                     "no chat template in the repo")
            raise HubError(failure.message, repo_id=self.repo_id, kind=failure.kind)
        by_name = {t.template_name: t for t in self.templates}
        want = variant or "default"
        if want in by_name:
            return by_name[want]
        ggufs = [t for t in self.templates if t.source_file.endswith(".gguf") and t.template_name == t.source_file]
        for g in ggufs:
            found = by_name.get(g.template_name if variant is None else f"{g.template_name}:{variant}")
            if found is not None:
                return found
        raise TemplateError(f"{self.repo_id}: no chat template {want!r} in the repo; it has "
                            f"{', '.join(sorted(by_name))}")


# -- extraction (pure) --------------------------------------------------------------------------------------


def _decode(data: bytes, filename: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HubError(f"{filename} is not valid UTF-8 ({e.reason} at byte {e.start})", kind="malformed") from None


def _templates_from_value(value: Any, filename: str, key: str) -> list[Extracted]:
    """`chat_template` as a string, or as a list of {"name", "template"} (the hub's multi-template form)."""
    if isinstance(value, str):
        return [Extracted("default", filename, key, value.encode("utf-8", "surrogatepass"))]
    if isinstance(value, list):
        out: list[Extracted] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                    or not isinstance(item.get("template"), str):
                raise HubError(f"{filename}: {key}[{i}] is not a {{name, template}} object", kind="malformed")
            name = item["name"]
            out.append(Extracted(name, filename, f"{key}[{name}]", item["template"].encode("utf-8", "surrogatepass")))
        return out
    if value is None:
        return []
    raise HubError(f"{filename}: {key} is a {type(value).__name__}, not a string or list", kind="malformed")


def extract_templates(filename: str, data: bytes) -> list[Extracted]:
    """Every template in one downloaded file. Raises HubError(kind="malformed") on invalid content."""
    if filename.endswith(".jinja"):
        _decode(data, filename)  # must be text, but stored byte for byte
        if filename == CHAT_TEMPLATE_JINJA:
            name = "default"
        else:
            name = filename.rsplit("/", 1)[-1].removesuffix(".jinja")
        return [Extracted(name, filename, None, data)]
    text = _decode(data, filename)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise HubError(f"{filename}: invalid or truncated JSON ({e.msg} at line {e.lineno} column {e.colno})",
                       kind="malformed") from None
    except RecursionError:
        raise HubError(f"{filename}: JSON nested too deeply", kind="malformed") from None
    if not isinstance(raw, dict):
        raise HubError(f"{filename}: top level is a {type(raw).__name__}, not an object", kind="malformed")
    return _templates_from_value(raw.get("chat_template"), filename, "chat_template")


# -- fetching -----------------------------------------------------------------------------------------------


_REQUEST_ID = re.compile(r"\s*\((?:Request ID|request id):[^)]*\)")


def _one_line(exc: BaseException) -> str:
    """A stable one-line message: per-request ids would make every nightly manifest differ."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return _REQUEST_ID.sub("", line)


def unreachable_message(endpoint: str, reason: str) -> str:
    """The one line that says the hub cannot be reached, and which variables decide where it is looked for."""
    return (f"cannot reach the hub at {endpoint} ({reason}): check the network or HF_ENDPOINT, or set "
            "HF_HUB_OFFLINE=1 to use only the local hub cache")


def _connect_failure(exc: BaseException) -> str | None:
    """The reason (`[Errno -2] Name or service not known`) when `exc` is, or was caused by, a failure to open a
    connection to the hub, else None. A connection that opened and then broke is not one: it is retried.
    huggingface_hub wraps the transport's ConnectError (in LocalEntryNotFoundError for a download), so the whole
    chain is read; classes are matched by name because the transport (httpx, httpx2) varies across versions."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {c.__name__ for c in type(current).__mro__ if c.__module__.startswith(("httpx", "httpcore"))}
        if names & {"ConnectError", "ConnectTimeout"} or isinstance(current, ConnectionRefusedError):
            return _one_line(current)
        current = current.__cause__ or current.__context__
    return None


def _explain(kind: str, message: str, exc: BaseException) -> str:
    """What the hub's bare `401 Client Error.` means for this repo, and the variable that changes it."""
    status = _status(exc) or _status(exc.__cause__ or exc)
    if kind == "gated" and status == 403:
        return (f"gated repo: the token has no access to it; ask for access on the repo's page, or set HF_TOKEN "
                f"to a token that has it ({message})")
    if kind == "gated":
        return f"gated repo: it needs authentication; set HF_TOKEN to a token with access to it ({message})"
    if kind == "missing_repo" and status == 401:
        return f"repo not found, or private or gated: if you have access, set HF_TOKEN ({message})"
    return message


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


class HubFetcher:
    """Reads repos from one hub endpoint. All network access goes through huggingface_hub."""

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        cache_dir: str | Path | None = None,
        offline: bool | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = 4,
        backoff: float = 2.0,
        max_template_bytes: int = MAX_TEMPLATE_BYTES,
        max_config_bytes: int = MAX_CONFIG_BYTES,
        gguf_first_chunk: int = FIRST_CHUNK,
    ) -> None:
        from huggingface_hub import HfApi, constants

        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        self.token = token if token is not None else (os.environ.get("HF_TOKEN") or None)
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.offline = bool(constants.HF_HUB_OFFLINE) if offline is None else offline
        self.sleep = sleep
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        self.max_template_bytes = max_template_bytes
        self.max_config_bytes = max_config_bytes
        self.gguf_first_chunk = gguf_first_chunk
        self.api = HfApi(endpoint=self.endpoint, token=self.token)
        # set by the first failed connection; every later call fails with it at once, without a request
        self.unreachable: HubError | None = None

    @property
    def cache_path(self) -> str:
        """The hub cache this fetcher reads and fills (HF_HUB_CACHE, or HF_HOME/hub, unless given)."""
        from huggingface_hub import constants

        return self.cache_dir or constants.HF_HUB_CACHE

    # -- retry ----------------------------------------------------------------------------------------------

    def _classify(self, exc: BaseException) -> tuple[str, bool]:
        """(failure kind, retryable) for an exception out of huggingface_hub / httpx2."""
        from huggingface_hub import errors

        if isinstance(exc, errors.GatedRepoError):
            return "gated", False
        if isinstance(exc, errors.RepositoryNotFoundError):
            return "missing_repo", False
        if isinstance(exc, errors.RevisionNotFoundError):
            return "missing_revision", False
        if isinstance(exc, errors.RemoteEntryNotFoundError):
            return "missing_file", False
        if isinstance(exc, errors.OfflineModeIsEnabled):
            return "offline", False
        if isinstance(exc, errors.LocalEntryNotFoundError):
            cause = exc.__cause__
            if cause is not None and cause is not exc:
                kind, retry = self._classify(cause)
                if kind != "error":
                    return kind, retry
            return ("offline", False) if self.offline else ("network", True)
        status = _status(exc)
        if status is not None:
            if status == 429:
                return "rate_limited", True
            if status >= 500:
                return "server_error", True
            if status in (401, 403):
                return "gated", False
            if status == 404:
                return "missing_repo", False
            return "error", False
        if type(exc).__name__ in ("RemoteProtocolError", "IncompleteRead") or "Consistency check failed" in str(exc):
            return "truncated", True
        if type(exc).__module__.startswith(("httpx", "httpcore")) or isinstance(exc, ConnectionError | TimeoutError):
            return "network", True
        return "error", False

    def _call(self, fn: Callable[[], T], repo_id: str, file: str | None) -> T:
        """Run fn with a bounded exponential backoff on 429 / 5xx / broken transfers; other errors raise now.
        A failed connection makes the hub unreachable for the rest of the run (the module docstring says why)."""
        for attempt in range(self.max_attempts):
            down = self.unreachable
            if down is not None:
                raise HubError(str(down), repo_id=repo_id, kind="unreachable")
            try:
                return fn()
            except HubError:
                raise
            except Exception as exc:
                reason = _connect_failure(exc)
                if reason is not None:
                    self.unreachable = HubError(unreachable_message(self.endpoint, reason), kind="unreachable")
                    raise HubError(str(self.unreachable), repo_id=repo_id, kind="unreachable") from exc
                kind, retryable = self._classify(exc)
                message = _one_line(exc)
                if not retryable or attempt == self.max_attempts - 1:
                    raise HubError(_explain(kind, message, exc), repo_id=repo_id, kind=kind) from exc
                self.sleep(self.backoff * (2 ** attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- discovery ------------------------------------------------------------------------------------------

    def discover(self, limit: int) -> list[str]:
        """Ids of the `limit` most downloaded text-generation models."""
        if limit <= 0 or self.offline:
            return []
        self._call(self._reach, "", None)

        def run() -> list[str]:
            models = self.api.list_models(filter="text-generation", sort="downloads", limit=limit)
            return [m.id for m in models if isinstance(m.id, str)]

        return self._call(run, "", None)

    def _reach(self) -> None:
        """One request that opens a connection to the hub, whatever it answers. huggingface_hub's listing retries
        a refused connection five times over 23 s on its own; the model info read first for a repo does not, so
        only discovery needs this (and each run discovers once)."""
        from huggingface_hub import constants, get_session

        get_session().head(f"{self.endpoint}/api/models", params={"limit": "1"},
                           timeout=constants.HF_HUB_ETAG_TIMEOUT).close()

    # -- one repo -------------------------------------------------------------------------------------------

    def _download(self, repo_id: str, filename: str, revision: str) -> Path:
        from huggingface_hub import hf_hub_download

        def run() -> str:
            return hf_hub_download(
                repo_id, filename, revision=revision, endpoint=self.endpoint, token=self.token,
                cache_dir=self.cache_dir, local_files_only=self.offline,
            )

        return Path(self._call(run, repo_id, filename))

    def _cached_record(self, repo_id: str) -> RepoRecord | None:
        """What the hub cache holds of a repo no manifest recorded (the command line reading `org/name` under
        HF_HUB_OFFLINE): the commit `main` pointed at when the user's tools downloaded it (refs/main), else the
        snapshot written last (this fetcher downloads at a commit sha, which records no ref), and its files."""
        from huggingface_hub.file_download import repo_folder_name

        root = Path(self.cache_path) / repo_folder_name(repo_id=repo_id, repo_type="model")
        try:
            revision = (root / "refs" / "main").read_text(encoding="utf-8").strip()
        except OSError:
            snapshots = sorted((p for p in (root / "snapshots").glob("*") if p.is_dir()),
                               key=lambda p: p.stat().st_mtime)
            revision = snapshots[-1].name if snapshots else ""
        snapshot = root / "snapshots" / revision
        if not revision or not snapshot.is_dir():
            return None
        return RepoRecord(revision=revision, files=sorted(p.relative_to(snapshot).as_posix()
                                                          for p in snapshot.rglob("*") if p.is_file()))

    def _limit(self, filename: str) -> int:
        return self.max_config_bytes if filename == TOKENIZER_CONFIG else self.max_template_bytes

    def fetch_repo(self, repo_id: str, known: RepoRecord | None = None, *, skip_if_revision: str | None = None
                   ) -> RepoFetch:
        """Fetch one repo. With skip_if_revision equal to the hub's current sha, nothing is downloaded."""
        sizes: dict[str, int | None] = {}
        if self.offline:
            known = known or self._cached_record(repo_id)
            if known is None:  # what huggingface_hub answers too: offline, only the cache is read
                return RepoFetch(repo_id, None, failures=[Failure(
                    repo_id, "offline", f"offline mode (HF_HUB_OFFLINE=1) and the repo is not in the hub cache "
                                        f"({self.cache_path}): nothing to read it from")])
            revision = known.revision
            sizes = {f: None for f in known.files}
        else:
            try:
                info = self._call(lambda: self.api.model_info(repo_id, files_metadata=True), repo_id, None)
            except HubError as e:
                return RepoFetch(repo_id, None, failures=[Failure(repo_id, e.kind, _hub_message(e, repo_id))])
            revision = info.sha or ""
            if not revision:
                return RepoFetch(repo_id, None, failures=[Failure(repo_id, "malformed", "model info has no sha")])
            if skip_if_revision == revision:
                return RepoFetch(repo_id, revision, files=list(known.files) if known else [], unchanged=True)
            for s in info.siblings or []:
                sizes[s.rfilename] = s.size
        files = [f for f in TEMPLATE_FILES if f in sizes]
        files += sorted(f for f in sizes if f.startswith(ADDITIONAL_DIR) and f.endswith(".jinja"))
        gguf = first_gguf(sizes)
        result = RepoFetch(repo_id, revision, files=[*files, gguf] if gguf else files)
        if not files and not gguf:
            result.failures.append(Failure(repo_id, "no_template", "no chat template file in the repo"))
            return result
        for filename in files:
            limit = self._limit(filename)
            size = sizes.get(filename)
            if size is not None and size > limit:
                result.failures.append(Failure(
                    repo_id, "oversize", f"{size} bytes, over the {limit}-byte limit: not downloaded", filename))
                continue
            try:
                path = self._download(repo_id, filename, revision)
                data = _read_capped(path, limit)
                result.templates.extend(extract_templates(filename, data))
            except HubError as e:
                result.failures.append(Failure(repo_id, e.kind, _hub_message(e, repo_id), filename))
            except OSError as e:
                result.failures.append(Failure(repo_id, "error", f"cannot read download: {e.strerror or e}",
                                               filename))
        result.templates = _dedupe_defaults(result.templates)
        if gguf:
            self._add_gguf_templates(result, gguf)
        return result

    def fetch_many(self, wanted: Sequence[tuple[str, RepoRecord | None, str | None]], *, jobs: int = 1,
                   progress: Callable[[int, int], None] | None = None) -> Iterator[RepoFetch]:
        """fetch_repo(repo_id, known, skip_if_revision=skip) for each of `wanted`, yielded in that order (so what
        is made of them does not depend on which answer came first), with up to `jobs` repos fetched at once
        by threads: the work is waiting on the hub, and huggingface_hub's client is shared between threads.
        `progress(done, total)` is called as fetches finish, in whatever order they finish. A repo not yet
        started when the caller stops iterating is never fetched."""
        total = len(wanted)
        if jobs <= 1 or total <= 1:
            for i, (repo_id, known, skip) in enumerate(wanted, 1):
                result = self.fetch_repo(repo_id, known, skip_if_revision=skip)
                if progress:
                    progress(i, total)
                yield result
            return
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="hub-fetch")
        try:
            futures = [pool.submit(self.fetch_repo, repo_id, known, skip_if_revision=skip)
                       for repo_id, known, skip in wanted]
            shown = 0

            def show() -> None:
                nonlocal shown
                done = sum(f.done() for f in futures)
                if progress and done != shown:
                    shown = done
                    progress(done, total)

            nxt = 0
            while nxt < total:
                if not futures[nxt].done():
                    concurrent.futures.wait([f for f in futures[nxt:] if not f.done()],
                                            return_when=concurrent.futures.FIRST_COMPLETED)
                show()
                while nxt < total and futures[nxt].done():
                    yield futures[nxt].result()
                    nxt += 1
            show()
        finally:
            # (the caller stopped early, or failed: queued fetches are dropped, running ones end on their own)
            pool.shutdown(wait=True, cancel_futures=True)

    def _add_gguf_templates(self, result: RepoFetch, filename: str) -> None:
        """The templates in a GGUF's header that the repo's template files do not already hold (a GGUF-only
        repo's, or a GGUF converted with another template), named `<file>` and `<file>:<variant>`."""
        repo_id, revision = result.repo_id, result.revision
        assert revision is not None
        try:
            header = self._gguf_header(repo_id, filename, revision)
            found = gguf_templates(header, name=filename)
        except HubError as e:
            result.failures.append(Failure(repo_id, e.kind, _hub_message(e, repo_id), filename))
            return
        except GGUFError as e:
            kind = "no_template" if not result.templates and "no chat template" in str(e) else "malformed"
            result.failures.append(Failure(repo_id, kind, str(e).removeprefix(f"{filename}: "), filename))
            return
        known = {t.data for t in result.templates}
        for variant, text in found.templates.items():
            data = text.encode("utf-8", "surrogateescape")
            if data in known:
                continue
            key = CHAT_TEMPLATE_KEY if variant == "default" else f"{CHAT_TEMPLATE_KEY}.{variant}"
            result.templates.append(Extracted(gguf_template_name(filename, variant), filename, key, data))

    def _gguf_header(self, repo_id: str, filename: str, revision: str) -> GGUFHeader:
        """The header of a GGUF on the hub, read with HTTP Range requests (a first chunk, then more only while
        the header goes on), never the multi-GB file; from the hub cache when the whole file is there."""
        from huggingface_hub import (
            constants,
            get_hf_file_metadata,
            get_session,
            hf_hub_url,
            hf_raise_for_status,
            try_to_load_from_cache,
        )
        from huggingface_hub.utils._headers import build_hf_headers  # (public, but re-exported lazily: typed here)

        cached = try_to_load_from_cache(repo_id, filename, cache_dir=self.cache_dir, revision=revision)
        if isinstance(cached, str):
            return read_gguf_file(cached, first_chunk=self.gguf_first_chunk)
        if self.offline:
            raise HubError("offline mode and the GGUF is not in the cache (its header is read over the network)",
                           repo_id=repo_id, kind="offline")
        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=self.endpoint)
        meta = self._call(lambda: get_hf_file_metadata(url, token=self.token, endpoint=self.endpoint),
                          repo_id, filename)
        location = meta.location or url
        headers = build_hf_headers(token=self.token)
        if _origin(location) != _origin(url):  # a signed CDN url: the token stays on the hub (as hf_hub_download)
            headers.pop("authorization", None)

        def read_at(offset: int, size: int) -> bytes:
            def run() -> bytes:
                request = {**headers, "Range": f"bytes={offset}-{offset + size - 1}"}
                with get_session().stream("GET", location, headers=request, follow_redirects=True,
                                          timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT) as response:
                    if response.status_code == 416:  # the range starts at or after the end: the file ends here
                        return b""
                    hf_raise_for_status(response)
                    skip = 0
                    if response.status_code == 206:
                        start = response.headers.get("Content-Range", "").removeprefix("bytes ").split("-")[0]
                        if start != str(offset):
                            raise HubError(f"asked for bytes from {offset}, got Content-Range "
                                           f"{response.headers.get('Content-Range')!r}", kind="malformed")
                    else:  # the server ignored the Range: read on to the range, and no further
                        skip = offset
                    data = bytearray()
                    for chunk in response.iter_bytes():
                        data += chunk
                        if len(data) >= skip + size:
                            break
                    return bytes(data[skip:skip + size])

            return self._call(run, repo_id, filename)

        return read_gguf_header(read_at, name=filename, first_chunk=self.gguf_first_chunk)


def gguf_template_name(filename: str, variant: str) -> str:
    """How a GGUF's template is named among a repo's (and in its origin, `hub:org/name#<file>[:<variant>]`)."""
    return filename if variant == "default" else f"{filename}:{variant}"


_SHARD = re.compile(r"-(\d{5})-of-\d{5}\.gguf$")


def first_gguf(files: Iterable[str]) -> str | None:
    """The GGUF whose header a repo's template is read from: the first by name, leaving out projector files
    (mmproj-*.gguf: a vision encoder, no chat template) and shards after the first (only the first of a split
    model holds the key/value metadata)."""
    for name in sorted(files):
        base = name.rsplit("/", 1)[-1]
        shard = _SHARD.search(base)
        if base.endswith(".gguf") and not base.lower().startswith("mmproj") and (shard is None or
                                                                                shard.group(1) == "00001"):
            return name
    return None


def _origin(url: str) -> tuple[str, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _hub_message(e: HubError, repo_id: str) -> str:
    return str(e).removeprefix(f"{repo_id}: ") if repo_id else str(e)


def _read_capped(path: Path, limit: int) -> bytes:
    """The downloaded file, refused when over the limit (the metadata size is the hub's word, not proof)."""
    size = path.stat().st_size
    if size > limit:
        raise HubError(f"{size} bytes, over the {limit}-byte limit", kind="oversize")
    with path.open("rb") as f:
        return f.read(limit + 1)


def _dedupe_defaults(templates: list[Extracted]) -> list[Extracted]:
    """One template per name; lower-precedence sources that disagree are kept under a source-qualified name.

    TEMPLATE_FILES is ordered lowest precedence first, and additional_chat_templates/ override the named
    templates of tokenizer_config.json, matching how transformers resolves them.
    """
    winners: dict[str, Extracted] = {}
    for t in templates:  # later sources win
        winners[t.template_name] = t
    out = dict(winners)
    for t in templates:
        w = winners[t.template_name]
        if t is w or t.data == w.data:
            continue
        stem = t.source_file.rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".jinja")
        alt = stem if t.template_name == "default" else f"{t.template_name}.{stem}"
        out.setdefault(alt, Extracted(alt, t.source_file, t.source_key, t.data))
    return [out[k] for k in sorted(out)]
