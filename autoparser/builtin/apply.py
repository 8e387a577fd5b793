"""Rendering a conversation in one of llama.cpp's built-in formats (`llm_chat_apply_template`,
`llama_chat_apply_template`): hand-written C++ per format, no Jinja.

Each format is a function of the messages and `add_ass` (add the assistant's generation prompt). Several
formats ignore `add_ass` or a role they do not know, and some merge the system message into the first user
turn: that is upstream's behaviour, kept as is, since the point of this port is to show exactly what llama.cpp
renders without --jinja.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.builtin.templates import LlmChatTemplate, c_string, llm_chat_detect_template
from autoparser.errors import AutoparserError, UnknownBuiltinTemplateError
from autoparser.peg.nodes import C_SPACE

__all__ = [
    "LlamaChatMessage",
    "llama_chat_apply_template",
    "llm_chat_apply_template",
    "messages_from_openai",
]

T = LlmChatTemplate


def trim(text: str) -> str:
    """Upstream's trim(): C whitespace only (no Unicode spaces: it works on bytes)."""
    return text.strip(C_SPACE)


def _ascii_upper(text: str) -> str:
    """C's toupper() byte by byte in the "C" locale: only a-z change (a multi-byte UTF-8 letter does not)."""
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in text)


@dataclass(frozen=True)
class LlamaChatMessage:
    """`struct llama_chat_message`: a role and a text content, nothing else (no tool calls, no parts)."""

    role: str
    content: str


Messages = Sequence[LlamaChatMessage]
# A renderer gets the format too: variants that differ in a detail (a space, a trim) share one, as they share
# one branch upstream.
_Render = Callable[[LlmChatTemplate, Messages, bool], str]
_FORMATS: dict[LlmChatTemplate, _Render] = {}


def _renders(*formats: LlmChatTemplate) -> Callable[[_Render], _Render]:
    def register(fn: _Render) -> _Render:
        for fmt in formats:
            _FORMATS[fmt] = fn
        return fn
    return register


_Turn = tuple[str, str]  # what a format writes before and after a message's content

# Most formats write each message by one rule and end with the assistant's generation prompt when add_ass:
# upstream spells each as a branch of its own, here each is an entry of one of two tables (in upstream's
# order). The formats written as functions after them have a rule of their own (a system turn merged into the
# next one, a role renamed, a prompt after the last user turn).


