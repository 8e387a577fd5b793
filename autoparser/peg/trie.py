"""Delimiter tries and their Aho-Corasick automaton (over code points).

The trie answers the `until` question "does a delimiter start here?" the way the C++ `common_trie::check_at`
does (shortest delimiter wins; running out of input inside the trie is a partial match). The automaton is
what the GBNF emitter turns into the `until-N` / `ac-N` rule families, so its state numbering (creation order,
children ordered by code point) is observable and kept identical to the C++.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from autoparser.peg.utf8 import SUCCESS, decode_at

NO_MATCH, PARTIAL_MATCH, COMPLETE_MATCH = 0, 1, 2


@dataclass
class _TrieNode:
    children: dict[int, int] = field(default_factory=dict)
    pattern: int = -1


class Trie:
    def __init__(self, words: list[str] | tuple[str, ...] = ()) -> None:
        self.nodes: list[_TrieNode] = [_TrieNode()]
        self.n_patterns = 0
        for w in words:
            self.insert(w)

    def insert(self, word: str) -> int:
        symbols: list[int] = []
        i = 0
        while i < len(word):
            status, cp, length = decode_at(word, i)
            if status != SUCCESS:
                break
            symbols.append(cp)
            i += length
        cur = 0
        for cp in symbols:
            nxt = self.nodes[cur].children.get(cp)
            if nxt is None:
                nxt = len(self.nodes)
                self.nodes.append(_TrieNode())
                self.nodes[cur].children[cp] = nxt
            cur = nxt
        if self.nodes[cur].pattern < 0:
            self.nodes[cur].pattern = self.n_patterns
            self.n_patterns += 1
        return self.nodes[cur].pattern

    def check_at(self, text: str, pos: int) -> int:
        cur = 0
        n = len(text)
        while pos < n:
            status, cp, length = decode_at(text, pos)
            if status != SUCCESS:
                break
            nxt = self.nodes[cur].children.get(cp)
            if nxt is None:
                return NO_MATCH
            cur = nxt
            pos += length
            if self.nodes[cur].pattern >= 0:
                return COMPLETE_MATCH
        return PARTIAL_MATCH if cur != 0 else NO_MATCH


class AhoCorasick:
    """Failure links, per-state match and alphabet, as `common_aho_corasick` computes them."""

    def __init__(self, trie: Trie) -> None:
        self.trie = trie
        nodes = trie.nodes
        n = len(nodes)
        self.fail = [0] * n
        order: list[int] = []
        queue = deque([0])
        while queue:
            u = queue.popleft()
            order.append(u)
            for ch in sorted(nodes[u].children):
                v = nodes[u].children[ch]
                if u != 0:
                    f = self.fail[u]
                    while f and ch not in nodes[f].children:
                        f = self.fail[f]
                    target = nodes[f].children.get(ch)
                    self.fail[v] = target if target is not None and target != v else 0
                queue.append(v)
        self.match = [-1] * n
        for u in order:
            if nodes[u].pattern >= 0:
                self.match[u] = nodes[u].pattern
            else:
                self.match[u] = self.match[self.fail[u]] if u != 0 else -1
        self.alphabet = sorted({ch for node in nodes for ch in node.children})

    def size(self) -> int:
        return len(self.trie.nodes)

    def terminal(self, state: int) -> bool:
        return self.match[state] >= 0

    def next(self, state: int, ch: int) -> int:
        nodes = self.trie.nodes
        while state and ch not in nodes[state].children:
            state = self.fail[state]
        return nodes[state].children.get(ch, 0)
