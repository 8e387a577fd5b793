"""The PEG engine: arenas of parser nodes, the builder DSL, evaluation with partial input, serialisation.

It knows nothing about chat; the chat layer builds its parsers with it.
"""

from autoparser.peg.arena import Arena
from autoparser.peg.ast import Ast, AstNode
from autoparser.peg.builder import Builder, P, build_peg_parser, rule_name
from autoparser.peg.engine import ParseResult, ResultType, TraceEvent
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
]
