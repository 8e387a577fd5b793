"""JSON Schema -> GBNF, as llama.cpp's `json_schema_to_grammar` writes it, and the grammar driver
`build_grammar` the PEG emitter runs on.

Two stages, as in the C++: the schema is first compiled into a typed document (schema.py, port of
`common_chat_schema_from_json`: unsupported input raises SchemaError with the JSON path of the node), then the
converter (port of `common_chat_schema_converter`) visits the document and fills a rule table. Rule names,
the order alternatives are written in and every piece of spacing follow the C++, because grammars are compared
with it as text. Unsupported regex patterns degrade to `string` with a warning (kept in `warnings`, never
raised); invalid ones are errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from autoparser.errors import SchemaError
from autoparser.gbnf.blocks import (
    INT_MAX,
    PRIMITIVE_RULES,
    RESERVED_NAMES,
    SPACE_RULE,
    STRING_FORMAT_RULES,
    build_min_max_int,
    build_repetition,
)
from autoparser.gbnf.model import format_rules, gbnf_format_literal
from autoparser.gbnf.schema import INT64_MAX, INT64_MIN, SchemaNode, compile_schema
from autoparser.peg.trie import Trie

__all__ = [
    "GrammarBuilder",
    "build_grammar",
    "compile_schema",
    "json_schema_to_grammar",
]


def _dump(value: Any) -> str:
    """nlohmann-style compact dump (key order kept, UTF-8 raw)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_NON_LITERAL = frozenset("|.()[]{}*+?^$")
_ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS = frozenset("^$.[]()|{}*+?")
MAX_PATTERN_DEPTH = 100


def _gbnf_escape_length(pattern: str, pos: int) -> int:
    if pos + 1 >= len(pattern) or pattern[pos] != "\\":
        return 0
    e = pattern[pos + 1]
    if e in 'trn\\"[]-':
        return 2
    n_hex = {"x": 2, "u": 4, "U": 8}.get(e)
    if n_hex is None or pos + 2 + n_hex > len(pattern):
        return 0
    if not all(h in "0123456789abcdefABCDEF" for h in pattern[pos + 2:pos + 2 + n_hex]):
        return 0
    return 2 + n_hex


class _Unsupported(Exception):
    pass


class _Invalid(Exception):
    pass