@dataclass(frozen=True)
class _RoleHeaded:
    """Every message as `head[0]` + its role + `head[1]` + its content + `end`; `start` once before them (or
    nothing), and `prompt` after them when add_ass. `trimmed`: contents trim()med; `roles`: only these roles
    are written (None: all)."""

    head: _Turn
    end: str
    prompt: str
    trimmed: bool = False
    start: str = ""
    roles: frozenset[str] | None = None

    def __call__(self, _: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
        before, after = self.head
        out = "".join(f"{before}{m.role}{after}{trim(m.content) if self.trimmed else m.content}{self.end}"
                      for m in chat if self.roles is None or m.role in self.roles)
        return self.start + out + (self.prompt if add_ass else "")


@dataclass(frozen=True)
class _ByRole:
    """Each message between its role's markers in `turns`; a role not in `turns` between `other`'s, or left
    out when `other` is None. `start` once before them (or nothing), and `prompt` after them when add_ass."""

    turns: Mapping[str, _Turn]
    other: _Turn | None = None
    prompt: str = ""
    start: str = ""
    trimmed: bool = False  # contents trim()med
    first_only: frozenset[str] = frozenset()  # roles written only as the first message, left out elsewhere

    def __call__(self, _: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
        out = []
        for i, m in enumerate(chat):
            turn = None if i > 0 and m.role in self.first_only else self.turns.get(m.role, self.other)
            if turn is not None:
                out.append(turn[0] + (trim(m.content) if self.trimmed else m.content) + turn[1])
        return self.start + "".join(out) + (self.prompt if add_ass else "")


_FORMATS.update({
    T.CHATML: _RoleHeaded(("<|im_start|>", "\n"), "<|im_end|>\n", "<|im_start|>assistant\n"),
    T.PHI_3: _RoleHeaded(("<|", "|>\n"), "<|end|>\n", "<|assistant|>\n"),
    T.PHI_4: _RoleHeaded(("<|im_start|>", "<|im_sep|>"), "<|im_end|>", "<|im_start|>assistant<|im_sep|>"),
    T.FALCON_3: _RoleHeaded(("<|", "|>\n"), "\n", "<|assistant|>\n"),
    T.ZEPHYR: _RoleHeaded(("<|", "|>\n"), "<|endoftext|>\n", "<|assistant|>\n"),
    T.LLAMA_3: _RoleHeaded(("<|start_header_id|>", "<|end_header_id|>\n\n"), "<|eot_id|>",
                           "<|start_header_id|>assistant<|end_header_id|>\n\n", trimmed=True),
    T.CHATGLM_3: _RoleHeaded(("<|", "|>\n "), "", "<|assistant|>", start="[gMASK]sop"),
    T.CHATGLM_4: _RoleHeaded(("<|", "|>\n"), "", "<|assistant|>\n", start="[gMASK]<sop>"),
    T.GLMEDGE: _RoleHeaded(("<|", "|>\n"), "", "<|assistant|>"),
    T.EXAONE_MOE: _RoleHeaded(("<|", "|>\n"), "<|endofturn|>\n", "<|assistant|>\n", trimmed=True,
                              roles=frozenset(("system", "user", "assistant", "tool"))),
    T.MEGREZ: _RoleHeaded(("<|role_start|>", "<|role_end|>"), "<|turn_end|>", "<|role_start|>assistant<|role_end|>"),
    T.LLAMA4: _RoleHeaded(("<|header_start|>", "<|header_end|>\n\n"), "<|eot|>",
                          "<|header_start|>assistant<|header_end|>\n\n", trimmed=True),
    T.SOLAR_OPEN: _RoleHeaded(("<|begin|>", "<|content|>"), "<|end|>", "<|begin|>assistant"),
})

_KIMI_END = "<|im_end|>"
_EXAONE_3_TURNS = {"system": ("[|system|]", "[|endofturn|]\n"), "user": ("[|user|]", "\n"),
                   "assistant": ("[|assistant|]", "[|endofturn|]\n")}
_FORMATS.update({
    # (no generation prompt in Mistral v7: the [/INST] closing the last user turn is where the answer starts)
    T.MISTRAL_V7: _ByRole({"system": ("[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]"), "user": ("[INST] ", "[/INST]")},
                          other=(" ", "</s>")),
    T.MISTRAL_V7_TEKKEN: _ByRole({"system": ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"), "user": ("[INST]", "[/INST]")},
                                 other=("", "</s>")),
    T.VICUNA: _ByRole({"system": ("", "\n\n"), "user": ("USER: ", "\n"), "assistant": ("ASSISTANT: ", "</s>\n")},
                      prompt="ASSISTANT:"),
    T.VICUNA_ORCA: _ByRole({"system": ("SYSTEM: ", "\n"), "user": ("USER: ", "\n"),
                            "assistant": ("ASSISTANT: ", "</s>\n")}, prompt="ASSISTANT:"),
    T.DEEPSEEK: _ByRole({"system": ("", ""), "user": ("### Instruction:\n", "\n"),
                         "assistant": ("### Response:\n", "\n<|EOT|>\n")}, prompt="### Response:\n"),
    T.COMMAND_R: _ByRole({"system": ("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
                          "user": ("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
                          "assistant": ("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>")},
                         prompt="<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", trimmed=True),
    # MiniCPM: each user turn already ends with <AI>, the assistant's prompt
    T.MINICPM: _ByRole({"user": ("<用户>", "<AI>")}, other=("", ""), trimmed=True),
    T.DEEPSEEK_2: _ByRole({"system": ("", "\n\n"), "user": ("User: ", "\n\n"),
                           "assistant": ("Assistant: ", "<｜end▁of▁sentence｜>")}, prompt="Assistant:"),
    T.DEEPSEEK_3: _ByRole({"system": ("", "\n\n"), "user": ("<｜User｜>", ""),
                           "assistant": ("<｜Assistant｜>", "<｜end▁of▁sentence｜>")}, prompt="<｜Assistant｜>"),
    # EXAONE-3.0-7.8B-Instruct (https://huggingface.co/LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct/discussions/8); EXAONE
    # 4 adds a tool turn. A user turn has no end marker: the next tag ends it.
    T.EXAONE_3: _ByRole(_EXAONE_3_TURNS, prompt="[|assistant|]", trimmed=True),
    T.EXAONE_4: _ByRole({**_EXAONE_3_TURNS, "tool": ("[|tool|]", "[|endofturn|]\n")}, prompt="[|assistant|]",
                        trimmed=True),
    # GigaChat: a system message is kept only first; every user turn is followed by the (empty) list of
    # available functions, as GigaChat's template writes it
    T.GIGACHAT: _ByRole({"system": ("", "<|message_sep|>"),
                         "user": ("user<|role_sep|>",
                                  "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"),
                         "assistant": ("assistant<|role_sep|>", "<|message_sep|>")},
                        prompt="assistant<|role_sep|>", start="<s>", first_only=frozenset(("system",))),
    # Yandex: "\n\n" is the model's end of turn; a system message has no place in this format and is dropped
    T.YANDEX: _ByRole({"user": (" Пользователь: ", "\n\n"), "assistant": (" Ассистент: ", "\n\n")},
                      prompt=" Ассистент:[SEP]"),
    # <|im_start|> is SmolVLM's BOS, once; its turns are "User:"/"Assistant:" lines, not ChatML's
    T.SMOLVLM: _ByRole({"system": ("", "\n\n"), "user": ("User: ", "<end_of_utterance>\n")},
                       other=("Assistant: ", "<end_of_utterance>\n"), prompt="Assistant:", start="<|im_start|>"),
    # dots.llm1.inst; any role but system and user is a response
    T.DOTS1: _ByRole({"system": ("<|system|>", "<|endofsystem|>"), "user": ("<|userprompt|>", "<|endofuserprompt|>")},
                     other=("<|response|>", "<|endofresponse|>"), prompt="<|response|>"),
    # tencent/Hunyuan-A13B-Instruct; any role but system and assistant is a user turn (and no generation prompt)
    T.HUNYUAN_MOE: _ByRole({"system": ("<|startoftext|>", "<|extra_4|>"), "assistant": ("", "<|eos|>")},
                           other=("<|startoftext|>", "<|extra_0|>")),
    # tencent/Hunyuan-4B-Instruct: only a system message that comes first is kept; each user turn ends with
    # the assistant's tag, which is the generation prompt
    T.HUNYUAN_DENSE: _ByRole({"system": ("", "<｜hy_place▁holder▁no▁3｜>"),
                              "user": ("<｜hy_User｜>", "<｜hy_Assistant｜>"),
                              "assistant": ("<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>")},
                             first_only=frozenset(("system",))),
    # tencent/HunyuanOCR and HunyuanVL: each turn's tag comes after its text
    T.HUNYUAN_VL: _ByRole({"system": ("", "<｜hy_place▁holder▁no▁3｜>"), "user": ("", "<｜hy_User｜>"),
                           "assistant": ("", "<｜hy_Assistant｜>")},
                          start="<｜hy_begin▁of▁sentence｜>", first_only=frozenset(("system",))),
    # moonshotai/Kimi-K2-Instruct; a tool result is a system-tagged turn named "tool". An unknown role gets no
    # header but its content and <|im_end|> are still written, as upstream does.
    T.KIMI_K2: _ByRole({"system": ("<|im_system|>system<|im_middle|>", _KIMI_END),
                        "user": ("<|im_user|>user<|im_middle|>", _KIMI_END),
                        "assistant": ("<|im_assistant|>assistant<|im_middle|>", _KIMI_END),
                        "tool": ("<|im_system|>tool<|im_middle|>", _KIMI_END)},
                       other=("", _KIMI_END), prompt="<|im_assistant|>assistant<|im_middle|>"),
})


@_renders(T.MISTRAL_V1, T.MISTRAL_V3, T.MISTRAL_V3_TEKKEN)
def _mistral_v1_v3(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    leading = " " if fmt is T.MISTRAL_V1 else ""
    trailing = "" if fmt is T.MISTRAL_V3_TEKKEN else " "
    out = []
    inside_turn = False  # a system message opens the [INST] turn its user message then closes
    for m in chat:
        if not inside_turn:
            out.append(f"{leading}[INST]{trailing}")
            inside_turn = True
        if m.role == "system":
            out.append(f"{m.content}\n\n")
        elif m.role == "user":
            out.append(f"{m.content}{leading}[/INST]")
        else:
            out.append(f"{trailing}{trim(m.content) if fmt is T.MISTRAL_V3 else m.content}</s>")
            inside_turn = False
    return "".join(out)


@_renders(T.LLAMA_2, T.LLAMA_2_SYS, T.LLAMA_2_SYS_BOS, T.LLAMA_2_SYS_STRIP)
def _llama2(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # See https://huggingface.co/blog/llama2#how-to-prompt-llama-2. The first turn opens without BOS (the
    # tokenizer adds it); later turns get one only in the -bos variant.
    out = ["[INST] "]
    inside_turn = True
    for m in chat:
        content = trim(m.content) if fmt is T.LLAMA_2_SYS_STRIP else m.content
        if not inside_turn:
            inside_turn = True
            out.append("<s>[INST] " if fmt is T.LLAMA_2_SYS_BOS else "[INST] ")
        if m.role == "system":
            # plain llama2 has no system block: the text still goes first, so nothing the user sent is lost
            out.append(f"{content}\n" if fmt is T.LLAMA_2 else f"<<SYS>>\n{content}\n<</SYS>>\n\n")
        elif m.role == "user":
            out.append(f"{content} [/INST]")
        else:
            out.append(f"{content}</s>")
            inside_turn = False
    return "".join(out)


@_renders(T.MONARCH)
def _monarch(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # mlabonne/AlphaMonarch-7B puts <s> inside the history; the first one is the tokenizer's to add
    out = "".join(("" if i == 0 else "<s>") + f"{m.role}\n{m.content}</s>\n" for i, m in enumerate(chat))
    return out + ("<s>assistant\n" if add_ass else "")


@_renders(T.GEMMA)
def _gemma(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # google/gemma-7b-it has no system turn: the system text is merged into the next user turn
    out = []
    system_prompt = ""
    for m in chat:
        if m.role == "system":
            system_prompt += trim(m.content)
            continue
        role = "model" if m.role == "assistant" else m.role
        out.append(f"<start_of_turn>{role}\n")
        if system_prompt and role != "model":
            out.append(f"{system_prompt}\n\n")
            system_prompt = ""
        out.append(f"{trim(m.content)}<end_of_turn>\n")
    return "".join(out) + ("<start_of_turn>model\n" if add_ass else "")


@_renders(T.ORION)
def _orion(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # OrionStarAI/Orion-14B-Chat: no system turn (merged into the next user one); every user turn already ends
    # with the assistant's prompt, so add_ass changes nothing
    out = []
    system_prompt = ""
    for m in chat:
        if m.role == "system":
            system_prompt += m.content
        elif m.role == "user":
            out.append("Human: ")
            if system_prompt:
                out.append(f"{system_prompt}\n\n")
                system_prompt = ""
            out.append(f"{m.content}\n\nAssistant: </s>")
        else:
            out.append(f"{m.content}</s>")
    return "".join(out)


@_renders(T.OPENCHAT)
def _openchat(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # openchat/openchat-3.5-0106, as its authors suggest (not its shipped template, which titles "System" too)
    out = []
    for m in chat:
        if m.role == "system":
            out.append(f"{m.content}<|end_of_turn|>")
        else:
            out.append(f"GPT4 Correct {_ascii_upper(m.role[:1])}{m.role[1:]}: {m.content}<|end_of_turn|>")
    return "".join(out) + ("GPT4 Correct Assistant:" if add_ass else "")


@_renders(T.DEEPSEEK_OCR)
def _deepseek_ocr(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    return "".join(m.content for m in chat)  # the OCR model takes its prompt bare: no markup at all


@_renders(T.RWKV_WORLD)
def _rwkv_world(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # The model's end of turn is "\n\n"; the assistant's prompt follows a last user turn whatever add_ass says
    out = []
    for i, m in enumerate(chat):
        if m.role == "system":
            out.append(f"System: {trim(m.content)}\n\n")
        elif m.role == "user":
            out.append(f"User: {trim(m.content)}\n\n")
            if i == len(chat) - 1:
                out.append("Assistant:")
        elif m.role == "assistant":
            out.append(f"Assistant: {trim(m.content)}\n\n")
    return "".join(out)


@_renders(T.GRANITE_3_X)
def _granite3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = []
    for m in chat:
        out.append(f"<|start_of_role|>{m.role}<|end_of_role|>")
        if m.role == "assistant_tool_call":  # Granite 3.x keeps the pseudo-role's name in the header
            out.append("<|tool_call|>")
        out.append(f"{m.content}<|end_of_text|>\n")
    return "".join(out) + ("<|start_of_role|>assistant<|end_of_role|>" if add_ass else "")


@_renders(T.GRANITE_4_0, T.GRANITE_4_1)
def _granite4(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # (4.0 and 4.1 render alike here; upstream tells them apart for their Jinja templates, not for this path)
    out = []
    for m in chat:
        if m.role == "assistant_tool_call":  # Granite 4 writes it as an assistant turn opening with the call tag
            out.append("<|start_of_role|>assistant<|end_of_role|><|tool_call|>")
        else:
            out.append(f"<|start_of_role|>{m.role}<|end_of_role|>")
        out.append(f"{m.content}<|end_of_text|>\n")
    return "".join(out) + ("<|start_of_role|>assistant<|end_of_role|>" if add_ass else "")


@_renders(T.BAILING, T.BAILING_THINK)
def _bailing(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # Ling/Ring: roles upper-cased, the user called HUMAN; the thinking variant opens <think> in the prompt
    out = "".join(f"<role>{'HUMAN' if m.role == 'user' else _ascii_upper(m.role)}</role>{m.content}" for m in chat)
    if add_ass:
        out += "<role>ASSISTANT</role>" + ("<think>" if fmt is T.BAILING_THINK else "")
    return out


@_renders(T.BAILING2)
def _bailing2(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # Ling 2.0: without a system message, the default one switches thinking off
    has_system = bool(chat) and chat[0].role == "system"
    out = "" if has_system else "<role>SYSTEM</role>detailed thinking off<|role_end|>"
    out += "".join(f"<role>{'HUMAN' if m.role == 'user' else _ascii_upper(m.role)}</role>{m.content}<|role_end|>"
                   for m in chat)
    return out + ("<role>ASSISTANT</role>" if add_ass else "")


@_renders(T.OPENAI_MOE)
def _openai_moe(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # gpt-oss's Harmony format, reduced to plain turns (no channels): an assistant turn ends with <|return|>
    out = "".join(f"<|start|>{m.role}<|message|>{m.content}" + ("<|return|>" if m.role == "assistant" else "<|end|>")
                  for m in chat)
    return out + ("<|start|>assistant" if add_ass else "")


@_renders(T.SEED_OSS)
def _seed_oss(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<seed:bos>{m.role}\n{trim(m.content) if m.role == 'assistant' else m.content}<seed:eos>"
                  for m in chat)
    return out + ("<seed:bos>assistant\n" if add_ass else "")


@_renders(T.GROK_2)
def _grok2(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = []
    for m in chat:
        if m.role == "system":
            out.append(f"System: {trim(m.content)}<|separator|>\n\n")
        elif m.role == "user":
            out.append(f"Human: {trim(m.content)}<|separator|>\n\n")
        elif m.role == "assistant":  # (not trimmed, unlike the other two)
            out.append(f"Assistant: {m.content}<|separator|>\n\n")
    return "".join(out) + ("Assistant:" if add_ass else "")


@_renders(T.PANGU_EMBED)
def _pangu_embed(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # openPangu-Embedded: "[unused9]<role>：text[unused10]" with Chinese role names; an empty system turn
    # first when the conversation has none
    names = {"system": "系统", "user": "用户", "assistant": "助手", "tool": "工具", "function": "方法"}
    out = []
    for i, m in enumerate(chat):
        if i == 0 and m.role != "system":
            out.append("[unused9]系统：[unused10]")
        if m.role in names:
            out.append(f"[unused9]{names[m.role]}：{m.content}[unused10]")
    return "".join(out) + ("[unused9]助手：" if add_ass else "")


def llm_chat_apply_template(tmpl: LlmChatTemplate, chat: Iterable[LlamaChatMessage], add_ass: bool) -> str:
    """The prompt llama.cpp's built-in format `tmpl` renders for `chat`; UnknownBuiltinTemplateError for
    UNKNOWN (upstream returns -1)."""
    render = _FORMATS.get(tmpl)
    if render is None:
        raise UnknownBuiltinTemplateError(f"{tmpl.cpp_name} has no built-in rendering")
    # The C API takes `const char *` roles and contents: text after a NUL never reaches the renderer.
    return render(tmpl, [LlamaChatMessage(c_string(m.role), c_string(m.content)) for m in chat], add_ass)


def llama_chat_apply_template(tmpl: str | None, chat: Iterable[LlamaChatMessage], add_ass: bool = True) -> str:
    """llama.cpp's public `llama_chat_apply_template`: `tmpl` is a built-in name or a Jinja template's text
    (detected, never run), None meaning chatml; UnknownBuiltinTemplateError when no built-in format fits."""
    text = "chatml" if tmpl is None else c_string(tmpl)
    fmt = llm_chat_detect_template(text)
    if fmt is T.UNKNOWN:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UnknownBuiltinTemplateError(
            f"{shown!r} is neither a llama.cpp built-in chat template name nor a template text its detection "
            "recognises (llama.cpp: \"this custom template is not supported, try using --jinja\")")
    return llm_chat_apply_template(fmt, chat, add_ass)


def messages_from_openai(messages: object) -> tuple[LlamaChatMessage, ...]:
    """OpenAI-style messages (a list, or {"messages": [...]}) as llama.cpp's legacy path passes them to the
    built-in formats: role and text only. A content given as parts becomes their texts joined by newlines (as
    `common_chat_templates_apply_legacy` joins them; other parts are dropped there too); null is "". Tool
    calls and other fields have no place in these formats and are ignored, as upstream ignores them."""
    if isinstance(messages, Mapping):
        messages = messages.get("messages")
    if not isinstance(messages, list):
        raise AutoparserError("a conversation is a JSON list of messages, or an object with a \"messages\" list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise AutoparserError(f"message {i}: not an object with a string \"role\"")
        out.append(LlamaChatMessage(m["role"], _text_of(m.get("content"), i)))
    return tuple(out)


def _text_of(content: Any, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        text = ""
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in ("text", "media_marker"):
                text += ("\n" if text else "") + str(part.get("text") or "")
        return text
    raise AutoparserError(f"message {i}: content is neither a string, null nor a list of parts")
