"""The C++ as a live oracle: run corpus templates and round-trip scenarios through llama.cpp and through us.

tools/cpp_oracle builds a small driver against llama.cpp's `common` (any source tree; by default the one
vendored in the llama-cpp-python sdist the project pins). It reads JSON lines (template, requests, outputs) and
writes what llama.cpp makes of them: the analysis record, prompt, generation prompt, grammar and triggers, and
the parsed messages, or the C++ error. This module feeds it, computes the same fields with autoparser, and
reports each field where the two differ, as *known* (a ratchet entry with its reason) or *new*:

    divergences = compare_corpus(Path("build/cpp_oracle/cpp_oracle"), Corpus.load(), only=["Qwen__*"])

`regenerate_goldens` rewrites the goldens under tests/data (analysis records, the chat cases' `cpp` fields,
the round-trip goldens' `oracle`, the strict mutations' `cpp`) from the driver's output: moving the reference
to a newer llama.cpp is point at its source, build, regenerate, read the diff.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import hashlib
import json
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoparser.chat.compare import as_message, message_differences, renormalize_json
from autoparser.corpus import Corpus, CorpusEntry
from autoparser.corpus.mutations import KINDS, TRUNCATION_KINDS, mutations
from autoparser.corpus.report import select_entries
from autoparser.corpus.roundtrip import NOW_TEXT, SCENARIOS, build_output, generate_cached, generator_request
from autoparser.corpus.workers import map_templates
from autoparser.errors import AutoparserError, cli_error
from autoparser.params import generate, strict_analysis
from autoparser.template.sandbox import time_budget

__all__ = [
    "REQUEST_FIELDS",
    "STRICT_MUTATIONS",
    "ConformanceRun",
    "Divergence",
    "DriverError",
    "compare_corpus",
    "conformance",
    "dumps_golden",
    "known_reason",
    "regenerate_goldens",
    "run_driver",
    "stale_entries",
    "strict_mutation_answers",
    "strict_mutation_rows",
    "strict_parse_divergence",
]

# What both sides say about one request, in the goldens' order (tests/data/chat_cases.jsonl "cpp").
REQUEST_FIELDS = ("format", "prompt", "generation_prompt", "grammar", "grammar_lazy", "grammar_triggers",
                  "preserved_tokens", "additional_stops", "thinking_start_tag", "thinking_end_tags")


class DriverError(AutoparserError):
    """The driver could not be run, or answered something that is not its protocol."""


# --- running the driver ---------------------------------------------------------------------------------------

def _run_chunk(command: Sequence[str], jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    what = " ".join(command)
    with tempfile.TemporaryFile("w+b") as stdin:
        for job in jobs:
            stdin.write((json.dumps(job, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape"))
        stdin.seek(0)
        try:
            done = subprocess.run(list(command), stdin=stdin, capture_output=True, check=False)
        except OSError as e:
            raise DriverError(f"cannot run the driver {what}: {e.strerror or e}") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise DriverError(f"the driver {what} exited with {done.returncode}: {' '.join(tail)}")
    out = [json.loads(line) for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if [o.get("id") for o in out] != [j["id"] for j in jobs]:
        raise DriverError(f"the driver {what} answered {len(out)} lines for {len(jobs)} jobs, or out of order")
    return out


def run_driver(driver: Path | Sequence[str], jobs: Sequence[Mapping[str, Any]], *, workers: int = 1, chunk: int = 8,
               progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """The driver's answer to each job, in order; `workers` driver processes share the jobs, `chunk` at a time
    (a template that crashes the C++ outright loses only its chunk's answers, with the driver's message).
    `driver` is the C++ driver, or the command of any program that speaks its protocol (a JSON line per job in,
    a JSON line per job out, in order, with the job's `id`), as the matrix's SGLang bridge does."""
    command = [str(driver)] if isinstance(driver, Path) else list(driver)
    chunks = [list(jobs[i:i + chunk]) for i in range(0, len(jobs), chunk)]
    results: list[list[dict[str, Any]]] = [[] for _ in chunks]
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(_run_chunk, command, c): i for i, c in enumerate(chunks)}
        for fut in concurrent.futures.as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except DriverError as e:
                results[i] = [{"id": j["id"], "error": f"driver failed: {e}"} for j in chunks[i]]
            done += len(chunks[i])
            if progress:
                progress(done, len(jobs))
    return [r for c in results for r in c]


# --- our side -------------------------------------------------------------------------------------------------

def our_request(source: str, params: Mapping[str, Any], outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What autoparser makes of one request, in the driver's shape (the parse is llama.cpp's: strict)."""
    try:
        p = generate(source, params)
    except AutoparserError as e:
        return {"error": str(e)}
    out = p.to_dict()  # the REQUEST_FIELDS
    parsed: list[dict[str, Any]] = []
    for o in outputs:
        try:
            parsed.append(p.parse(o["text"], is_partial=bool(o.get("is_partial")), strict=True).to_dict())
        except AutoparserError as e:
            parsed.append({"error": str(e)})
    out["parsed"] = parsed
    return out


def our_analysis(source: str) -> dict[str, Any]:
    try:
        return strict_analysis(source).to_dict()
    except AutoparserError as e:
        return {"error": str(e)}


# --- comparing ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Divergence:
    """One field where llama.cpp and autoparser differ: `case` is "<template>" or "<template>/<scenario>",
    `field` a dotted path ("analysis.reasoning.end", "grammar", "parsed")."""

    case: str
    field: str
    cpp: Any
    ours: Any
    reason: str | None = None  # the ratchet's reason: a known divergence
    format: str | None = None  # the chat format llama.cpp chose for the request (None: the template's analysis)

    @property
    def key(self) -> str:
        return f"{self.case}:{self.field}"

    @property
    def cause(self) -> str:
        """What the divergence is grouped under: its known reason, or, for a new one, the kind of field that
        differs and the format llama.cpp chose (one upstream change shows as one group, however many templates
        of that format it touches)."""
        if self.reason:
            return self.reason
        head = self.field.split(".", 1)[0] if not self.field.startswith("analysis.") \
            else ".".join(self.field.split(".")[:2])
        return f"new: {head}" + (f" ({self.format})" if self.format else "")

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "field": self.field, "cpp": self.cpp, "ours": self.ours, "known": self.reason}


