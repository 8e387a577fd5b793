"""Hostile templates: each ends in the project's own error within one time budget, the process stays healthy.

Templates come from the hub and are untrusted. Every public call (generate(), an analysis, an export, a command)
shares one wall-clock budget among all the renders it makes (template/sandbox.py `time_budget`), and a template
that hit a limit once is not rendered again by the same call. The bound asserted here is the budget plus a margin
for a loaded machine: a hang guard, not a speed measurement.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoparser import generate
from autoparser.errors import TemplateError

BUDGET = 1.0
MARGIN = 5.0  # seconds beyond the budget a call may spend noticing it ran out


def cpu_seconds() -> float:
    """CPU time this process and its finished children spent: how much work a call did before it gave up, which a
    loaded machine does not stretch as it stretches the wall clock (a run beside other jobs took 7 s of wall time
    on a 1 s budget, the deadline having been noticed in time)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


REQUEST = {"messages": [{"role": "user", "content": "hi"}], "tools": [
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]}

HOSTILE = {
    # sandbox escapes
    "cycler_globals": "{{ cycler.__init__.__globals__.os.system('echo pwned') }}",
    "class_subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "joiner_globals": "{{ joiner.__init__.__globals__ }}",
    # bombs: output, strings, lists, time
    "nested_range_output": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    "nested_range_spin": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "string_times_n": "{{ '%s' * 1000000000 }}",
    "namespace_list_doubled": "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
                              "{% endfor %}{{ ns.l | length }}",
    "join_doubled": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s] | join('') %}"
                    "{% endfor %}{{ ns.s | length }}",
    "list_of_a_long_string": "{% set a = 'x' * 5000000 %}{{ (a ~ a ~ a) | list | length }}",
    # runaway recursion, deep nesting
    "macro_recursion": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "deep_if": "{% if x %}" * 2000 + "a" + "{% endif %}" * 2000,
    # garbage
    "binary_garbage": "\x00\x01{{\xff\xfe}}{%\x02",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_generate_ends_in_a_template_error_within_the_budget(name: str) -> None:
    started = cpu_seconds()
    with pytest.raises(TemplateError) as err:
        generate(HOSTILE[name], REQUEST, time_budget=BUDGET)
    assert cpu_seconds() - started < BUDGET + MARGIN, str(err.value)
    assert "\n" not in str(err.value).strip() or name == "deep_if", str(err.value)
    # the process stays healthy: the next, ordinary template works
    assert generate("{% for m in messages %}{{ m.content }}{% endfor %}", REQUEST).prompt == "hi"


def test_a_template_that_hit_a_limit_is_not_rendered_again_in_the_same_call() -> None:
    # the 10 MB output limit is hit by the first probe; the other probes and renders are refused at once, so the
    # whole call costs about one render, well under its budget (it used to take some 80 s: every render hit it)
    started = cpu_seconds()
    with pytest.raises(TemplateError, match=r"exceed\w* 10000000 characters"):
        generate(HOSTILE["nested_range_output"], REQUEST, time_budget=60)
    assert cpu_seconds() - started < 30


def test_the_error_names_the_phase_the_budget_ran_out_in() -> None:
    with pytest.raises(TemplateError, match=r"the time budget of 1 s ran out while (probing capabilities|"
                                            r"analysing|rendering the prompt)"):
        generate(HOSTILE["nested_range_spin"], REQUEST, time_budget=BUDGET)


@pytest.mark.parametrize("name", ["nested_range_spin", "nested_range_output", "cycler_globals", "deep_if"])
def test_the_command_line_answers_in_one_line_within_the_budget(name: str, tmp_path: Path) -> None:
    template = tmp_path / "hostile.jinja"
    template.write_text(HOSTILE[name])
    env = dict(os.environ, AUTOPARSER_TIME_BUDGET=str(BUDGET))
    for command in (["analyze", str(template)], ["parse", str(template)],
                    ["export", "response-template", str(template)]):
        started = cpu_seconds()
        done = subprocess.run([sys.executable, "-m", "autoparser", *command], input="hi", capture_output=True,
                              text=True, env=env, timeout=120)
        assert cpu_seconds() - started < BUDGET + MARGIN + 5, command  # (+ the interpreter's start)
        assert done.returncode == 2, (command, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.jinja"]  # nothing written beside it


def test_the_corpus_report_records_a_hostile_template_and_goes_on(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from autoparser.corpus import Corpus
    from autoparser.corpus.manifest import Manifest, ManifestEntry, sha256_hex
    from autoparser.corpus.report import collect_rows

    corpus = tmp_path / "corpus"
    (corpus / "templates").mkdir(parents=True)
    manifest = Manifest()
    for name, text in (("a_hostile", HOSTILE["nested_range_spin"]),
                       ("b_plain", "{% for m in messages %}{{ m.content }}{% endfor %}")):
        data = text.encode()
        (corpus / "templates" / f"{name}.jinja").write_bytes(data)
        manifest.templates.append(ManifestEntry(name=name, file=f"templates/{name}.jinja", sha256=sha256_hex(data),
                                                size=len(data)))
    manifest.write(corpus)
    monkeypatch.setenv("AUTOPARSER_TIME_BUDGET", str(BUDGET))  # one budget per template
    started = cpu_seconds()
    rows = collect_rows(Corpus.load(corpus), None)
    assert cpu_seconds() - started < 2 * (BUDGET + MARGIN)
    assert [r.name for r in rows] == ["a_hostile", "b_plain"]
    assert rows[0].errors and not rows[1].errors
    assert sorted(p.name for p in corpus.iterdir()) == ["manifest.json", "templates"]
