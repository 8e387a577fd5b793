"""autoparser: llama.cpp's chat-template autoparser, in Python.

The public API is re-exported here; everything else is internal to its pipeline stage. Each stage is also an
attribute of the package (`autoparser.export.response_template`, `autoparser.builtin`), imported on first use.
"""

import importlib
import pkgutil
from types import ModuleType
from typing import TYPE_CHECKING

from autoparser.chat.spec import GrammarTrigger, TriggerType
from autoparser.chat.stream import StreamParser, compute_deltas
from autoparser.corpus.source import load_template
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
    UnknownKeyError,
)
from autoparser.params import ChatParams, generate
from autoparser.template.source import TemplateSource
from autoparser.types import ChatFormat, ChatMessage, Diagnostic, MessageDelta, ToolCall

if TYPE_CHECKING:  # (the stages the facade imports on first use, below: typed for type checkers)
    from autoparser import builtin as builtin
    from autoparser import cli as cli
    from autoparser import export as export
    from autoparser import testing as testing

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
    "UnknownKeyError",
    "compute_deltas",
    "generate",
    "load_template",
]

# The stages (subpackages and modules) as attributes after a plain `import autoparser`, as the README names them
# (`autoparser.export.response_template(source)`): imported when first asked for, so that the facade does not pay
# for the stages it does not re-export (the corpus jobs, the exporter, the pytest plugin and its imports).
_STAGES = frozenset(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str) -> ModuleType:
    if name in _STAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_STAGES})
