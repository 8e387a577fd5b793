"""autoparser: llama.cpp's chat-template autoparser, in Python.

The public API is re-exported here; everything else is internal to its pipeline stage.
"""

from autoparser.errors import (
    AnalysisError,
    AutoparserError,
    CorpusError,
    GrammarError,
    HubError,
    ParseError,
    SchemaError,
    SerializationError,
    TemplateError,
)

__all__ = [
    "AnalysisError",
    "AutoparserError",
    "CorpusError",
    "GrammarError",
    "HubError",
    "ParseError",
    "SchemaError",
    "SerializationError",
    "TemplateError",
]
