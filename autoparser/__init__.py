"""autoparser: llama.cpp's chat-template autoparser, in Python.

The public API is re-exported here; everything else is internal to its pipeline stage.
"""

from autoparser.chat.generator import generate
from autoparser.chat.params import ChatParams, GrammarTrigger
from autoparser.chat.stream import compute_deltas
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
from autoparser.types import ChatMessage, MessageDelta, ToolCall

__all__ = [
    "AnalysisError",
    "AutoparserError",
    "ChatMessage",
    "ChatParams",
    "CorpusError",
    "GrammarError",
    "GrammarTrigger",
    "HubError",
    "MessageDelta",
    "ParseError",
    "SchemaError",
    "SerializationError",
    "TemplateError",
    "ToolCall",
    "compute_deltas",
    "generate",
]
