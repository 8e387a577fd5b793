"""`autoparser analyze | parse | render | gbnf | corpus ...`: thin command-line entry points over the public API.

Every command turns our own errors into a one-line message on stderr and an exit code (2 for bad input, 1 for
output that does not parse or a job that had failures), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from autoparser.errors import AutoparserError, cli_error, read_text_input

Command = Callable[[argparse.Namespace], int]

if TYPE_CHECKING:
    from autoparser.template.source import TemplateSource


def cmd_gbnf(args: argparse.Namespace) -> int:
    """Print the GBNF grammar of a JSON schema file."""
    import json

    from autoparser.gbnf.from_schema import json_schema_to_grammar

    try:
        schema = json.loads(read_text_input(args.schema, "schema"))
    except json.JSONDecodeError as e:
        return cli_error(f"{args.schema}: invalid JSON: {e}", first_line=True)
    except AutoparserError as e:
        return cli_error(str(e), first_line=True)
    warnings: list[str] = []
    try:
        sys.stdout.write(json_schema_to_grammar(schema, warnings=warnings))
    except AutoparserError as e:
        return cli_error(str(e).replace("\n", " "), first_line=True)
    for w in warnings:
        print(f"autoparser: warning: {args.schema}: {w}", file=sys.stderr)
    return 0


def _template(args: argparse.Namespace) -> TemplateSource:
    """The template a command's TEMPLATE argument (and --variant) names: one resolver for every command."""
    from autoparser.corpus.source import load_template

    return load_template(args.template, variant=args.variant)


