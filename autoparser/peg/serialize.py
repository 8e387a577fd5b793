"""Arena <-> JSON, in the C++ `save()` shape: {"parsers": [...], "rules": {name: id}, "root": id}.

Chat params carry their parser in this form. One extension over the C++: schema nodes keep their schema
(`schema`, `pointer`), so a loaded arena emits the same GBNF as the one that was saved.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from autoparser.errors import SerializationError
from autoparser.peg import nodes as N
from autoparser.peg.arena import Arena
from autoparser.peg.nodes import INVALID_ID, Node


def node_to_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"type": node.kind}
    match node:
        case N.Literal(literal=s):
            out["literal"] = s
        case N.Sequence(children=ch) | N.Choice(children=ch):
            out["children"] = list(ch)
        case N.Repetition(child=c, min_count=lo, max_count=hi):
            out.update(child=c, min_count=lo, max_count=hi)
        case N.And(child=c) | N.Not(child=c) | N.Atomic(child=c):
            out["child"] = c
        case N.Chars(pattern=p, ranges=rs, negated=neg, min_count=lo, max_count=hi):
            out.update(pattern=p, ranges=[{"start": r.start, "end": r.end} for r in rs], negated=neg,
                       min_count=lo, max_count=hi)
        case N.String(delimiter=d):
            out["delimiter"] = d
        case N.Until(delimiters=ds):
            out["delimiters"] = list(ds)
        case N.Schema(child=c, name=name, raw=raw, schema=schema, pointer=ptr):
            out.update(child=c, name=name, raw=raw)
            if schema is not None:
                out["schema"] = schema
                if ptr:
                    out["pointer"] = ptr
        case N.Rule(name=name, child=c, trigger=trig):
            out.update(name=name, child=c, trigger=trig)
        case N.Ref(name=name):
            out["name"] = name
        case N.Tag(child=c, tag=t):
            out.update(child=c, tag=t)
        case N.Gbnf(child=c, grammar=g):
            out.update(child=c, grammar=g)
        case N.Ac(child=c, delimiters=ds):
            out.update(child=c, delimiters=list(ds))
        case N.Epsilon() | N.Start() | N.End() | N.Any_() | N.Space():
            pass  # no fields
        case _:
            assert_never(node)
    return out


def to_json(arena: Arena) -> dict[str, Any]:
    return {"parsers": [node_to_json(p) for p in arena.parsers], "rules": dict(arena.rules), "root": arena.root}


def save(arena: Arena) -> str:
    return json.dumps(to_json(arena), separators=(",", ":"), ensure_ascii=False)


def _field(j: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in j:
        raise SerializationError(f"{where}: missing field {name!r}")
    v = j[name]
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is int):
        raise SerializationError(f"{where}: field {name!r} has the wrong type")
    return v


def node_from_json(j: Any, where: str) -> Node:
    if not isinstance(j, dict) or not isinstance(j.get("type"), str):
        raise SerializationError(f"{where}: parser entry needs a string 'type'")
    t = j["type"]

    def f(name: str, kind: type | tuple[type, ...]) -> Any:
        return _field(j, name, kind, f"{where} ({t})")

    def ids(name: str) -> tuple[int, ...]:
        v = f(name, list)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise SerializationError(f"{where} ({t}): {name!r} must hold parser ids")
        return tuple(v)

    def strings(name: str) -> tuple[str, ...]:
        v = f(name, list)
        if not all(isinstance(x, str) for x in v):
            raise SerializationError(f"{where} ({t}): {name!r} must hold strings")
        return tuple(v)

    match t:
        case "epsilon":
            return N.Epsilon()
        case "start":
            return N.Start()
        case "end":
            return N.End()
        case "literal":
            return N.Literal(f("literal", str))
        case "sequence":
            return N.Sequence(ids("children"))
        case "choice":
            return N.Choice(ids("children"))
        case "repetition":
            return N.Repetition(f("child", int), f("min_count", int), f("max_count", int))
        case "and":
            return N.And(f("child", int))
        case "not":
            return N.Not(f("child", int))
        case "any":
            return N.Any_()
        case "space":
            return N.Space()
        case "chars":
            ranges = []
            for r in f("ranges", list):
                if not isinstance(r, dict) or not isinstance(r.get("start"), int) or not isinstance(r.get("end"), int):
                    raise SerializationError(f"{where} (chars): char_range needs integer 'start' and 'end'")
                ranges.append(N.CharRange(r["start"], r["end"]))
            return N.Chars(f("pattern", str), tuple(ranges), f("negated", bool), f("min_count", int),
                           f("max_count", int))
        case "string":
            d = f("delimiter", str)
            if not d:
                raise SerializationError(f"{where} (string): empty delimiter")
            return N.String(d[0])
        case "until":
            return N.Until(strings("delimiters"))
        case "schema":
            ptr = j.get("pointer", "")
            return N.Schema(f("child", int), f("name", str), f("raw", bool), j.get("schema"),
                            ptr if isinstance(ptr, str) else "")
        case "rule":
            return N.Rule(f("name", str), f("child", int), f("trigger", bool))
        case "ref":
            return N.Ref(f("name", str))
        case "atomic":
            return N.Atomic(f("child", int))
        case "tag":
            return N.Tag(f("child", int), f("tag", str))
        case "gbnf":
            return N.Gbnf(f("child", int), f("grammar", str))
        case "ac":
            ds = strings("delimiters")
            if not ds:
                raise SerializationError(f"{where} (ac): needs a non-empty 'delimiters' array")
            return N.Ac(f("child", int), ds)
    raise SerializationError(f"{where}: unknown parser type {t!r}")


def from_json(j: Any) -> Arena:
    if not isinstance(j, dict):
        raise SerializationError("serialised arena must be a JSON object")
    parsers_j = j.get("parsers")
    rules_j = j.get("rules")
    if not isinstance(parsers_j, list):
        raise SerializationError("JSON missing or invalid 'parsers' array")
    if not isinstance(rules_j, dict):
        raise SerializationError("JSON missing or invalid 'rules' object")
    if "root" not in j or not isinstance(j["root"], int) or isinstance(j["root"], bool):
        raise SerializationError("JSON missing 'root' field")
    parsers = [node_from_json(p, f"parsers[{i}]") for i, p in enumerate(parsers_j)]
    count = len(parsers)
    for i, node in enumerate(parsers):
        for c in N.child_ids(node):
            if not 0 <= c < count:
                raise SerializationError(f"parsers[{i}] references invalid parser ID: {c}")
    rules: dict[str, int] = {}
    for name, rid in rules_j.items():
        if not isinstance(rid, int) or isinstance(rid, bool) or not 0 <= rid < count:
            raise SerializationError(f"Rule '{name}' references invalid parser ID: {rid}")
        rules[name] = rid
    root = j["root"]
    if root != INVALID_ID and not 0 <= root < count:
        raise SerializationError(f"Root references invalid parser ID: {root}")
    return Arena(parsers, rules, root)


def load(data: str) -> Arena:
    try:
        j = json.loads(data)
    except (json.JSONDecodeError, TypeError) as e:
        raise SerializationError(f"serialised arena is not valid JSON: {e}") from None
    return from_json(j)
