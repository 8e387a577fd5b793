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
    GGUFError,
    GrammarError,
    HubError,
    ParseError,
    SchemaError,
    SerializationError,
    TemplateError,
)
from autoparser.template.source import TemplateSource, load_template
from autoparser.types import ChatMessage, MessageDelta, ToolCall

__all__ = [
    "AnalysisError",
    "AutoparserError",
    "ChatMessage",
    "ChatParams",
    "CorpusError",
    "GGUFError",
    "GrammarError",
    "GrammarTrigger",
    "HubError",
    "MessageDelta",
    "ParseError",
    "SchemaError",
    "SerializationError",
    "TemplateError",
    "TemplateSource",
    "ToolCall",
    "compute_deltas",
    "generate",
    "load_template",
]
