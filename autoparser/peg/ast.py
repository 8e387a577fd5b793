"""The AST a parse builds: one node per matched `rule` or `tag`, with spans into the input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from autoparser.peg.utf8 import sanitize

AstId = int
INVALID_AST_ID: AstId = -1


class AstNode(NamedTuple):
    """Immutable; a NamedTuple rather than a frozen dataclass because one is created per matched rule or tag,
    and tuple construction is several times cheaper on that hot path."""

    id: AstId
    rule: str
    tag: str
    start: int
    end: int
    text: str
    children: tuple[AstId, ...]
    is_partial: bool
    invalid_utf8: tuple[tuple[int, int], ...]

    def sanitized_text(self) -> str:
        """`text` with each undecodable byte run replaced by one U+FFFD."""
        return sanitize(self.text, self.start, self.invalid_utf8)


class Ast:
    """Append-only node store of one parse. Nodes from failed branches stay but are unreachable."""

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: list[AstNode] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, node_id: AstId) -> AstNode:
        return self.nodes[node_id]

    def walk(self, roots: tuple[AstId, ...]) -> Iterator[AstNode]:
        """Pre-order, depth first: node, then its children in order (iterative, so depth is unbounded)."""
        stack = list(reversed(roots))
        nodes = self.nodes
        pop, extend = stack.pop, stack.extend
        while stack:
            node = nodes[pop()]
            yield node
            if node.children:  # most nodes are leaves; a reversed copy only for the others
                extend(node.children[::-1])

    def visit(self, roots: tuple[AstId, ...], visitor: Callable[[AstNode], None]) -> None:
        for node in self.walk(roots):
            visitor(node)

    def _find(self, parent: AstNode, attr: str, value: str, max_depth: int) -> AstId:
        for cid in parent.children:
            child = self.nodes[cid]
            if getattr(child, attr) == value:
                return cid
            if max_depth > 1:
                found = self._find(child, attr, value, max_depth - 1)
                if found != INVALID_AST_ID:
                    return found
        return INVALID_AST_ID

    def find_by_tag(self, parent: AstNode, tag: str, max_depth: int = 3) -> AstId:
        return self._find(parent, "tag", tag, max_depth)

    def find_by_rule(self, parent: AstNode, rule: str, max_depth: int = 3) -> AstId:
        return self._find(parent, "rule", rule, max_depth)

    def dump(self, roots: tuple[AstId, ...]) -> str:
        """Readable tree, for debugging and failure messages."""
        lines: list[str] = []

        def rec(nid: AstId, depth: int) -> None:
            n = self.nodes[nid]
            label = f"tag={n.tag}" if n.tag else f"rule={n.rule}"
            partial = " partial" if n.is_partial else ""
            lines.append(f"{'  ' * depth}{label} [{n.start},{n.end}){partial} {n.text!r}")
            for c in n.children:
                rec(c, depth + 1)

        for r in roots:
            rec(r, 0)
        return "\n".join(lines)
