"""The built-in chat formats of llama.cpp (src/llama-chat.cpp): their names, and how a template's text or a name
is mapped to one of them (`llm_chat_template_from_str`, `llm_chat_detect_template`).

Detection is llama.cpp's: substring heuristics tried in a fixed order, the first that matches wins. The order
matters (a Phi-4 template also contains ChatML's `<|im_start|>`; a Falcon 3 one also has GLMEdge's tags), so
the checks below are in the upstream order, one branch per upstream branch, and must stay so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from autoparser.errors import UnknownBuiltinTemplateError

__all__ = [
    "LLM_CHAT_TEMPLATES",
    "BuiltinDetection",
    "LlmChatTemplate",
    "detect_builtin",
    "llama_chat_builtin_templates",
    "llm_chat_detect_template",
    "llm_chat_template_from_str",
]


class LlmChatTemplate(Enum):
    """`enum llm_chat_template` (src/llama-chat.h), without the `LLM_CHAT_TEMPLATE_` prefix; the same order."""

    CHATML = auto()
    LLAMA_2 = auto()
    LLAMA_2_SYS = auto()
    LLAMA_2_SYS_BOS = auto()
    LLAMA_2_SYS_STRIP = auto()
    MISTRAL_V1 = auto()
    MISTRAL_V3 = auto()
    MISTRAL_V3_TEKKEN = auto()
    MISTRAL_V7 = auto()
    MISTRAL_V7_TEKKEN = auto()
    PHI_3 = auto()
    PHI_4 = auto()
    FALCON_3 = auto()
    ZEPHYR = auto()
    MONARCH = auto()
    GEMMA = auto()
    ORION = auto()
    OPENCHAT = auto()
    VICUNA = auto()
    VICUNA_ORCA = auto()
    DEEPSEEK = auto()
    DEEPSEEK_2 = auto()
    DEEPSEEK_3 = auto()
    DEEPSEEK_OCR = auto()
    COMMAND_R = auto()
    LLAMA_3 = auto()
    CHATGLM_3 = auto()
    CHATGLM_4 = auto()
    GLMEDGE = auto()
    MINICPM = auto()
    EXAONE_3 = auto()
    EXAONE_4 = auto()
    EXAONE_MOE = auto()
    RWKV_WORLD = auto()
    GRANITE_3_X = auto()
    GRANITE_4_0 = auto()
    GRANITE_4_1 = auto()
    GIGACHAT = auto()
    MEGREZ = auto()
    YANDEX = auto()
    BAILING = auto()
    BAILING_THINK = auto()
    BAILING2 = auto()
    LLAMA4 = auto()
    SMOLVLM = auto()
    DOTS1 = auto()
    HUNYUAN_MOE = auto()
    OPENAI_MOE = auto()
    HUNYUAN_DENSE = auto()
    HUNYUAN_VL = auto()
    KIMI_K2 = auto()
    SEED_OSS = auto()
    GROK_2 = auto()
    PANGU_EMBED = auto()
    SOLAR_OPEN = auto()
    UNKNOWN = auto()

    @property
    def cpp_name(self) -> str:
        """The C++ enumerator (`LLM_CHAT_TEMPLATE_CHATML`), to name a format that has no built-in name."""
        return f"LLM_CHAT_TEMPLATE_{self.name}"

    @property
    def builtin_name(self) -> str | None:
        """The name `--chat-template` takes for it, or None: DOTS1 is only ever detected (upstream gives it no
        name), UNKNOWN is no format."""
        return _NAME_OF.get(self)


T = LlmChatTemplate

# Name -> format, as `--chat-template NAME` takes them (the upstream spelling, `seed_oss` with its underscore).
LLM_CHAT_TEMPLATES: dict[str, LlmChatTemplate] = {
    "chatml": T.CHATML,
    "llama2": T.LLAMA_2,
    "llama2-sys": T.LLAMA_2_SYS,
    "llama2-sys-bos": T.LLAMA_2_SYS_BOS,
    "llama2-sys-strip": T.LLAMA_2_SYS_STRIP,
    "mistral-v1": T.MISTRAL_V1,
    "mistral-v3": T.MISTRAL_V3,
    "mistral-v3-tekken": T.MISTRAL_V3_TEKKEN,
    "mistral-v7": T.MISTRAL_V7,
    "mistral-v7-tekken": T.MISTRAL_V7_TEKKEN,
    "phi3": T.PHI_3,
    "phi4": T.PHI_4,
    "falcon3": T.FALCON_3,
    "zephyr": T.ZEPHYR,
    "monarch": T.MONARCH,
    "gemma": T.GEMMA,
    "orion": T.ORION,
    "openchat": T.OPENCHAT,
    "vicuna": T.VICUNA,
    "vicuna-orca": T.VICUNA_ORCA,
    "deepseek": T.DEEPSEEK,
    "deepseek2": T.DEEPSEEK_2,
    "deepseek3": T.DEEPSEEK_3,
    "deepseek-ocr": T.DEEPSEEK_OCR,
    "command-r": T.COMMAND_R,
    "llama3": T.LLAMA_3,
    "chatglm3": T.CHATGLM_3,
    "chatglm4": T.CHATGLM_4,
    "glmedge": T.GLMEDGE,
    "minicpm": T.MINICPM,
    "exaone3": T.EXAONE_3,
    "exaone4": T.EXAONE_4,
    "exaone-moe": T.EXAONE_MOE,
    "rwkv-world": T.RWKV_WORLD,
    "granite": T.GRANITE_3_X,
    "granite-4.0": T.GRANITE_4_0,
    "granite-4.1": T.GRANITE_4_1,
    "gigachat": T.GIGACHAT,
    "megrez": T.MEGREZ,
    "yandex": T.YANDEX,
    "bailing": T.BAILING,
    "bailing-think": T.BAILING_THINK,
    "bailing2": T.BAILING2,
    "llama4": T.LLAMA4,
    "smolvlm": T.SMOLVLM,
    "hunyuan-moe": T.HUNYUAN_MOE,
    "gpt-oss": T.OPENAI_MOE,
    "hunyuan-dense": T.HUNYUAN_DENSE,
    "hunyuan-vl": T.HUNYUAN_VL,
    "kimi-k2": T.KIMI_K2,
    "seed_oss": T.SEED_OSS,
    "grok-2": T.GROK_2,
    "pangu-embedded": T.PANGU_EMBED,
    "solar-open": T.SOLAR_OPEN,
}
_NAME_OF = {fmt: name for name, fmt in LLM_CHAT_TEMPLATES.items()}


def llama_chat_builtin_templates() -> tuple[str, ...]:
    """The built-in names in the order llama.cpp lists them: its table is a std::map, so sorted by name."""
    return tuple(sorted(LLM_CHAT_TEMPLATES))


def llm_chat_template_from_str(name: str) -> LlmChatTemplate:
    """The format a built-in name stands for; exact spelling only, as upstream (`map::at`)."""
    try:
        return LLM_CHAT_TEMPLATES[name]
    except KeyError:
        raise UnknownBuiltinTemplateError(
            f"{name!r} is not a llama.cpp built-in chat template (known: "
            f"{', '.join(llama_chat_builtin_templates())})") from None


def llm_chat_detect_template(tmpl: str) -> LlmChatTemplate:
    """The format llama.cpp picks for `tmpl`: a built-in name first, else the first heuristic that matches the
    Jinja text, else UNKNOWN (which callers turn into an error; upstream returns -1)."""
    fmt = LLM_CHAT_TEMPLATES.get(tmpl)
    if fmt is not None:
        return fmt

    def has(needle: str) -> bool:
        return needle in tmpl

    if has("<|im_start|>"):
        if has("<|im_sep|>"):
            return T.PHI_4
        # SmolVLM opens with <|im_start|> as its BOS but its turns are not ChatML's
        return T.SMOLVLM if has("<end_of_utterance>") else T.CHATML
    if tmpl.startswith("mistral") or has("[INST]"):
        if has("[SYSTEM_PROMPT]"):
            return T.MISTRAL_V7
        # Mistral's official v1 template concatenates the system message after ' [INST] '; the official v3 and
        # v3-tekken ones declare tools. Both tell them from the community llama2-style [INST] templates.
        if has("' [INST] ' + system_message") or has("[AVAILABLE_TOOLS]"):
            if has(" [INST]"):
                return T.MISTRAL_V1
            if has('"[INST]"'):
                return T.MISTRAL_V3_TEKKEN
            return T.MISTRAL_V3
        # llama2 and its variants, most specific first: stripping content wins over BOS-in-history, which wins
        # over a <<SYS>> block
        if has("content.strip()"):
            return T.LLAMA_2_SYS_STRIP
        if has("bos_token + '[INST]"):
            return T.LLAMA_2_SYS_BOS
        if has("<<SYS>>"):
            return T.LLAMA_2_SYS
        return T.LLAMA_2
    if has("<|assistant|>") and has("<|end|>"):
        return T.PHI_3
    if has("[gMASK]<sop>"):
        return T.CHATGLM_4
    if has("<|assistant|>") and has("<|user|>"):
        if has("<|tool_declare|>"):
            return T.EXAONE_MOE
        return T.FALCON_3 if has("</s>") else T.GLMEDGE
    if has("<|{{ item['role'] }}|>") and has("<|begin_of_image|>"):
        return T.GLMEDGE
    if has("<|user|>") and has("<|endoftext|>"):
        return T.ZEPHYR
    if has("bos_token + message['role']"):
        return T.MONARCH
    if has("<start_of_turn>"):
        return T.GEMMA
    if has("'\\n\\nAssistant: ' + eos_token"):  # OrionStarAI/Orion-14B-Chat (the escapes are the text's own)
        return T.ORION
    if has("GPT4 Correct "):  # openchat/openchat-3.5-0106
        return T.OPENCHAT
    if has("USER: ") and has("ASSISTANT: "):  # eachadea/vicuna-13b-1.1, and the Orca variant with a SYSTEM turn
        return T.VICUNA_ORCA if has("SYSTEM: ") else T.VICUNA
    if has("### Instruction:") and has("<|EOT|>"):  # deepseek-ai/deepseek-coder-33b-instruct
        return T.DEEPSEEK
    if has("<|START_OF_TURN_TOKEN|>") and has("<|USER_TOKEN|>"):  # CohereForAI/c4ai-command-r-plus
        return T.COMMAND_R
    if has("<|start_header_id|>") and has("<|end_header_id|>"):
        return T.LLAMA_3
    if has("[gMASK]sop"):  # chatglm3-6b (checked after ChatGLM4's "[gMASK]<sop>")
        return T.CHATGLM_3
    if has("<用户>"):  # MiniCPM-3B-OpenHermes-2.5-v2-GGUF
        return T.MINICPM
    if has("'Assistant: ' + message['content'] + eos_token"):
        return T.DEEPSEEK_2
    if has("<｜Assistant｜>") and has("<｜User｜>") and has("<｜end▁of▁sentence｜>"):
        return T.DEEPSEEK_3
    if has("[|system|]") and has("[|assistant|]") and has("[|endofturn|]"):
        # EXAONE 4 adds a tool turn to EXAONE 3.0's markup
        return T.EXAONE_4 if has("[|tool|]") else T.EXAONE_3
    if has("rwkv-world") or has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"):
        return T.RWKV_WORLD
    if has("<|start_of_role|>"):
        if has("<tool_call>") or has("<tools>"):
            return T.GRANITE_4_0 if has("g4_default_system_message") else T.GRANITE_4_1
        return T.GRANITE_3_X
    if has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"):
        return T.GIGACHAT
    if has("<|role_start|>"):
        return T.MEGREZ
    if has(" Ассистент:"):
        return T.YANDEX
    if has("<role>ASSISTANT</role>") and has("'HUMAN'"):
        return T.BAILING
    if has("<role>ASSISTANT</role>") and has('"HUMAN"') and has("<think>"):
        return T.BAILING_THINK
    if has("<role>ASSISTANT</role>") and has("<role>HUMAN</role>") and has("<|role_end|>"):
        return T.BAILING2
    if has("<|header_start|>") and has("<|header_end|>"):
        return T.LLAMA4
    if has("<|endofuserprompt|>"):
        return T.DOTS1
    if has("<|extra_0|>") and has("<|extra_4|>"):
        return T.HUNYUAN_MOE
    if has("<|start|>") and has("<|channel|>"):
        return T.OPENAI_MOE
    if has("<｜hy_Assistant｜>") and has("<｜hy_begin▁of▁sentence｜>"):
        return T.HUNYUAN_VL
    if has("<｜hy_Assistant｜>") and has("<｜hy_place▁holder▁no▁3｜>"):
        return T.HUNYUAN_DENSE
    if has("<|im_assistant|>assistant<|im_middle|>"):
        return T.KIMI_K2
    if has("<seed:bos>"):
        return T.SEED_OSS
    if has("'Assistant: '  + message['content'] + '<|separator|>"):  # (two spaces, as in Grok-2's template)
        return T.GROK_2
    if has("[unused9]系统：[unused10]"):
        return T.PANGU_EMBED
    if has("<|begin|>") and has("<|end|>") and has("<|content|>"):
        return T.SOLAR_OPEN
    return T.UNKNOWN


def c_string(text: str) -> str:
    """`text` as llama.cpp's C API sees it: up to the first NUL (its strings are `const char *`)."""
    nul = text.find("\0")
    return text if nul < 0 else text[:nul]


@dataclass(frozen=True)
class BuiltinDetection:
    """What llama.cpp's built-in (non-Jinja) path does with a template text: the format it renders it as, or
    UNKNOWN when it rejects it ("this custom template is not supported, try using --jinja")."""

    template: LlmChatTemplate

    @property
    def supported(self) -> bool:
        return self.template is not T.UNKNOWN

    @property
    def name(self) -> str | None:
        """The built-in name (`--chat-template NAME`), None when the format has none (DOTS1) or is UNKNOWN."""
        return self.template.builtin_name

    @property
    def label(self) -> str:
        """One word for reports: the built-in name, else the C++ enumerator (DOTS1), else "none"."""
        if not self.supported:
            return "none"
        return self.name or self.template.cpp_name


def detect_builtin(text: str) -> BuiltinDetection:
    """The built-in format llama.cpp's legacy path (`llama_chat_apply_template` with this text, as
    `common_chat_templates_apply_legacy` calls it without --jinja) would use."""
    return BuiltinDetection(llm_chat_detect_template(c_string(text)))