def cmd_analyze(args: argparse.Namespace) -> int:
    """Analyse a template: capabilities, modes and markers (table, or --json in the C++ record shape), and the
    parser generated for a plain request (table, or --json with --tools)."""
    import contextlib
    import io
    import json

    from autoparser.analysis.report import run_analyze
    from autoparser.params.cli import read_tools

    try:
        template = _template(args)
        tools = read_tools(args.tools) if args.tools else []
    except AutoparserError as e:
        return cli_error(str(e), first_line=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = int(run_analyze(template.source, template.name, as_json=args.json))
    if code != 0:
        sys.stdout.write(out.getvalue())  # --json: the C++ record of a template that failed every render
        return code
    if args.json and not args.tools:
        sys.stdout.write(out.getvalue())  # the C++ record alone: nothing generated is shown
        return 0
    generated = _generated(template, tools)
    failed = isinstance(generated, str)
    if args.json:
        record = json.loads(out.getvalue())
        record["generated"] = {"error": generated} if isinstance(generated, str) else generated
        print(json.dumps(record, ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(out.getvalue())
        print("\nGenerated parser" + (" (with --tools)" if args.tools else " (no tools)"))
        if isinstance(generated, str):
            print(f"  not built: {generated}")
        else:
            _print_generated(generated)
    # The analysis stands either way (it is printed); a parser that could not be built is still a failure.
    return cli_error(f"generating the parser: {generated}", 1, first_line=True) if failed else 0


def _print_generated(generated: dict[str, Any]) -> None:
    import json

    print(f"  handler:  {generated['handler']}")
    print(f"  generation prompt: {json.dumps(generated['generation_prompt'], ensure_ascii=False)}")
    print("  parser (PEG):")
    print("    " + generated["parser"].replace("\n", "\n    "))
    if generated["grammar"]:
        lazy = " (lazy, triggers: " + ", ".join(repr(t["value"]) for t in generated["grammar_triggers"]) + ")" \
            if generated["grammar_lazy"] else ""
        print(f"  grammar (GBNF){lazy}:")
        print("    " + generated["grammar"].rstrip("\n").replace("\n", "\n    "))
    else:
        print("  grammar: none (no tools or response format constrain this request)")


def _generated(template: TemplateSource, tools: list[object]) -> dict[str, Any] | str:
    """What `generate` builds for a plain request on this template with these tools, or why it could not (one
    line)."""
    from autoparser.params import generate

    request = {"messages": [{"role": "user", "content": "Hey there!"}], "tools": tools, "reasoning_format": "auto"}
    try:
        params = generate(template.source, request)
    except AutoparserError as e:
        return str(e).replace("\n", " ").replace("<template>", template.name)  # (generate() names it so)
    info = params.to_dict()
    info["handler"] = params.handler
    info["parser"] = str(params.parser) if params.parser is not None else ""
    return info


def cmd_parse(args: argparse.Namespace) -> int:
    """Parse model output (stdin) with the parser generated for a template; print the message as JSON."""
    from autoparser.params.cli import run_parse

    if "-" in (args.template, args.tools):  # (every other input file may be `-`)
        return cli_error("parse reads the model output from stdin: give the template and --tools as files")
    try:
        template = _template(args)
    except AutoparserError as e:
        return cli_error(str(e), first_line=True)
    return int(run_parse(args, template.source, template.name))


def cmd_export(args: argparse.Namespace) -> int:
    """Print (or merge into a tokenizer_config.json) the Hugging Face response_template of a template."""
    import json
    import os
    import tempfile
    from pathlib import Path

    from autoparser.export import response_template

    spec = response_template(_template(args).source, args.reader)
    text = json.dumps(spec, ensure_ascii=False, indent=2)
    if not args.write:
        print(text)
        return 0
    if args.write == "-":  # (it is read and written back)
        return cli_error("--write takes a tokenizer_config.json file, not stdin")
    target = Path(args.write)
    try:
        config = json.loads(read_text_input(str(target), "tokenizer config"))
    except json.JSONDecodeError as e:
        return cli_error(f"{target}: invalid JSON: {e}", first_line=True)
    if not isinstance(config, dict):
        return cli_error(f"{target}: not a tokenizer config (a JSON object)", first_line=True)
    config["response_template"] = spec  # every other key as it was, in its order
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(config, ensure_ascii=False, indent=2) + "\n")
    os.replace(tmp, target)
    print(f"autoparser: wrote response_template into {target}", file=sys.stderr)
    return 0


def cmd_export_constrained(args: argparse.Namespace) -> int:
    """Print a request's xgrammar structural tag (`structural-tag`) or llguidance Lark grammar (`lark`)."""
    import json

    from autoparser.export.constrained import constraint, to_lark, to_structural_tag
    from autoparser.params.cli import read_tools

    tools = [t for t in read_tools(args.tools) if isinstance(t, dict)]
    c = constraint(_template(args).source, tools, args.tool_choice, args.thinking == "on", args.parallel_tool_calls)
    if args.export_command == "lark":
        sys.stdout.write(to_lark(c))
    else:
        print(json.dumps(to_structural_tag(c), ensure_ascii=False, indent=2))
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    """Print the prompt llama.cpp's built-in format NAME renders for a conversation file, exactly (no newline
    added)."""
    import json

    from autoparser.builtin import llm_chat_apply_template, llm_chat_template_from_str, messages_from_openai

    try:
        fmt = llm_chat_template_from_str(args.builtin)
        conversation = json.loads(read_text_input(args.conversation, "conversation"))
    except json.JSONDecodeError as e:
        return cli_error(f"{args.conversation}: invalid JSON: {e}", first_line=True)
    except AutoparserError as e:  # (an unknown name, or a file that cannot be read: both say which)
        return cli_error(str(e), first_line=True)
    try:
        messages = messages_from_openai(conversation)
    except AutoparserError as e:
        return cli_error(f"{args.conversation}: {e}", first_line=True)
    sys.stdout.write(llm_chat_apply_template(fmt, messages, args.add_generation_prompt))
    return 0


def cmd_conformance(args: argparse.Namespace) -> int:
    """llama.cpp as a live oracle (autoparser.testing.cpp_oracle)."""
    from autoparser.testing.cpp_oracle import run_conformance

    return run_conformance(args)


def cmd_matrix(args: argparse.Namespace) -> int:
    """The cross-engine matrix (autoparser.matrix)."""
    from autoparser.matrix.cli import run_matrix_command

    return run_matrix_command(args)


def cmd_corpus(args: argparse.Namespace) -> int:
    """Corpus jobs: refresh from the hub, the nightly job, report, summary, a local fake hub."""
    from autoparser.corpus.cli import run_corpus

    return run_corpus(args)


def _template_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("template", help="a .jinja chat template, a .gguf model file (its header's template), or a "
                                     "hub repo: hf://org/name[#variant] (or org/name where no such file exists)")
    p.add_argument("--variant", metavar="NAME",
                   help="a named template of a GGUF or hub repo (tokenizer.chat_template.NAME, "
                        "additional_chat_templates/NAME.jinja; e.g. tool_use) instead of the default")


def _corpus_argument(p: argparse.ArgumentParser) -> None:
    """The corpus a job reads (not one it writes: refresh and nightly update ./corpus)."""
    p.add_argument("--corpus", help="corpus directory (default: $AUTOPARSER_CORPUS, ./corpus, the checkout's, else "
                                    "the corpus installed with the package)")


def _selection_arguments(p: argparse.ArgumentParser) -> None:
    """What the jobs that read the corpus (report, summary) take: the corpus, which templates, how many workers."""
    _corpus_argument(p)
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these templates (names or patterns such as 'Qwen__*')")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N (selected) templates")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="worker processes (default: 1)")


