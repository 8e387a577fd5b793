"""The PEG engine: arenas of parser nodes, the builder DSL, evaluation with partial input, serialisation.

It knows nothing about chat; the chat layer builds its parsers with it. Importing it imports evaluate.py, which
makes room in the Python stack for deep grammars: at import, not at the first parse, which would change the
interpreter's state in the middle of a caller's code (a hypothesis test fails on that).
"""

from autoparser.peg.arena import Arena
from autoparser.peg.ast import Ast, AstNode
from autoparser.peg.builder import Builder, P, build_peg_parser, rule_name
from autoparser.peg.engine import ParseResult, ResultType, TraceEvent
from autoparser.peg.evaluate import tiering
from autoparser.peg.serialize import load, save

__all__ = [
    "Arena",
    "Ast",
    "AstNode",
    "Builder",
    "P",
    "ParseResult",
    "ResultType",
    "TraceEvent",
    "build_peg_parser",
    "load",
    "rule_name",
    "save",
    "tiering",
]