class SchemaConverter:
    """The rule table and the visitor (`common_chat_schema_converter`)."""

    def __init__(self, dotall: bool = False) -> None:
        self.dotall = dotall
        self.rules: dict[str, str] = {"space": SPACE_RULE}
        self.refs_being_resolved: set[str] = set()
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def add_rule(self, name: str, rule: str) -> str:
        esc = _INVALID_RULE_CHARS.sub("-", name)
        if esc not in self.rules or self.rules[esc] == rule:
            self.rules[esc] = rule
            return esc
        i = 0
        while f"{esc}{i}" in self.rules and self.rules[f"{esc}{i}"] != rule:
            i += 1
        key = f"{esc}{i}"
        self.rules[key] = rule
        return key

    def add_primitive(self, name: str, rule: tuple[str, tuple[str, ...]]) -> str:
        n = self.add_rule(name, rule[0])
        for dep in rule[1]:
            dep_rule = PRIMITIVE_RULES.get(dep) or STRING_FORMAT_RULES.get(dep)
            if dep_rule is None:
                self.errors.append(f"Rule {dep} not known")
                continue
            if dep not in self.rules:
                self.add_primitive(dep, dep_rule)
        return n

    # -- patterns

    def visit_pattern(self, pattern: str, name: str) -> str:
        snapshot = dict(self.rules)
        try:
            return self.pattern_to_rule(pattern, name)
        except _Unsupported as err:
            self.rules = snapshot
            self.warnings.append(f"pattern {pattern} is not supported ({err}), accepting any string")
            return self.add_rule(name, self.add_primitive("string", PRIMITIVE_RULES["string"]))
        except _Invalid as err:
            self.rules = snapshot
            self.errors.append(f"Invalid pattern {pattern}: {err}")
            return ""

    def pattern_to_rule(self, pattern: str, name: str) -> str:
        if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
            raise _Unsupported("not anchored with '^' and '$'")
        sub = pattern[1:-1]
        sub_rule_ids: dict[str, str] = {}
        length = len(sub)
        state = {"i": 0, "depth": 0}

        def to_rule(item: tuple[str, bool]) -> str:
            return f'"{item[0]}"' if item[1] else item[0]

        def get_dot() -> str:
            return self.add_rule("dot", "[\\U00000000-\\U0010FFFF]" if self.dotall else "[^\\x0A\\x0D]")

        def transform() -> tuple[str, bool]:
            seq: list[tuple[str, bool]] = []

            def join_seq() -> tuple[str, bool]:
                ret: list[tuple[str, bool]] = []
                literal = ""
                for text, is_lit in seq:
                    if is_lit:
                        literal += text
                    else:
                        if literal:
                            ret.append((literal, True))
                            literal = ""
                        ret.append((text, False))
                if literal:
                    ret.append((literal, True))
                return " ".join(to_rule(x) for x in ret), False

            while state["i"] < length:
                i = state["i"]
                c = sub[i]
                if c == ".":
                    seq.append((get_dot(), False))
                    state["i"] += 1
                elif c == "(":
                    state["i"] += 1
                    i = state["i"]
                    if i < length and sub[i] == "?":
                        if i + 1 < length and sub[i + 1] == ":":
                            state["i"] += 2
                        else:
                            raise _Unsupported("unsupported group syntax")
                    state["depth"] += 1
                    if state["depth"] > MAX_PATTERN_DEPTH:
                        raise _Unsupported("pattern nesting too deep")
                    seq.append((f"({to_rule(transform())})", False))
                elif c == ")":
                    state["i"] += 1
                    if state["depth"] == 0:
                        raise _Invalid("unbalanced parentheses")
                    state["depth"] -= 1
                    return join_seq()
                elif c in "^$":
                    raise _Unsupported("anchor inside the pattern")
                elif c == "[":
                    sq = c
                    i += 1
                    while i < length and sub[i] != "]":
                        if sub[i] == "\\":
                            el = _gbnf_escape_length(sub, i)
                            if el == 0:
                                raise _Unsupported(f"unsupported escape in character class: {sub[i:i + 2]}")
                            sq += sub[i:i + el]
                            i += el
                        else:
                            sq += sub[i]
                            i += 1
                    if i >= length:
                        raise _Invalid("unterminated character class")
                    sq += "]"
                    state["i"] = i + 1
                    seq.append((sq, False))
                elif c == "|":
                    seq.append(("|", False))
                    state["i"] += 1
                elif c in "*+?":
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    seq[-1] = (to_rule(seq[-1]) + c, False)
                    state["i"] += 1
                elif c == "{":
                    curly = c
                    i += 1
                    while i < length and sub[i] != "}":
                        curly += sub[i]
                        i += 1
                    if i >= length:
                        raise _Unsupported("unterminated curly brackets")
                    curly += "}"
                    state["i"] = i + 1
                    nums = curly[1:-1].split(",")
                    min_times, max_times = 0, INT_MAX
                    if len(nums) not in (1, 2):
                        raise _Unsupported("wrong number of values in curly brackets")
                    try:
                        if len(nums) == 1:
                            min_times = max_times = _stoi(nums[0])
                        else:
                            if nums[0]:
                                min_times = _stoi(nums[0])
                            if nums[1]:
                                max_times = _stoi(nums[1])
                    except ValueError:
                        raise _Unsupported("invalid number in curly brackets") from None
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    text, is_lit = seq[-1]
                    if not is_lit:
                        sub_id = sub_rule_ids.get(text)
                        if sub_id is None:
                            sub_id = self.add_rule(f"{name}-{len(sub_rule_ids) + 1}", text)
                            sub_rule_ids[text] = sub_id
                        text = sub_id
                    seq[-1] = (build_repetition(f'"{text}"' if is_lit else text, min_times, max_times, ""), False)
                else:
                    literal = ""
                    while i < length:
                        ch = sub[i]
                        if ch == "\\":
                            if i == length - 1:
                                raise _Invalid("trailing backslash")
                            nxt = sub[i + 1]
                            if nxt in _ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS:
                                literal += nxt
                                i += 2
                            else:
                                el = _gbnf_escape_length(sub, i)
                                if el == 0:
                                    raise _Unsupported(f"unsupported escape: {sub[i:i + 2]}")
                                literal += sub[i:i + el]
                                i += el
                        elif ch == '"':
                            literal += '\\"'
                            i += 1
                        elif ch not in _NON_LITERAL and (i == length - 1 or not literal or sub[i + 1] == "."
                                                         or sub[i + 1] not in _NON_LITERAL):
                            literal += ch
                            i += 1
                        else:
                            break
                    state["i"] = i
                    if not literal:
                        raise _Unsupported(f"unsupported character: {c}")
                    seq.append((literal, True))
            return join_seq()

        rule = to_rule(transform())
        if state["depth"] != 0:
            raise _Invalid("unbalanced parentheses")
        return self.add_rule(name, f'"\\"" ({rule}) "\\""')

    # -- objects

    def not_strings(self, strings: list[str]) -> str:
        trie = Trie(strings)
        char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
        out: list[str] = ['["] ( ']

        def visit(idx: int) -> None:
            node = trie.nodes[idx]
            rejects = ""
            first = True
            for cp in sorted(node.children):
                child = node.children[cp]
                c = chr(cp)
                rejects += c
                if not first:
                    out.append(" | ")
                first = False
                out.append(f"[{c}]")
                if trie.nodes[child].children:
                    out.append(" (")
                    visit(child)
                    out.append(")")
                else:
                    out.append(f" {char_rule}+")
            if node.children:
                out.append(f' | [^"{rejects}] {char_rule}*')

        visit(0)
        out.append(" )")
        if trie.nodes[0].pattern < 0:
            out.append("?")
        out.append(' ["]')
        return "".join(out)

    def resolve_ref(self, schema: SchemaNode) -> str:
        ref = schema.ref
        k = ref.find("#")
        fragment = ref[k + 1:] if k >= 0 else ref
        ref_name = "ref" + _INVALID_RULE_CHARS.sub("-", fragment)
        if ref_name not in self.rules and ref not in self.refs_being_resolved:
            target = schema.target()
            if target is None:
                self.errors.append(f"Unresolved $ref {ref}")
                return ""
            self.refs_being_resolved.add(ref)
            ref_name = self.visit(target, ref_name)
            self.refs_being_resolved.discard(ref)
        return ref_name

    def build_object_rule(self, properties: list[tuple[str, SchemaNode]], required: set[str], name: str,
                          additional: SchemaNode | None) -> str:
        required_props: list[str] = []
        optional_props: list[str] = []
        kv_names: dict[str, str] = {}
        prop_names: list[str] = []
        prefix = name + ("" if not name else "-")
        for prop_name, prop_schema in properties:
            prop_rule = self.visit(prop_schema, prefix + prop_name)
            kv_names[prop_name] = self.add_rule(
                f"{prefix}{prop_name}-kv", f'{gbnf_format_literal(_dump(prop_name))} space ":" space {prop_rule}')
            (required_props if prop_name in required else optional_props).append(prop_name)
            prop_names.append(prop_name)
        if additional is not None:
            sub_name = prefix + "additional"
            value_rule = (self.visit(additional, sub_name + "-value") if additional.kind != "any"
                          else self.add_primitive("value", PRIMITIVE_RULES["value"]))
            key_rule = (self.add_primitive("string", PRIMITIVE_RULES["string"]) if not prop_names
                        else self.add_rule(sub_name + "-k", self.not_strings(prop_names)))
            kv_names["*"] = self.add_rule(sub_name + "-kv", f'{key_rule} ":" space {value_rule}')
            optional_props.append("*")
        if not required_props and not optional_props:
            return '"{" space "}"'
        rule = '"{" space '
        rule += ' "," space '.join(kv_names[k] for k in required_props)
        if optional_props:
            rule += " ("
            if required_props:
                rule += ' "," space ( '

            def recursive_refs(ks: list[str], first_is_optional: bool) -> str:
                if not ks:
                    return ""
                k = ks[0]
                kv = kv_names[k]
                comma_ref = f'( "," space {kv} )'
                if first_is_optional:
                    res = comma_ref + ("*" if k == "*" else "?")
                else:
                    res = kv + (" " + comma_ref + "*" if k == "*" else "")
                if len(ks) > 1:
                    res += " " + self.add_rule(f"{prefix}{k}-rest", recursive_refs(ks[1:], True))
                return res

            rule += " | ".join(recursive_refs(optional_props[i:], False) for i in range(len(optional_props)))
            if required_props:
                rule += " )"
            rule += " )?"
        rule += ' space "}"'
        return rule

    # -- visiting

    def visit_primitive(self, rule_name: str, typ: str) -> str:
        return self.add_primitive("root" if rule_name == "root" else typ, PRIMITIVE_RULES[typ])

    def visit_all_of(self, schema: SchemaNode, name: str, rule_name: str) -> str:
        required: set[str] = set()
        properties: list[tuple[str, SchemaNode]] = []
        enum_values: dict[str, int] = {}

        def add_component(comp: SchemaNode, is_required: bool) -> None:
            if comp.kind == "ref":
                t = comp.target()
                if t is not None:
                    add_component(t, is_required)
            elif comp.kind == "object":
                for pname, pschema, _req in comp.properties:
                    properties.append((pname, pschema))
                    if is_required:
                        required.add(pname)
            elif comp.kind == "enum":
                for v in comp.values:
                    lit = gbnf_format_literal(_dump(v))
                    enum_values[lit] = enum_values.get(lit, 0) + 1

        for child in schema.children:
            if child.kind == "anyOf":
                for alt in child.children:
                    add_component(alt, False)
            else:
                add_component(child, True)
        if enum_values:
            inter = [lit for lit in sorted(enum_values, key=lambda s: s.encode("utf-8"))
                     if enum_values[lit] == len(schema.children)]
            if inter:
                return self.add_rule(rule_name, "(" + " | ".join(inter) + ")")
        return self.add_rule(rule_name, self.build_object_rule(properties, required, name, None))

    def visit(self, schema: SchemaNode, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else (name or "root")
        sub_name = name + ("-" if name else "")
        k = schema.kind
        if k == "ref":
            return self.add_rule(rule_name, self.resolve_ref(schema))
        if k == "anyOf":
            alts = [self.visit(c, f"{name}{'-' if name else 'alternative-'}{i}") for i, c in enumerate(schema.children)]
            return self.add_rule(rule_name, " | ".join(alts))
        if k == "allOf":
            return self.visit_all_of(schema, name, rule_name)
        if k == "const":
            return self.add_rule(rule_name, gbnf_format_literal(_dump(schema.value)))
        if k == "enum":
            return self.add_rule(rule_name, "(" + " | ".join(gbnf_format_literal(_dump(v)) for v in schema.values) + ")")
        if k == "object":
            if not schema.properties and schema.additional is not None and schema.additional.kind == "any":
                return self.add_rule(rule_name, self.add_primitive("object", PRIMITIVE_RULES["object"]))
            props = [(n, s) for n, s, _ in schema.properties]
            required = {n for n, _, r in schema.properties if r}
            return self.add_rule(rule_name, self.build_object_rule(props, required, name, schema.additional))
        if k == "tuple":
            parts = [self.visit(item, f"{sub_name}tuple-{i}") for i, item in enumerate(schema.items)]
            return self.add_rule(rule_name, '"[" space ' + ' "," space '.join(parts) + ' space "]"')
        if k == "array":
            if schema.items.kind == "any" and schema.min_items == 0 and schema.max_items < 0:
                return self.visit_primitive(rule_name, "array")
            item_rule = self.visit(schema.items, sub_name + "item")
            max_items = INT_MAX if schema.max_items < 0 else schema.max_items
            return self.add_rule(rule_name, '"[" space ' + build_repetition(item_rule, schema.min_items, max_items,
                                                                            '"," space') + ' space "]"')
        if k == "string":
            if schema.pattern:
                return self.visit_pattern(schema.pattern, rule_name)
            if schema.format == "uuid":
                return self.visit_primitive(rule_name, "uuid")
            if schema.format:
                prim = f"{schema.format}-string"
                return self.add_rule(rule_name, self.add_primitive(prim, STRING_FORMAT_RULES[prim]))
            if schema.min_length > 0 or schema.max_length >= 0:
                char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
                max_len = INT_MAX if schema.max_length < 0 else schema.max_length
                return self.add_rule(rule_name, '"\\"" ' + build_repetition(char_rule, schema.min_length, max_len)
                                     + ' "\\""')
            return self.visit_primitive(rule_name, "string")
        if k == "integer":
            if schema.minimum == INT64_MIN and schema.maximum == INT64_MAX:
                return self.visit_primitive(rule_name, "integer")
            out: list[str] = ["("]
            build_min_max_int(schema.minimum, schema.maximum, out)
            out.append(")")
            return self.add_rule(rule_name, "".join(out))
        if k in ("number", "boolean", "null"):
            return self.visit_primitive(rule_name, k)
        return self.add_rule(rule_name, self.add_primitive("value", PRIMITIVE_RULES["value"]))

    def check_errors(self) -> None:
        if self.errors:
            raise SchemaError("JSON schema conversion failed:\n" + "\n".join(self.errors))

    def format_grammar(self) -> str:
        return format_rules(self.rules)


def _stoi(s: str) -> int:
    """`std::stoi`: leading whitespace, optional sign, digits; trailing junk ignored; none -> error."""
    m = re.match(r"\s*([+-]?\d+)", s)
    if not m:
        raise ValueError(s)
    return int(m.group(1))


def json_schema_to_grammar(schema: Any, *, force_gbnf: bool = False, warnings: list[str] | None = None) -> str:
    """The GBNF grammar (text, rules sorted by name) of a JSON schema. Raises SchemaError. What the grammar
    does not enforce (an unsupported keyword or pattern) is appended to `warnings`, one line each."""
    del force_gbnf  # only meaningful for llguidance builds of the C++
    doc = compile_schema(schema)
    conv = SchemaConverter(False)
    try:
        conv.visit(doc.root, "")
    except RecursionError:
        raise SchemaError("schema nested too deeply to convert") from None
    conv.check_errors()
    if warnings is not None:
        warnings.extend([*doc.warnings, *conv.warnings])
    return conv.format_grammar()


class GrammarBuilder:
    """What `build_grammar` hands its callback (the C++ `common_grammar_builder`)."""

    def __init__(self, converter: SchemaConverter) -> None:
        self._conv = converter

    def add_rule(self, name: str, rhs: str) -> str:
        return self._conv.add_rule(name, rhs)

    def add_schema(self, name: str, node: SchemaNode | Any) -> str:
        if not isinstance(node, SchemaNode):
            node = compile_schema(node).root
        return self._conv.visit(node, "" if name == "root" else name)


def build_grammar(callback: Callable[[GrammarBuilder], None], *, dotall: bool = False) -> str:
    """Run `callback` against a fresh rule table holding only `space`, then print every rule sorted by name."""
    conv = SchemaConverter(dotall)
    callback(GrammarBuilder(conv))
    conv.check_errors()
    return conv.format_grammar()