def _refresh_arguments(p: argparse.ArgumentParser) -> None:
    """What `corpus refresh` and `corpus nightly` both take: the corpus, and which repos of which hub."""
    p.add_argument("--corpus", default="corpus", help="corpus directory (default: ./corpus)")
    p.add_argument("--ids", help="file of hub repo ids, one per line (default: the corpus's model-ids.txt)")
    p.add_argument("--discover", type=int, default=0, metavar="N",
                   help="also track the N most downloaded text-generation models")
    p.add_argument("--endpoint", help="hub endpoint (default: HF_ENDPOINT or huggingface.co)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="repos fetched at once, and (nightly) worker processes computing artefacts (default: 1)")


def build_parser() -> argparse.ArgumentParser:
    from autoparser.export import READERS  # (16 ms more, once the package is imported)

    p = argparse.ArgumentParser(prog="autoparser", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("gbnf", help="print the GBNF grammar of a JSON schema")
    g.add_argument("schema", help="path to a JSON schema file, or - to read it from stdin")
    g.set_defaults(func=cmd_gbnf)

    a = sub.add_parser("analyze", help="analyse a chat template")
    _template_arguments(a)
    a.add_argument("--json", action="store_true", help="print the analysis as JSON (C++ record shape)")
    a.add_argument("--tools", help="JSON file with OpenAI-style tools, to show the generated parser and grammar")
    a.set_defaults(func=cmd_analyze)

    r = sub.add_parser("parse", help="parse model output read from stdin",
                       description="Parse the model output read from stdin (e.g. `autoparser parse T.jinja < "
                                   "out.txt`) with the parser generated for TEMPLATE; print the message as JSON.")
    _template_arguments(r)
    r.add_argument("--tools", help="JSON file with OpenAI-style tools")
    r.add_argument("--reasoning-format", default="auto", choices=["none", "auto", "deepseek"])
    r.add_argument("--no-thinking", action="store_true", help="render with enable_thinking=false")
    r.add_argument("--parallel-tool-calls", action="store_true")
    r.add_argument("--partial", action="store_true", help="the output may continue (streaming)")
    r.add_argument("--strict", action="store_true",
                   help="parse as llama.cpp does: no repairs, exit 1 on an output it rejects")
    r.set_defaults(func=cmd_parse)

    rb = sub.add_parser("render", help="print the prompt a llama.cpp built-in chat format renders",
                        description="Print the prompt llama.cpp renders without --jinja in the built-in format NAME "
                                    "(`--chat-template NAME`) for CONVERSATION, a JSON list of messages or "
                                    "{\"messages\": [...]}; exactly, no newline added.")
    rb.add_argument("conversation", help="JSON file with the messages")
    rb.add_argument("--builtin", required=True, metavar="NAME",
                    help="a llama.cpp built-in format name (chatml, llama3, mistral-v7, ...)")
    rb.add_argument("--add-generation-prompt", action=argparse.BooleanOptionalAction, default=True,
                    help="end with the assistant's generation prompt (default: on; formats without one ignore it)")
    rb.set_defaults(func=cmd_render)

    e = sub.add_parser("export", help="export what the analysis derives for other engines")
    esub = e.add_subparsers(dest="export_command", required=True)
    er = esub.add_parser("response-template", help="the Hugging Face response_template of a chat template",
                         description="Print the JSON to put under \"response_template\" in a tokenizer_config.json "
                                     "(transformers' parse_response, vLLM's hf parser); exit 2 with the reason when "
                                     "the format cannot be expressed in that language.")
    _template_arguments(er)
    er.add_argument("--write", metavar="TOKENIZER_CONFIG",
                    help="merge it into this tokenizer_config.json instead (other keys untouched)")
    er.add_argument("--for", dest="reader", choices=READERS, default="transformers",
                    help="who reads it: transformers' parse_response (the default), or vLLM's hf and beam parsers, "
                         "which serve a stricter form (no join, no markup field)")
    er.set_defaults(func=cmd_export)
    for command, what in (("structural-tag", "the xgrammar structural tag (vLLM, SGLang, TensorRT-LLM)"),
                          ("lark", "the llguidance Lark grammar (vLLM's guidance backend, llama.cpp's %llguidance)")):
        ec = esub.add_parser(command, help=f"{what} of a request", description=(
            f"Print {what} that constrains a model's output to what the template writes for this request: "
            "reasoning, text, and tool calls whose arguments follow each tool's JSON schema; exit 2 with the "
            "reason when the template's form cannot be expressed."))
        _template_arguments(ec)
        ec.add_argument("--tools", required=True, metavar="TOOLS_JSON", help="the request's tools (a JSON array)")
        ec.add_argument("--tool-choice", choices=("auto", "required", "none"), default="auto",
                        help="auto: text and calls; required: calls only (xgrammar's reading); none: text only")
        ec.add_argument("--thinking", choices=("on", "off"), default="on", help="enable_thinking (default: on)")
        ec.add_argument("--parallel-tool-calls", action=argparse.BooleanOptionalAction, default=True,
                        help="allow several calls (default: on)")
        ec.set_defaults(func=cmd_export_constrained)

    k = sub.add_parser("conformance", help="run the corpus through a llama.cpp build and report every divergence",
                       description="Run every corpus template (analysis) and round-trip scenario (prompt, grammar, "
                                   "parse) through the C++ driver of tools/cpp_oracle and through autoparser; write "
                                   "cpp-divergences.md/.json. Exit 1 on a divergence the ratchet does not know.")
    k.add_argument("--cpp", required=True, metavar="DRIVER", help="the driver built by python -m tools.cpp_oracle")
    k.add_argument("--only", nargs="+", metavar="GLOB", help="only these templates (names or patterns)")
    k.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="driver processes (default: 1)")
    _corpus_argument(k)
    k.add_argument("--known", default="tests/data/ratchet/cpp_oracle.json",
                   help="ratchet of known divergences (default: tests/data/ratchet/cpp_oracle.json)")
    k.add_argument("--report", default="reports/conformance", help="where the report goes")
    k.add_argument("--regenerate", action="store_true",
                   help="rewrite the C++-made goldens under --data from the driver instead")
    k.add_argument("--data", default="tests/data", help="the goldens' directory (default: tests/data)")
    k.set_defaults(func=cmd_conformance)

    from autoparser.matrix import ENGINES

    m = sub.add_parser("matrix", help="every engine we can run over every corpus template; writes reports/matrix/",
                       description="Ask every engine (autoparser default and strict, llama.cpp through the live "
                                   "oracle's driver, transformers with the exported response_template, SGLang's "
                                   "own parsers in their environment) what it reads from each corpus template's "
                                   "rendered outputs and their realistic variants; write matrix.json, matrix.html "
                                   "and summary.md. With --check, exit 1 when a miss of autoparser's own is in no "
                                   "ratchet or a ratchet entry no longer fails.")
    m.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES), metavar="ENGINE",
                   help=f"which columns (default: all of {', '.join(ENGINES)})")
    m.add_argument("--cpp", default=os.environ.get("AUTOPARSER_CPP_ORACLE"), metavar="DRIVER",
                   help="llama.cpp's driver, built by python -m tools.cpp_oracle (default: $AUTOPARSER_CPP_ORACLE)")
    m.add_argument("--sglang", default=os.environ.get("AUTOPARSER_SGLANG_PYTHON"), metavar="PYTHON",
                   help="the interpreter of SGLang's environment, made by python -m tools.sglang_env (default: "
                        "$AUTOPARSER_SGLANG_PYTHON, else the one that command makes in ~/.cache/autoparser/sglang)")
    m.add_argument("--require-all", action="store_true", help="exit 2 when an engine asked for cannot run here")
    m.add_argument("--only", nargs="+", metavar="GLOB", help="only these templates (names or patterns)")
    m.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="worker processes (default: 1)")
    _corpus_argument(m)
    m.add_argument("--known", default="tests/data/ratchet/matrix.json",
                   help="ratchet of autoparser's misses of variants (default: tests/data/ratchet/matrix.json)")
    m.add_argument("--roundtrip-known", default="tests/data/ratchet/roundtrip.json",
                   help="ratchet of its misses of rendered outputs (`self:` entries; default: "
                        "tests/data/ratchet/roundtrip.json)")
    m.add_argument("--check", action="store_true", help="exit 1 on a miss of ours in no ratchet, or a stale entry")
    m.add_argument("--write-known", action="store_true",
                   help="rewrite --known from this run (reasons kept; a new miss is written as a gap to label)")
    m.add_argument("--out", default="reports/matrix", help="where matrix.json/.html and summary.md go")
    m.add_argument("--since", metavar="MATRIX_JSON",
                   help="an earlier matrix.json: also write changes.md, the cells that changed since (the nightly "
                        "job's part; a file that is not there is said and skipped)")
    m.add_argument("--add-to-report", metavar="DIR",
                   help="with --since: add the changes as a section to the nightly report in DIR "
                        "(nightly-report.md), where the nightly job wrote one")
    m.set_defaults(func=cmd_matrix)

    c = sub.add_parser("corpus", help="template corpus jobs")
    csub = c.add_subparsers(dest="corpus_command", required=True)
    cr = csub.add_parser("refresh", help="refresh corpus/ from the Hugging Face hub and write a change report")
    _refresh_arguments(cr)
    cr.add_argument("--report", default="reports", help="where the change report goes (JSON + Markdown)")
    cn = csub.add_parser("nightly", help="refresh, then report what each new or changed template does differently",
                         description="Refresh corpus/ from the hub, recompute the artefacts of every new or changed "
                                     "template, compare them with snapshots/ and write nightly-report.md (a pull-request"
                                     " body) and nightly-report.json. Exit 0: nothing changed; 1: templates changed "
                                     "(report written); 2: the job failed (bad input, corpus unreadable, no repo "
                                     "could be read).")
    _refresh_arguments(cn)
    cn.add_argument("--snapshots", default="snapshots", help="the committed snapshots (default: ./snapshots)")
    cn.add_argument("--report", default="reports/nightly", help="where the report goes (default: reports/nightly)")
    cn.add_argument("--update", action="store_true",
                    help="write the new snapshots of the added and changed templates (and drop removed ones)")
    cp = csub.add_parser("report", help="write the corpus report (HTML + Markdown)")
    _selection_arguments(cp)
    cp.add_argument("--snapshots", default="snapshots",
                    help="committed artefact snapshots to compare with (default: ./snapshots)")
    cp.add_argument("--out", default="reports", help="where report.html and report.md go (default: ./reports)")
    cp.add_argument("--cpp-divergences", default="reports/conformance/cpp-divergences.json", metavar="FILE",
                    help="the last `autoparser conformance` run, shown as a section when the file exists")
    cs = csub.add_parser("summary", help="analyse every corpus template: the C++ record's formats and what "
                                         "autoparser reads beyond them",
                         description="The main job: analyse every template of the corpus and print, per template, "
                                     "the reasoning / content / tool-call modes of the C++ analysis record and its "
                                     "markers, and what autoparser reads beyond that record (a hand-written format, "
                                     "the template as transformers renders it, Python calls where the record says "
                                     "tools=NONE, a reasoning block the prompt opens); then totals. Exit 0 (a "
                                     "template that cannot be analysed is listed), 2 on bad input.")
    _selection_arguments(cs)
    cs.add_argument("--json", metavar="FILE", help="also write every analysis record as JSON lines (as `analyze "
                                                   "--json` prints it, with the handler) to FILE")
    cf = csub.add_parser("fake-hub", help="serve a directory of repos as the Hugging Face hub, on 127.0.0.1",
                         description="Serve DIR/<org>/<name>/<files> as the hub's HTTP API (model info, listing, "
                                     "downloads, ranged reads) on 127.0.0.1, so that `corpus refresh` and `corpus "
                                     "nightly` run without network: HF_ENDPOINT=URL (printed on the first line). "
                                     "Files are read again on every request: an edit is a new commit. A repo "
                                     "folder holding a .gated file is gated. Ctrl-C stops it.")
    cf.add_argument("dir", metavar="DIR", help="one folder per repo: DIR/<org>/<name>/chat_template.jinja, ...")
    cf.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    c.set_defaults(func=cmd_corpus)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autoparser")
    except PackageNotFoundError:  # run from a checkout without installing
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. Output cut short by its reader (`autoparser corpus summary | head -1`)
    ends the command quietly, as Python's documentation recommends for SIGPIPE (signal module, "Note on
    SIGPIPE"): stdout is pointed at devnull so that the interpreter's final flush does not raise again. The exit
    code is 0, not the note's 1: the reader had what it wanted, and a pipeline under `set -o pipefail` must not
    fail for it."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # (inside the try: the last buffered output is where a closed pipe usually shows)
        return code
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _run(argv: Sequence[str] | None) -> int:
    from autoparser.template.sandbox import time_budget

    args = build_parser().parse_args(argv)
    func: Command = args.func
    try:
        if args.command in ("corpus", "conformance"):  # (a corpus-wide job gives each template its own budget)
            return func(args)
        with time_budget():  # one budget for all a command renders (AUTOPARSER_TIME_BUDGET)
            return func(args)
    except AutoparserError as e:
        return cli_error(str(e).replace("\n", " "), first_line=True)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
