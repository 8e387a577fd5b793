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


def _by_role(chat: Messages, turns: Mapping[str, _Turn], other: _Turn | None = None) -> str:
    """Each message between its role's markers; a role not in `turns` between `other`'s, or left out when
    `other` is None. (Upstream writes these formats as one branch per role: here they are a table.)"""
    out = []
    for m in chat:
        turn = turns.get(m.role, other)
        if turn is not None:
            out.append(turn[0] + m.content + turn[1])
    return "".join(out)


@_renders(T.CHATML)
def _chatml(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in chat)
    return out + ("<|im_start|>assistant\n" if add_ass else "")


@_renders(T.MISTRAL_V7, T.MISTRAL_V7_TEKKEN)
def _mistral_v7(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # (no generation prompt: the [/INST] closing the last user turn is where the answer starts)
    space = " " if fmt is T.MISTRAL_V7 else ""
    out = []
    for m in chat:
        if m.role == "system":
            out.append(f"[SYSTEM_PROMPT]{space}{m.content}[/SYSTEM_PROMPT]")
        elif m.role == "user":
            out.append(f"[INST]{space}{m.content}[/INST]")
        else:
            out.append(f"{space}{m.content}</s>")
    return "".join(out)


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


@_renders(T.PHI_3)
def _phi3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|{m.role}|>\n{m.content}<|end|>\n" for m in chat)
    return out + ("<|assistant|>\n" if add_ass else "")


@_renders(T.PHI_4)
def _phi4(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|im_start|>{m.role}<|im_sep|>{m.content}<|im_end|>" for m in chat)
    return out + ("<|im_start|>assistant<|im_sep|>" if add_ass else "")


@_renders(T.FALCON_3)
def _falcon3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|{m.role}|>\n{m.content}\n" for m in chat)
    return out + ("<|assistant|>\n" if add_ass else "")


@_renders(T.ZEPHYR)
def _zephyr(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|{m.role}|>\n{m.content}<|endoftext|>\n" for m in chat)
    return out + ("<|assistant|>\n" if add_ass else "")


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


@_renders(T.VICUNA, T.VICUNA_ORCA)
def _vicuna(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    system = ("SYSTEM: ", "\n") if fmt is T.VICUNA_ORCA else ("", "\n\n")
    out = _by_role(chat, {"system": system, "user": ("USER: ", "\n"), "assistant": ("ASSISTANT: ", "</s>\n")})
    return out + ("ASSISTANT:" if add_ass else "")


@_renders(T.DEEPSEEK)
def _deepseek(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = _by_role(chat, {"system": ("", ""), "user": ("### Instruction:\n", "\n"),
                          "assistant": ("### Response:\n", "\n<|EOT|>\n")})
    return out + ("### Response:\n" if add_ass else "")


@_renders(T.COMMAND_R)
def _command_r(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    tokens = {"system": "<|SYSTEM_TOKEN|>", "user": "<|USER_TOKEN|>", "assistant": "<|CHATBOT_TOKEN|>"}
    out = "".join(f"<|START_OF_TURN_TOKEN|>{tokens[m.role]}{trim(m.content)}<|END_OF_TURN_TOKEN|>"
                  for m in chat if m.role in tokens)
    return out + ("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" if add_ass else "")


@_renders(T.LLAMA_3)
def _llama3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{trim(m.content)}<|eot_id|>" for m in chat)
    return out + ("<|start_header_id|>assistant<|end_header_id|>\n\n" if add_ass else "")


@_renders(T.CHATGLM_3)
def _chatglm3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "[gMASK]sop" + "".join(f"<|{m.role}|>\n {m.content}" for m in chat)
    return out + ("<|assistant|>" if add_ass else "")


@_renders(T.CHATGLM_4)
def _chatglm4(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "[gMASK]<sop>" + "".join(f"<|{m.role}|>\n{m.content}" for m in chat)
    return out + ("<|assistant|>\n" if add_ass else "")


@_renders(T.GLMEDGE)
def _glmedge(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|{m.role}|>\n{m.content}" for m in chat)
    return out + ("<|assistant|>" if add_ass else "")


@_renders(T.MINICPM)
def _minicpm(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # (each user turn already ends with <AI>, the assistant's prompt)
    return "".join(f"<用户>{trim(m.content)}<AI>" if m.role == "user" else trim(m.content) for m in chat)


@_renders(T.DEEPSEEK_2)
def _deepseek2(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = _by_role(chat, {"system": ("", "\n\n"), "user": ("User: ", "\n\n"),
                          "assistant": ("Assistant: ", "<｜end▁of▁sentence｜>")})
    return out + ("Assistant:" if add_ass else "")


@_renders(T.DEEPSEEK_3)
def _deepseek3(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = _by_role(chat, {"system": ("", "\n\n"), "user": ("<｜User｜>", ""),
                          "assistant": ("<｜Assistant｜>", "<｜end▁of▁sentence｜>")})
    return out + ("<｜Assistant｜>" if add_ass else "")


@_renders(T.DEEPSEEK_OCR)
def _deepseek_ocr(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    return "".join(m.content for m in chat)  # the OCR model takes its prompt bare: no markup at all


@_renders(T.EXAONE_3, T.EXAONE_4)
def _exaone(fmt: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # EXAONE-3.0-7.8B-Instruct (https://huggingface.co/LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct/discussions/8); EXAONE
    # 4 adds a tool turn. A user turn has no end marker: the next tag ends it.
    out = []
    for m in chat:
        if m.role == "user":
            out.append(f"[|user|]{trim(m.content)}\n")
        elif m.role in ("system", "assistant") or (m.role == "tool" and fmt is T.EXAONE_4):
            out.append(f"[|{m.role}|]{trim(m.content)}[|endofturn|]\n")
    return "".join(out) + ("[|assistant|]" if add_ass else "")


@_renders(T.EXAONE_MOE)
def _exaone_moe(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|{m.role}|>\n{trim(m.content)}<|endofturn|>\n" for m in chat
                  if m.role in ("system", "user", "assistant", "tool"))
    return out + ("<|assistant|>\n" if add_ass else "")


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


@_renders(T.GIGACHAT)
def _gigachat(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # Every user turn is followed by the (empty) list of available functions, as GigaChat's template writes it
    has_system = bool(chat) and chat[0].role == "system"
    out = [f"<s>{chat[0].content}<|message_sep|>" if has_system else "<s>"]
    for m in chat[1 if has_system else 0:]:
        if m.role == "user":
            out.append(f"user<|role_sep|>{m.content}<|message_sep|>available functions<|role_sep|>[]<|message_sep|>")
        elif m.role == "assistant":
            out.append(f"assistant<|role_sep|>{m.content}<|message_sep|>")
    return "".join(out) + ("assistant<|role_sep|>" if add_ass else "")


@_renders(T.MEGREZ)
def _megrez(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|role_start|>{m.role}<|role_end|>{m.content}<|turn_end|>" for m in chat)
    return out + ("<|role_start|>assistant<|role_end|>" if add_ass else "")


@_renders(T.YANDEX)
def _yandex(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # "\n\n" is the model's end of turn; a system message has no place in this format and is dropped
    out = _by_role(chat, {"user": (" Пользователь: ", "\n\n"), "assistant": (" Ассистент: ", "\n\n")})
    return out + (" Ассистент:[SEP]" if add_ass else "")


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


@_renders(T.LLAMA4)
def _llama4(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|header_start|>{m.role}<|header_end|>\n\n{trim(m.content)}<|eot|>" for m in chat)
    return out + ("<|header_start|>assistant<|header_end|>\n\n" if add_ass else "")


@_renders(T.SMOLVLM)
def _smolvlm(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # <|im_start|> is SmolVLM's BOS, once; its turns are "User:"/"Assistant:" lines, not ChatML's
    out = _by_role(chat, {"system": ("", "\n\n"), "user": ("User: ", "<end_of_utterance>\n")},
                   other=("Assistant: ", "<end_of_utterance>\n"))
    return "<|im_start|>" + out + ("Assistant:" if add_ass else "")


@_renders(T.DOTS1)
def _dots1(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # dots.llm1.inst; any role but system and user is a response
    out = _by_role(chat, {"system": ("<|system|>", "<|endofsystem|>"),
                          "user": ("<|userprompt|>", "<|endofuserprompt|>")},
                   other=("<|response|>", "<|endofresponse|>"))
    return out + ("<|response|>" if add_ass else "")


@_renders(T.HUNYUAN_MOE)
def _hunyuan_moe(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # tencent/Hunyuan-A13B-Instruct; any role but system and assistant is a user turn
    return _by_role(chat, {"system": ("<|startoftext|>", "<|extra_4|>"), "assistant": ("", "<|eos|>")},
                    other=("<|startoftext|>", "<|extra_0|>"))


@_renders(T.OPENAI_MOE)
def _openai_moe(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # gpt-oss's Harmony format, reduced to plain turns (no channels): an assistant turn ends with <|return|>
    out = "".join(f"<|start|>{m.role}<|message|>{m.content}" + ("<|return|>" if m.role == "assistant" else "<|end|>")
                  for m in chat)
    return out + ("<|start|>assistant" if add_ass else "")


@_renders(T.HUNYUAN_DENSE)
def _hunyuan_dense(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # tencent/Hunyuan-4B-Instruct: only a system message that comes first is kept; each user turn ends with
    # the assistant's tag, which is the generation prompt
    out = []
    for i, m in enumerate(chat):
        if i == 0 and m.role == "system":
            out.append(f"{m.content}<｜hy_place▁holder▁no▁3｜>")
        if m.role == "assistant":
            out.append(f"<｜hy_Assistant｜>{m.content}<｜hy_place▁holder▁no▁2｜>")
        elif m.role == "user":
            out.append(f"<｜hy_User｜>{m.content}<｜hy_Assistant｜>")
    return "".join(out)


@_renders(T.HUNYUAN_VL)
def _hunyuan_vl(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # tencent/HunyuanOCR and HunyuanVL: each turn's tag comes after its text
    out = ["<｜hy_begin▁of▁sentence｜>"]
    for i, m in enumerate(chat):
        if i == 0 and m.role == "system":
            out.append(f"{m.content}<｜hy_place▁holder▁no▁3｜>")
        elif m.role == "user":
            out.append(f"{m.content}<｜hy_User｜>")
        elif m.role == "assistant":
            out.append(f"{m.content}<｜hy_Assistant｜>")
    return "".join(out)


@_renders(T.KIMI_K2)
def _kimi_k2(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    # moonshotai/Kimi-K2-Instruct; a tool result is a system-tagged turn named "tool". An unknown role gets no
    # header but its content and <|im_end|> are still written, as upstream does.
    end = "<|im_end|>"
    out = _by_role(chat, {"system": ("<|im_system|>system<|im_middle|>", end),
                          "user": ("<|im_user|>user<|im_middle|>", end),
                          "assistant": ("<|im_assistant|>assistant<|im_middle|>", end),
                          "tool": ("<|im_system|>tool<|im_middle|>", end)}, other=("", end))
    return out + ("<|im_assistant|>assistant<|im_middle|>" if add_ass else "")


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


@_renders(T.SOLAR_OPEN)
def _solar_open(_: LlmChatTemplate, chat: Messages, add_ass: bool) -> str:
    out = "".join(f"<|begin|>{m.role}<|content|>{m.content}<|end|>" for m in chat)
    return out + ("<|begin|>assistant" if add_ass else "")


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