def _leaf_differences(cpp: Any, ours: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(cpp, dict) and isinstance(ours, dict) and "error" not in cpp and "error" not in ours:
        for k in dict.fromkeys([*cpp, *ours]):
            yield from _leaf_differences(cpp.get(k), ours.get(k), f"{path}.{k}" if path else k)
    elif cpp != ours:
        yield path, cpp, ours


_NODE_RULE = re.compile(r"\b(ac|until)-(\d+)(?=\b|-)")


def _without_node_ids(grammar: str) -> list[str]:
    """A grammar's rules with every `ac-<id>` / `until-<id>` family renamed after its own definition.

    llama.cpp names the automaton of an until-delimiter match after the PEG node's id in its arena; two
    arenas that number their nodes differently give the same grammar under other names. Each family (the
    rule and its `-NN` states) is renamed to a digest of its definitions with its own name blanked out."""
    lines = grammar.splitlines()
    families: dict[str, list[str]] = {}
    for line in lines:
        m = _NODE_RULE.match(line)
        if m:
            families.setdefault(m.group(0), []).append(line)
    names: dict[str, str] = {}
    for name, body in families.items():
        own = re.compile(re.escape(name) + r"(?=\b|-)")
        digest = hashlib.sha256("\n".join(sorted(own.sub("@", b) for b in body)).encode()).hexdigest()[:12]
        names[name] = f"{name.split('-', 1)[0]}-{digest}"
    return sorted(_NODE_RULE.sub(lambda m: names.get(m.group(0), m.group(0)), line) for line in lines)


def node_ids_only(cpp: Any, ours: Any) -> bool:
    """The two grammars differ only in the node ids of their `ac-` / `until-` rule names."""
    return isinstance(cpp, str) and isinstance(ours, str) and cpp != ours and \
        _without_node_ids(cpp) == _without_node_ids(ours)


def _parsed_differences(cpp: Any, ours: Any) -> str | None:
    """The C++ test's rules (whitespace at the ends ignored, arguments compared as JSON); None when equal."""
    cpp_failed, we_failed = isinstance(cpp, dict) and "error" in cpp, isinstance(ours, dict) and "error" in ours
    if cpp_failed or we_failed:
        return None if cpp_failed == we_failed else "one side failed"
    diffs = message_differences(as_message(cpp), as_message(ours), compare_ids=False)
    return "; ".join(diffs) or None


def strict_parse_divergence(cpp: Mapping[str, Any], ours: Mapping[str, Any]) -> str | None:
    """What differs between the C++'s parse of one output and our strict one (each a message dict, or {"error":
    ...}), said for a reader; None when they agree. The C++ test's rules (`_parsed_differences`: an error on
    both sides agrees), and one more: they take any two arguments that are no JSON as equal, so where the C++'s
    are none (a call cut short) ours must be the same text."""
    if "error" in cpp or "error" in ours:
        if "error" in cpp and "error" in ours:
            return None
        if "error" in cpp:
            return f"the C++ refuses the output ({cpp['error']!r}), we read {dict(ours)}"
        return f"we refuse the output ({ours['error']!r}), the C++ reads {dict(cpp)}"
    want, got = as_message(cpp), as_message(ours)
    diffs = message_differences(want, got, compare_ids=False)
    diffs += [f"tool_calls[{i}].arguments: no JSON, expected {w.arguments!r}, got {g.arguments!r}"
              for i, (w, g) in enumerate(zip(want.tool_calls, got.tool_calls))
              if not renormalize_json(w.arguments) and w.arguments != g.arguments]
    return "; ".join(diffs) or None


def compare_case(case: str, cpp: Mapping[str, Any], ours: Mapping[str, Any]) -> list[Divergence]:
    """The divergences of one request (or one analysis when the records hold "analysis")."""
    out: list[Divergence] = []
    if "analysis" in cpp:
        out += [Divergence(case, f"analysis.{p}" if p else "analysis", c, o)
                for p, c, o in _leaf_differences(cpp["analysis"], ours["analysis"], "")]
        return out
    if "error" in cpp or "error" in ours:
        if ("error" in cpp) != ("error" in ours):
            out.append(Divergence(case, "error", cpp.get("error"), ours.get("error")))
        return out
    for f in REQUEST_FIELDS:
        if cpp.get(f) != ours.get(f):
            # a grammar equal up to node ids is its own kind: the same language, other rule names
            name = "grammar.node_ids" if f == "grammar" and node_ids_only(cpp.get(f), ours.get(f)) else f
            out.append(Divergence(case, name, cpp.get(f), ours.get(f)))
    for i, (c, o) in enumerate(zip(cpp.get("parsed", []), ours.get("parsed", []))):
        why = _parsed_differences(c, o)
        if why:
            out.append(Divergence(case, "parsed" if i == 0 else f"parsed.{i}", c, o))
    return out


def _scenario_jobs(entry: CorpusEntry) -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver's job for one template (analysis + every round-trip scenario it expresses) and our side of
    it. A scenario our generator fails on is sent too: its `error` is a divergence when the C++ succeeds."""
    source = entry.read_text()
    requests = []
    ours: dict[str, Any] = {"analysis": {}, "requests": []}
    with time_budget(phase=f"comparing {entry.name} with llama.cpp"):  # one budget per template, as the report
        ours["analysis"] = our_analysis(source)
        for scenario in SCENARIOS:
            try:
                built = build_output(source, scenario)
            except AutoparserError:  # the template does not render this conversation: nothing to compare
                continue
            if built.not_expressible is not None:
                continue
            params = generator_request(built.request)
            outputs = [{"text": built.output, "is_partial": False}]
            requests.append({"id": scenario, "params": params, "now": NOW_TEXT, "outputs": outputs})
            ours["requests"].append({"id": scenario, **our_request(source, params, outputs)})
    job = {"id": entry.name, "template": str(entry.path), "analyze": True, "requests": requests}
    return job, ours


def compare_corpus(driver: Path, corpus: Corpus, *, only: Sequence[str] | None = None, workers: int = 1,
                   known: Mapping[str, str] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> list[Divergence]:
    """Every divergence between the driver and autoparser over the selected templates: the analysis and each
    round-trip scenario the template expresses (prompt, grammar, triggers, parse of the rendered output)."""
    entries = select_entries(corpus, only or None)
    # our side is the first half of the work (in worker processes too), the driver's the second
    pairs = map_templates(_scenario_jobs, entries, jobs=workers, chunksize=4,
                          progress=(lambda done, n: progress(done, 2 * n)) if progress else None)
    jobs = [job for job, _ in pairs]
    ours = {job["id"]: mine for job, mine in pairs}
    answers = run_driver(driver, jobs, workers=workers,
                         progress=(lambda done, n: progress(n + done, 2 * n)) if progress else None)
    known = known or {}
    out: list[Divergence] = []
    for job, ans in zip(jobs, answers):
        name = job["id"]
        if "error" in ans and "analysis" not in ans:
            out.append(Divergence(name, "driver", ans["error"], None))
            continue
        found = compare_case(name, {"analysis": ans.get("analysis", {})}, {"analysis": ours[name]["analysis"]})
        mine = {r["id"]: r for r in ours[name]["requests"]}
        formats: dict[str, str | None] = {}
        for r in ans.get("requests", []):
            formats[f"{name}/{r['id']}"] = r.get("format")
            found += compare_case(f"{name}/{r['id']}", r, mine.get(r["id"], {"error": "not run"}))
        out += [Divergence(d.case, d.field, d.cpp, d.ours, known_reason(known, d), formats.get(d.case))
                for d in found]
    return out


def known_reason(known: Mapping[str, str], d: Divergence) -> str | None:
    """The ratchet's reason for a divergence: keyed "<template>/<scenario>:<field>" for one case, or
    "<template>:<field>" for that field in every case of the template."""
    template = d.case.split("/", 1)[0]
    return known.get(d.key) or known.get(f"{template}:{d.field}")


def stale_entries(known: Mapping[str, str], divs: Sequence[Divergence], templates: Iterable[str]) -> list[str]:
    """Ratchet entries of the compared templates that no divergence uses any more (to remove: it got better)."""
    used = {d.key for d in divs} | {f"{d.case.split('/', 1)[0]}:{d.field}" for d in divs}
    names = set(templates)
    return sorted(k for k in known if k.split(":", 1)[0].split("/", 1)[0] in names and k not in used)


# --- regenerating the goldens ---------------------------------------------------------------------------------

def dumps_golden(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=True)  # the goldens' own style (json.dumps defaults)


_SET_FOLDER = {"llamacpp": "templates", "packages": "packages", "hub": "hub"}  # golden set -> seed folder


def _seed_path(corpus: Corpus, folder: str, name: str) -> str:
    return str(corpus.by_origin(f"seed:{folder}/{name}").path)


def regenerate_goldens(driver: Path, data: Path, corpus: Corpus, *, workers: int = 1,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Rewrite the C++-made fields of the goldens under `data` from the driver; returns, per file, how many
    rows changed. A file whose rows did not change is not touched (its bytes, gzip header included, stay)."""
    changed: dict[str, int] = {}
    analysis_files = {"analysis.jsonl": "templates", "analysis_packages.jsonl": "packages",
                      "analysis_hub.jsonl": "hub"}
    for fname, folder in analysis_files.items():
        rows = [json.loads(line) for line in (data / fname).read_text(encoding="utf-8").splitlines()]
        jobs = [{"id": str(i), "template": _seed_path(corpus, folder, r["template"]), "analyze": True}
                for i, r in enumerate(rows)]
        answers = run_driver(driver, jobs, workers=workers, progress=progress)
        new = [{"template": r["template"], **a["analysis"]} for r, a in zip(rows, answers)]
        changed[fname] = _write_lines(data / fname, rows, new)

    cases = [json.loads(line) for line in (data / "chat_cases.jsonl").read_text(encoding="utf-8").splitlines()]
    jobs = [{"id": str(i), "template": _seed_path(corpus, "templates", c["template"]),
             "requests": [{"id": "0", "params": c["params"], "now": c.get("now", ""),
                           "outputs": [{"text": c["input"], "is_partial": c["is_partial"]}]}]}
            for i, c in enumerate(cases)]
    answers = run_driver(driver, jobs, workers=workers, progress=progress)
    new_cases = []
    for c, a in zip(cases, answers):
        r = a["requests"][0] if a.get("requests") else {"error": a.get("error", "no answer")}
        cpp = {f: r[f] for f in REQUEST_FIELDS if f in r}
        if "parsed" in r:
            cpp["parsed"] = r["parsed"][0]
        if "error" in r:
            cpp = {"error": r["error"]}
        new_cases.append({**c, "cpp": cpp})
    changed["chat_cases.jsonl"] = _write_lines(data / "chat_cases.jsonl", cases, new_cases)

    for path in sorted((data / "roundtrip").glob("roundtrip_*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f.read().splitlines()]
        jobs = [{"id": str(i), "template": _seed_path(corpus, _SET_FOLDER[r["set"]], r["template"]),
                 "requests": [{"id": "0", "params": generator_request(r["request"]), "now": NOW_TEXT,
                               "outputs": [{"text": r["output"], "is_partial": False}]}]}
                for i, r in enumerate(rows)]
        answers = run_driver(driver, jobs, workers=workers, progress=progress)
        new_rows = []
        for r, a in zip(rows, answers):
            req = a["requests"][0] if a.get("requests") else {}
            parsed = req.get("parsed") if "error" not in req else None
            # the round-trip goldens keep an assistant message's own fields only
            parsed = [m if "error" in m else {k: m[k] for k in ("role", "content", "reasoning_content", "tool_calls")}
                      for m in parsed] if parsed is not None else None
            row = {**r, "oracle": {"parsed": parsed}}
            if parsed != r["oracle"]["parsed"]:
                # the C++ reads this output differently now: whether that is what the output means is decided
                # by the C++ test's rules; the old failure class (the golden generator's diagnosis) no longer holds
                why = ("the C++ gave no parse" if not parsed or "error" in parsed[0] else
                       "; ".join(message_differences(as_message(r["expected_from_output"]), as_message(parsed[0]),
                                                     compare_ids=False)))
                row["oracle_matches_output_expectation"] = not why
                row["failure_class"] = f"regenerated: {why}" if why else None
            new_rows.append(row)
        changed[f"roundtrip/{path.name}"] = _write_lines(path, rows, new_rows)

    path = data / STRICT_MUTATIONS
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    answers = strict_mutation_answers(driver, rows, corpus, workers=workers, progress=progress)
    changed[STRICT_MUTATIONS] = _write_lines(path, rows, [{**r, "cpp": a} for r, a in zip(rows, answers)])
    return changed


STRICT_MUTATIONS = "strict_mutations.jsonl"
_MESSAGE_FIELDS = ("role", "content", "reasoning_content", "tool_calls")  # an assistant message's own fields


def strict_mutation_rows(goldens: Iterable[Mapping[str, Any]], corpus: Corpus) -> list[dict[str, Any]]:
    """The rows of strict_mutations.jsonl, without their `cpp`, made from round-trip golden rows: each golden's
    output broken by every mutation that applies (autoparser.corpus.mutations: KINDS + TRUNCATION_KINDS), with
    the markers of its request as autoparser generates it. A golden whose request autoparser cannot generate
    gives none (there are no markers to break its output with)."""
    out: list[dict[str, Any]] = []
    for g in goldens:
        source = corpus.by_origin(f"seed:{_SET_FOLDER[g['set']]}/{g['template']}").read_text()
        try:
            params = generate_cached(source, generator_request(g["request"]))
        except AutoparserError:
            continue
        request = {k: v for k, v in g["request"].items() if k != "outputs"}  # (the unbroken output's)
        for m in mutations(params, g["output"], as_message(g["expected_from_output"]), KINDS + TRUNCATION_KINDS):
            out.append({"template": g["template"], "set": g["set"], "scenario": g["scenario"], "request": request,
                        "kind": m.kind, "output": m.output})
    return out


def strict_mutation_answers(driver: Path, rows: Sequence[Mapping[str, Any]], corpus: Corpus, *, workers: int = 1,
                            progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """The `cpp` field of each row of strict_mutations.jsonl (template, set, request, output): {"parsed":
    message} (an assistant message's own fields) or {"error": ...}. Rows of one template and request are one
    job of the driver, which builds that request's parser once."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(rows):
        key = (r["set"], r["template"], json.dumps(r["request"], ensure_ascii=True))
        groups.setdefault(key, []).append(i)
    jobs = [{"id": str(n), "template": _seed_path(corpus, _SET_FOLDER[set_], template),
             "requests": [{"id": "0", "params": generator_request(rows[idx[0]]["request"]), "now": NOW_TEXT,
                           "outputs": [{"text": rows[i]["output"], "is_partial": False} for i in idx]}]}
            for n, ((set_, template, _), idx) in enumerate(groups.items())]
    answers = run_driver(driver, jobs, workers=workers, progress=progress)
    cpp: list[dict[str, Any]] = [{} for _ in rows]
    for idx, a in zip(groups.values(), answers):
        req = a["requests"][0] if a.get("requests") else {"error": a.get("error", "no answer")}
        parsed = req.get("parsed") or []
        for k, i in enumerate(idx):
            m = {"error": req["error"]} if "error" in req else parsed[k] if k < len(parsed) else {"error": "no answer"}
            cpp[i] = {"error": m["error"]} if "error" in m else {"parsed": {f: m[f] for f in _MESSAGE_FIELDS}}
    return cpp


def _write_lines(path: Path, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> int:
    n = sum(1 for a, b in zip(old, new) if dumps_golden(a) != dumps_golden(b))
    if n == 0:
        return 0
    text = "".join(dumps_golden(r) + "\n" for r in new)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return n


def load_known(path: Path) -> dict[str, str]:
    """The ratchet of known divergences: {"<case>:<field>" or "<case>": reason}."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): str(v) for k, v in raw.items() if not str(k).startswith("_")}


# --- the command --------------------------------------------------------------------------------------------------

REPORT_JSON = "cpp-divergences.json"
REPORT_MD = "cpp-divergences.md"


def _short(value: Any, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 1] + "…"


def write_divergence_report(divs: Sequence[Divergence], out_dir: Path, *, driver: str, templates: int) -> Path:
    """cpp-divergences.json (every field, whole) + cpp-divergences.md (per template, values trimmed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    new = [d for d in divs if d.reason is None]
    payload = {"driver": driver, "templates": templates, "divergences": len(divs), "new": len(new),
               "items": [d.to_json() for d in divs]}
    (out_dir / REPORT_JSON).write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = ["# llama.cpp vs autoparser", "",
             f"Driver `{driver}`: {templates} templates, {len(divs)} divergences, {len(new)} new.", "",
             "## By cause", "", "| cause | divergences | templates | e.g. |", "|---|---|---|---|"]
    for cause, items in by_cause(divs):
        cells = [cause, str(len(items)), str(len({d.case.split("/", 1)[0] for d in items})),
                 f"{items[0].case} {items[0].field}"]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    lines.append("")
    by_case: dict[str, list[Divergence]] = {}
    for d in divs:
        by_case.setdefault(d.case.split("/", 1)[0], []).append(d)
    for template, items in sorted(by_case.items(), key=lambda kv: (all(d.reason for d in kv[1]), kv[0])):
        lines += [f"## `{template}`", "", "| case | field | llama.cpp | autoparser | known |", "|---|---|---|---|---|"]
        for d in items:
            cells = [d.case, d.field, _short(d.cpp), _short(d.ours), d.reason or "**new**"]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        lines.append("")
    md = out_dir / REPORT_MD
    md.write_text("\n".join(lines), encoding="utf-8")
    return md


def by_cause(divs: Sequence[Divergence]) -> list[tuple[str, list[Divergence]]]:
    """The divergences grouped by `Divergence.cause`, new causes first, then the largest."""
    groups: dict[str, list[Divergence]] = {}
    for d in divs:
        groups.setdefault(d.cause, []).append(d)
    return sorted(groups.items(), key=lambda kv: (kv[1][0].reason is not None, -len(kv[1]), kv[0]))


@dataclass(frozen=True)
class ConformanceRun:
    """A llama.cpp driver run over corpus templates (`conformance`): every divergence, the report it wrote, and
    the ratchet's entries that no divergence uses any more (the two now agree)."""

    templates: int
    divergences: tuple[Divergence, ...]
    report: Path
    stale: tuple[str, ...]

    @property
    def new(self) -> list[Divergence]:
        """The divergences the ratchet does not know."""
        return [d for d in self.divergences if d.reason is None]


def conformance(driver: Path, corpus: Corpus, *, only: Sequence[str] | None, workers: int, known: Path,
                report_dir: Path, progress: Callable[[int, int], None] | None = None) -> ConformanceRun:
    """The driver and autoparser over the templates `only` selects (all by default), each divergence checked
    against the ratchet `known`, the report written into `report_dir` (`autoparser conformance`, and the
    nightly job's upstream watch on a newer build)."""
    names = [e.name for e in select_entries(corpus, only or None)]
    if only and not names:
        raise AutoparserError(f"conformance: no template matches --only {' '.join(only)}")
    ratchet = load_known(known)
    divs = compare_corpus(driver, corpus, only=only, workers=workers, known=ratchet, progress=progress)
    md = write_divergence_report(divs, report_dir, driver=str(driver), templates=len(names))
    return ConformanceRun(len(names), tuple(divs), md, tuple(stale_entries(ratchet, divs, names)))


def run_conformance(args: Any) -> int:
    """`autoparser conformance --cpp DRIVER`: exit 0 when every divergence is known, 1 on a new one, 2 on bad
    input (no driver, no corpus)."""
    from tqdm import tqdm

    driver = Path(args.cpp)
    if not driver.is_file():
        return cli_error(f"conformance: no C++ driver at {driver} (build it: python -m tools.cpp_oracle)")
    try:
        corpus = Corpus.load(Path(args.corpus)) if args.corpus else Corpus.load()
    except AutoparserError as e:
        return cli_error(f"conformance: {e}")
    jobs = max(1, int(args.jobs or 1))
    if args.regenerate:
        data = Path(args.data)
        with tqdm(unit="job", desc="regenerating goldens", disable=None) as bar:
            def tick(done: int, total: int) -> None:  # one count per golden file: each starts the bar again
                if done < bar.n or bar.total != total:
                    bar.reset(total)
                bar.update(done - bar.n)

            try:
                changed = regenerate_goldens(driver, data, corpus, workers=jobs, progress=tick)
            except AutoparserError as e:
                return cli_error(f"conformance: {e}")
        for name, n in changed.items():
            print(f"conformance: {data / name}: {n} rows changed" if n else f"conformance: {data / name}: unchanged")
        return 0
    with tqdm(unit="step", desc="llama.cpp vs autoparser", disable=None) as bar:
        def step(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        run = conformance(driver, corpus, only=args.only, workers=jobs, known=Path(args.known),
                          report_dir=Path(args.report), progress=step)
    names, divs, md, new, stale = run.templates, run.divergences, run.report, run.new, run.stale
    print(f"conformance: {names} templates, {len(divs)} divergences ({len(divs) - len(new)} known, {len(new)} new);"
          f" report in {md}")
    for cause, items in by_cause(new):
        d = items[0]
        print(f"  {cause}: {len(items)} (e.g. {d.case} {d.field}: llama.cpp {_short(d.cpp, 60)} / autoparser "
              f"{_short(d.ours, 60)})")
    for key in stale:
        print(f"  now agrees, remove from {args.known}: {key}")
    return 1 if new or stale else 0
