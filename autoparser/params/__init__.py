"""A request on a template, and what it gives: `generate(source, request)` -> `ChatParams` (the prompt, the
grammar and its triggers, and the parsers that read the model's output whole or streamed).

The top of the pipeline (`common_chat_templates_apply`): it prepares the request (chat/inputs.py), takes the
template's format (chat/handlers or chat/generic.py) and assembles llama.cpp's result with the recovery's
relaxed parser beside it (autoparser/recovery).
"""

from autoparser.params.generator import (
    assemble,
    cached_analysis,
    cached_caps,
    format_name,
    generate,
    strict_analysis,
)
from autoparser.params.result import ChatParams

__all__ = ["ChatParams", "assemble", "cached_analysis", "cached_caps", "format_name", "generate", "strict_analysis"]
