"""Every grammar the JSON-Schema converter emits for the C++ cases, checked by llama.cpp's own grammar engine.

Independent of our code on both sides: instances come from hypothesis-jsonschema and validity from the
`jsonschema` validator.
- compile: llama.cpp parses every success-case grammar;
- completeness: valid instances (serialised the way the C++ grammars expect: `", "` / `": "` separators, keys
  in schema order, which is the only order the C++ grammar admits) are accepted;
- soundness: anything the grammar accepts is valid for the schema, checked on mutations of valid instances
  and on arbitrary JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from autoparser.gbnf.from_schema import json_schema_to_grammar
from autoparser.testing.gbnf_oracle import LlamaGrammar, require_oracle

pytestmark = pytest.mark.oracle

DATA = Path(__file__).resolve().parent.parent / "data"
CASES = [json.loads(line) for line in (DATA / "json_schema_to_gbnf.jsonl").read_text(encoding="utf-8").splitlines()]
SUCCESS = [c for c in CASES if c["expected_status"] == "success"]
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

# Cases where "valid instances are accepted" cannot be asked, with the reason (soundness is still checked).
NOT_GENERATABLE = {
    "unsupported regexp in a property": "the pattern is a lookahead, which hypothesis-jsonschema cannot generate for",
    "string array": "prefixItems is given as one schema: the C++ reads it as the item schema, JSON Schema 2020 "
                    "ignores it, so [null] is valid for the validator and rejected by the grammar",
    "array with empty items and prefixItems": "prefixItems given as one schema beside items: the two readings "
                                              "differ as in 'string array'",
}


def _grammar_friendly(value: Any) -> bool:
    """JSON the C++ primitive rules can express: integers of up to 16 digits, no exponents or long
    fractions in floats, no DEL or lone surrogates in strings (the `char` rule excludes them)."""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return len(str(abs(value))) <= 16
    if isinstance(value, float):
        text = json.dumps(value)
        return math.isfinite(value) and "e" not in text and len(text.split(".")[-1]) <= 16 \
            and len(text.split(".")[0].lstrip("-")) <= 16
    if isinstance(value, str):
        return "\x7f" not in value and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return all(_grammar_friendly(v) for v in value)
    if isinstance(value, dict):
        return all(_grammar_friendly(k) and _grammar_friendly(v) for k, v in value.items())
    return False


def _resolve(schema: Any, root: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema and schema["$ref"].startswith("#/"):
        target = root
        for token in schema["$ref"][2:].split("/"):
            target = target[token] if isinstance(target, dict) else target[int(token)]
        schema = target
    return schema


def _in_schema_order(value: Any, schema: Any, root: Any) -> Any:
    """Objects with their keys in the order the schema lists the properties (the C++ grammar's order)."""
    schema = _resolve(schema, root)
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties") or {}
        ordered = {k: _in_schema_order(value[k], props[k], root) for k in props if k in value}
        ordered.update({k: v for k, v in value.items() if k not in props})
        return ordered
    if isinstance(value, list) and isinstance(schema, dict) and isinstance(schema.get("items"), dict):
        return [_in_schema_order(v, schema["items"], root) for v in value]
    return value


def _serialise(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@pytest.fixture(scope="module")
def oracle() -> type[LlamaGrammar]:
    require_oracle()
    return LlamaGrammar


@pytest.mark.parametrize("case", SUCCESS, ids=[c["name"] for c in SUCCESS])
def test_grammar_compiles_and_agrees(case: dict[str, Any], oracle: type[LlamaGrammar]) -> None:
    schema = json.loads(case["schema"])
    grammar = oracle(json_schema_to_grammar(schema))
    validator = jsonschema.validators.validator_for(schema)(schema)
    if case["name"] in NOT_GENERATABLE:
        return

    @SETTINGS
    @given(st.data())
    def check(data: st.DataObject) -> None:
        instance = data.draw(from_schema(schema))
        assume(_grammar_friendly(instance))
        text = _serialise(_in_schema_order(instance, schema, schema))
        # completeness can only be asked of what the C++ grammar models: no extra properties in objects
        # that list properties, which the C++ converter forbids unless additionalProperties says otherwise
        if grammar.accepts(text):
            assert validator.is_valid(json.loads(text))
        else:
            assert _has_unmodelled_extras(instance, schema, schema), f"valid instance rejected: {text}"
        for mutant in (text[:-1], text + "}", text.replace('"', "'", 1), "[" + text + "]", text + " 1"):
            if mutant != text and grammar.accepts(mutant):
                try:
                    parsed = json.loads(mutant)
                except json.JSONDecodeError:
                    raise AssertionError(f"grammar accepts invalid JSON: {mutant!r}") from None
                assert validator.is_valid(parsed), f"grammar accepts a value the schema rejects: {mutant!r}"

    check()


def _has_unmodelled_extras(value: Any, schema: Any, root: Any) -> bool:
    """Whether a valid instance uses JSON-Schema latitude the C++ grammar deliberately does not model:
    - properties beyond `properties` when additionalProperties is unspecified (the C++ forbids them);
    - a value of another type where the schema has no `type` (the C++ infers one from the keywords, e.g.
      `items` -> array, while JSON Schema applies keywords only to values of their type);
    - `pattern` (JSON Schema searches, the C++ grammar matches the whole string) and formats;
    - unions (anyOf/oneOf/allOf, type lists), which are not walked here."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or not schema:
        return False
    if any(k in schema for k in ("anyOf", "oneOf", "allOf")) or isinstance(schema.get("type"), list):
        return True
    if "type" not in schema and "const" not in schema and "enum" not in schema:
        return True
    if "pattern" in schema or "format" in schema:
        return True
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None and "additionalProperties" not in schema and set(value) - set(props):
            return True
        return any(_has_unmodelled_extras(v, (props or {}).get(k, {}), root) for k, v in value.items())
    if isinstance(value, list):
        items = schema.get("items", schema.get("prefixItems"))
        if isinstance(items, dict):
            return any(_has_unmodelled_extras(v, items, root) for v in value)
        if isinstance(items, list):
            return any(_has_unmodelled_extras(v, it, root) for v, it in zip(value, items))
    return False


@SETTINGS
@given(st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                 max_size=3), max_leaves=8),
       st.sampled_from(SUCCESS))
def test_anything_the_grammar_accepts_is_valid(value: Any, case: dict[str, Any]) -> None:
    require_oracle()
    schema = json.loads(case["schema"])
    grammar = _compiled(case["name"], schema)
    text = _serialise(value)
    if grammar.accepts(text):
        assert jsonschema.validators.validator_for(schema)(schema).is_valid(value), (case["name"], text)


_CACHE: dict[str, LlamaGrammar] = {}


def _compiled(name: str, schema: Any) -> LlamaGrammar:
    if name not in _CACHE:
        _CACHE[name] = LlamaGrammar(json_schema_to_grammar(schema))
    return _CACHE[name]
