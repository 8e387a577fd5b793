"""llama.cpp's built-in chat formats (src/llama-chat.cpp): the ~55 formats it renders by name without Jinja
(`--chat-template chatml`), how it maps a template's text to one of them, and the rendering itself.

This is what llama.cpp does on its legacy path (no --jinja, or `llama_chat_apply_template` from the C API): a
template is never run there, only recognised by substrings, so a template that matches none is rejected and one
that matches the wrong heuristic is rendered in that format. `detect_builtin` says which, for any template.
"""

from autoparser.builtin.apply import (
    LlamaChatMessage,
    llama_chat_apply_template,
    llm_chat_apply_template,
    messages_from_openai,
)
from autoparser.builtin.templates import (
    LLM_CHAT_TEMPLATES,
    BuiltinDetection,
    LlmChatTemplate,
    detect_builtin,
    llama_chat_builtin_templates,
    llm_chat_detect_template,
    llm_chat_template_from_str,
)

__all__ = [
    "LLM_CHAT_TEMPLATES",
    "BuiltinDetection",
    "LlamaChatMessage",
    "LlmChatTemplate",
    "detect_builtin",
    "llama_chat_apply_template",
    "llama_chat_builtin_templates",
    "llm_chat_apply_template",
    "llm_chat_detect_template",
    "llm_chat_template_from_str",
    "messages_from_openai",
]
