"""The peers' own test vectors (tests/data/peers/, each with its source and licence), run through the corpus
template that renders the form the peer's parser reads, with the request the test implies.

Only what each source test asserts is compared: the reasoning and the content where it asserts them (vLLM's
`None` is our empty text; whitespace around them stripped, as llama.cpp's chat tests compare content: where
markup ends and text begins is each engine's own), the calls' names and arguments (as JSON values: the spacing of an arguments
string is each engine's own as well). A vector marked streaming is fed to `ChatParams.stream()` (in the test's own chunks where it gives them,
else a few characters at a time) and its folded deltas compared; the others go through `parse()`. Where we
disagree, ratchet/peers.json says why. Whatever we read, no word of an output is lost (`unaccounted`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autoparser import generate
from autoparser.chat.stream import apply_deltas
from autoparser.corpus import Corpus
from autoparser.errors import AutoparserError
from autoparser.params import ChatParams
from autoparser.peg.nodes import C_SPACE
from autoparser.testing.ratchet import Ratchet
from autoparser.testing.recovery import markup_spans, unaccounted
from autoparser.types import ChatMessage

DATA = Path(__file__).resolve().parent.parent / "data"
VECTORS = [json.loads(line) for path in sorted((DATA / "peers").glob("*.jsonl"))
           for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
RATCHET = Ratchet(DATA / "ratchet" / "peers.json")
CORPUS = Corpus.load()

_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (dict, "object"), (list, "array"))


def _expected_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """The argument values a call assertion names: all of them (`arguments`), or those the test checks."""
    if "arguments" in call:
        return dict(json.loads(call["arguments"]))
    return dict(call.get("arguments_include") or {})


def implied_tools(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a test's expected calls imply: each name (the one the output calls, where the test does not
    assert it: `tool`), each argument typed by its expected value (a null value, or an argument the test only
    names: any type; an argument a path reaches into (`data.nested.deep`): an object, or an array where the
    path's next step is an index)."""
    tools: dict[str, dict[str, Any]] = {}
    for call in calls:
        props = tools.setdefault(call.get("name") or call["tool"], {})
        for key in (*(call.get("arguments_keys") or ()), *(call.get("arguments_types") or {})):
            props.setdefault(*_property(key, None))
        for key, value in _expected_arguments(call).items():
            name, schema = _property(key, value)
            props[name] = schema
    return [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}
            for name, props in tools.items()]


def _property(key: str, value: Any) -> tuple[str, dict[str, Any]]:
    """The top-level argument a key of `arguments_include` / `arguments_types` names, and its schema."""
    top, _, rest = key.partition(".")
    if rest:
        return top, {"type": "array" if rest.split(".")[0].isdigit() else "object"}
    return top, next(({"type": t} for cls, t in _TYPES if isinstance(value, cls)), {})


_MISSING = object()


def _lookup(args: dict[str, Any], key: str, default: Any = _MISSING) -> Any:
    """The value a key names in a call's arguments: a top-level argument, or, through a dotted path
    (`data.nested.deep`, an integer step indexing an array), a value nested in one; `default` where there is none."""
    value: Any = args
    for step in key.split("."):
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return default
    return value


def peer_request(vector: dict[str, Any]) -> dict[str, Any]:
    """The request `generate` gets for a vector. (The tool-parser tests give outputs without reasoning: a
    template's thinking is off, unless the vector's `request` says otherwise, as the reasoning-parser tests do;
    what the generation prompt opens and closes of it is reasoning, as the engines' reasoning parsers take it.)
    The vector's `request` holds the template's switches (README there): `enable_thinking` is the request's own,
    the others (`thinking`, `force_nonempty_content`) are template variables, chat_template_kwargs. Its `tools`,
    where it has them, are the request's tools (the ones the test passes its parser, or the functions and
    arguments its output spells); otherwise the tools are those the expected calls imply."""
    kwargs = dict(vector.get("request", {}))
    return {"messages": [{"role": "user", "content": "Hi"}], "parallel_tool_calls": True, "reasoning_format": "auto",
            "enable_thinking": kwargs.pop("enable_thinking", False), "chat_template_kwargs": kwargs,
            "tools": vector.get("tools") or
            implied_tools(vector["asserts"].get("tool_calls") or vector["asserts"].get("implied_calls") or [])}


def _params(vector: dict[str, Any]) -> ChatParams:
    return generate(CORPUS.by_name(vector["template"]).read_text(), peer_request(vector))


