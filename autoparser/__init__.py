"""autoparser: llama.cpp's chat-template autoparser, in Python.

The public API is re-exported here; everything else is internal to its pipeline stage.
"""

from autoparser.chat.spec import GrammarTrigger, TriggerType
from autoparser.chat.stream import StreamParser, compute_deltas
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
from autoparser.params import ChatParams, generate
from autoparser.template.source import TemplateSource, load_template
from autoparser.types import ChatFormat, ChatMessage, Diagnostic, MessageDelta, ToolCall

__all__ = [
    "AnalysisError",
    "AutoparserError",
    "ChatFormat",
    "ChatMessage",
    "ChatParams",
    "CorpusError",
    "Diagnostic",
    "GGUFError",
    "GrammarError",
    "GrammarTrigger",
    "HubError",
    "MessageDelta",
    "ParseError",
    "SchemaError",
    "SerializationError",
    "StreamParser",
    "TemplateError",
    "TemplateSource",
    "ToolCall",
    "TriggerType",
    "compute_deltas",
    "generate",
    "load_template",
]