def _parsed(vector: dict[str, Any], params: ChatParams | None = None) -> ChatMessage:
    params = params or _params(vector)
    output = vector["output"]
    if not vector["streaming"]:
        return params.parse(output)
    stream = params.stream()
    chunks = vector.get("chunks") or [output[i:i + 3] for i in range(0, len(output), 3)]
    acc = ChatMessage()
    for chunk in chunks:
        acc = apply_deltas(acc, stream.feed(chunk))
    final = stream.finish()
    acc = apply_deltas(acc, stream.last_deltas)
    if (acc.reasoning_content, acc.content, acc.tool_calls) != (final.reasoning_content, final.content,
                                                                final.tool_calls):
        # (a stream that waited: its final message is the parse's, its deltas add up to less; said as a
        # disagreement, with what the deltas gave)
        raise _StreamWaited(acc)
    return acc


class _StreamWaited(Exception):
    def __init__(self, folded: ChatMessage) -> None:
        super().__init__(f"the stream waited: its deltas add up to {folded}, not to its final message")


def disagreement(vector: dict[str, Any], got: ChatMessage) -> str | None:
    """What we do that the source test's assertions reject, or None."""
    asserts = vector["asserts"]
    problems = []
    if "reasoning" in asserts and (asserts["reasoning"] or "").strip(C_SPACE) != got.reasoning_content.strip(C_SPACE):
        problems.append(f"reasoning: the test asserts {asserts['reasoning']!r}, we give {got.reasoning_content!r}")
    if "content" in asserts and (asserts["content"] or "").strip(C_SPACE) != got.content.strip(C_SPACE):
        problems.append(f"content: the test asserts {asserts['content']!r}, we give {got.content!r}")
    have = [(c.name, json.loads(c.arguments)) for c in got.tool_calls]
    if "min_tool_calls" in asserts:
        if len(have) < asserts["min_tool_calls"]:
            problems.append(f"tool_calls: the test asserts at least {asserts['min_tool_calls']}, we give {have}")
    elif "tool_calls" in asserts and not _calls_agree(asserts["tool_calls"], have):  # (reasoning tests: none)
        problems.append(f"tool_calls: the test asserts {asserts['tool_calls']}, we give {have}")
    return "; ".join(problems) or None


def _calls_agree(want: list[dict[str, Any]], have: list[tuple[str, Any]]) -> bool:
    """The calls agree in number and in what the test asserts of each: the name (`name`), the arguments as a
    JSON value (`arguments`), some of their values (`arguments_include`), their keys (`arguments_keys`), the
    JSON types of some (`arguments_types`), that there are some (`some_arguments`). A key of `arguments_include`
    or `arguments_types` may be a dotted path to a nested value (`data.nested.deep`)."""
    if len(want) != len(have):
        return False
    for w, (name, args) in zip(want, have, strict=True):
        if "name" in w and w["name"] != name:
            return False
        if "arguments" in w and json.loads(w["arguments"]) != args:
            return False
        if any(_lookup(args, k, None) != v for k, v in (w.get("arguments_include") or {}).items()):
            return False
        if not set(w.get("arguments_keys") or ()) <= set(args):
            return False
        if any(_lookup(args, k) is _MISSING or _json_type(_lookup(args, k)) != t
               for k, t in (w.get("arguments_types") or {}).items()):
            return False
        if w.get("some_arguments") and not args:
            return False
    return True


def _json_type(value: Any) -> str:
    """A JSON value's type as a schema names it (`null`, `integer`, ...)."""
    if value is None:
        return "null"
    return next(t for cls, t in _TYPES if isinstance(value, cls))


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_peer_vector(vector: dict[str, Any]) -> None:
    """The vector's assertions hold, or the ratchet says why not; and, whatever we read, no word of the output is
    lost (outputs other projects collected: the no-text-lost guarantee on text nobody here made)."""
    try:
        params = _params(vector)
    except AutoparserError as e:  # (parse() never raises: this is generate() refusing the request)
        RATCHET.check(vector["id"], f"{type(e).__name__}: {e}")
        return
    output = vector["output"]
    whole = params.parse(output)
    lost = unaccounted(output, whole, markup_spans(params, output, whole))
    assert not lost, f"text lost: {dict(lost)} -> {whole}"
    try:
        failure = disagreement(vector, whole if not vector["streaming"] else _parsed(vector, params))
    except _StreamWaited as e:
        failure = str(e)
    RATCHET.check(vector["id"], failure)


def test_every_vector_names_its_source_and_the_ratchet_names_only_vectors() -> None:
    for v in VECTORS:
        assert {"repository", "file", "commit", "test", "licence"} <= set(v["source"]), v["id"]
        assert CORPUS.by_name(v["template"]) is not None
    assert len({v["id"] for v in VECTORS}) == len(VECTORS)
    RATCHET.check_known(v["id"] for v in VECTORS)
