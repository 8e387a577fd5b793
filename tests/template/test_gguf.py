"""GGUF input: the header reader (template/gguf.py), the loader (template/source.py) and the commands on a
.gguf file, on files written by llama.cpp's own GGUFWriter."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from autoparser import GGUFError, TemplateError, generate, load_template
from autoparser.cli import main
from autoparser.corpus import Corpus
from autoparser.template.gguf import gguf_templates, read_gguf_file, read_gguf_header

GgufWriter = Callable[..., Path]  # the gguf_writer fixture (conftest.write_gguf)


def _corpus(name: str) -> str:
    return Corpus.load().by_name(name).read_text()


QWEN3 = "Qwen__Qwen3-0.6B"
LLAMA = "meta-llama__Llama-3.1-8B-Instruct"


@pytest.fixture
def model(tmp_path: Path, gguf_writer: GgufWriter) -> Path:
    """A model whose default template is Qwen3's and whose tool_use template is Llama 3.1's."""
    return gguf_writer(tmp_path / "model.gguf", templates={"default": _corpus(QWEN3), "tool_use": _corpus(LLAMA)},
                       tokens=["<unk>", "<|begin_of_text|>", "<|im_end|>", "hello"], tensor_bytes=4096)


def test_the_header_gives_the_templates_and_the_bos_eos_text(model: Path) -> None:
    header = read_gguf_file(model)
    assert header.version == 3 and header.tensor_count == 1
    found = gguf_templates(header, name=str(model))
    assert dict(found.templates) == {"default": _corpus(QWEN3), "tool_use": _corpus(LLAMA)}
    assert list(found.templates) == ["default", "tool_use"]
    assert (found.bos_token, found.eos_token) == ("<|begin_of_text|>", "<|im_end|>")


def test_a_big_endian_file_reads_the_same(tmp_path: Path, gguf_writer: GgufWriter) -> None:
    path = gguf_writer(tmp_path / "be.gguf", templates={"default": "{{ bos_token }}"}, big_endian=True)
    found = gguf_templates(read_gguf_file(path), name="be")
    assert dict(found.templates) == {"default": "{{ bos_token }}"} and found.bos_token == "<s>"


def test_only_the_header_is_read(tmp_path: Path, gguf_writer: GgufWriter) -> None:
    path = gguf_writer(tmp_path / "big.gguf", templates={"default": _corpus(QWEN3)}, tensor_bytes=8 * 1024 * 1024)
    reads: list[tuple[int, int]] = []
    with path.open("rb") as fh:
        def read_at(offset: int, size: int) -> bytes:
            fh.seek(offset)
            data = fh.read(size)
            reads.append((offset, len(data)))
            return data

        header = read_gguf_header(read_at, name="big", first_chunk=256)
    total = sum(n for _, n in reads)
    assert len(reads) > 1  # the header is longer than the first chunk: it was read in growing chunks
    assert header.size <= total < 2 * header.size + 256  # doubling over-reads by less than the header again
    assert total < os.path.getsize(path) - 8 * 1024 * 1024  # none of the tensor data
    with path.open("rb") as fh, pytest.raises(GGUFError, match=r"big: malformed GGUF header, or one over 1000 bytes: tokenizer.chat_template claims \d+ bytes"):
        read_gguf_header(lambda offset, size: (fh.seek(offset), fh.read(size))[1], name="big", max_bytes=1000)


def test_the_loader_feeds_generate(model: Path) -> None:
    loaded = load_template(model)
    assert (loaded.name, loaded.variant, loaded.bos_token) == (str(model), "default", "<|begin_of_text|>")
    request = {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}
    assert generate(loaded.source, request).prompt == generate(_corpus(QWEN3), request).prompt
    tool_use = load_template(model, variant="tool_use")
    assert (tool_use.name, tool_use.source) == (f"{model}#tool_use", _corpus(LLAMA))


def test_without_a_default_llama_cpp_falls_back_to_tool_use(tmp_path: Path, gguf_writer: GgufWriter) -> None:
    path = gguf_writer(tmp_path / "m.gguf", templates={"tool_use": _corpus(LLAMA)})
    assert load_template(path).source == _corpus(LLAMA)
    path = gguf_writer(tmp_path / "n.gguf", templates={"rag": "x"})
    with pytest.raises(GGUFError, match=r"no default chat template .*it has rag: choose one with --variant"):
        load_template(path)


def test_errors_are_one_line_template_errors(tmp_path: Path, gguf_writer: GgufWriter, model: Path) -> None:
    jinja = tmp_path / "t.gguf"
    jinja.write_text("{{ messages }}")
    cases: list[tuple[Path, str | None, str]] = [(jinja, None, r"not a GGUF file \(it starts with b'\{\{ m'")]
    data = model.read_bytes()
    header_size = read_gguf_file(model).size
    for cut in (2, 10, 30, header_size // 2, header_size - 1):
        short = tmp_path / f"cut{cut}.gguf"
        short.write_bytes(data[:cut])
        expected = r"shorter than its 4-byte magic" if cut < 4 else rf"truncated GGUF header: the file ends at byte {cut}, inside"
        cases.append((short, None, expected))
    bare = gguf_writer(tmp_path / "bare.gguf", templates=None)
    cases.append((bare, None, r"the GGUF has no chat template \(no tokenizer.chat_template key"))
    cases.append((model, "rag", r"the GGUF has no chat template 'rag'; it has default, tool_use"))
    for path, variant, expected in cases:
        with pytest.raises(GGUFError, match=expected) as info:
            load_template(path, variant=variant)
        assert isinstance(info.value, TemplateError) and "\n" not in str(info.value)
        assert str(info.value).startswith(str(path))


def test_a_variant_of_a_template_file_is_refused(tmp_path: Path) -> None:
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{{ messages }}")
    with pytest.raises(TemplateError, match="a template file holds one template"):
        load_template(jinja, variant="tool_use")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_analyze_a_gguf_shows_the_embedded_template(model: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for variant, name in ((None, QWEN3), ("tool_use", LLAMA)):
        jinja = tmp_path / f"{name}.jinja"
        jinja.write_text(_corpus(name), encoding="utf-8")
        for extra in ([], ["--json"]):
            code, out, err = _cli(capsys, "analyze", str(model), *extra, *(["--variant", variant] if variant else []))
            assert code == 0 and err == ""
            assert "Generated parser" in out or extra
            assert (code, out) == _cli(capsys, "analyze", str(jinja), *extra)[:2]
    code, out, err = _cli(capsys, "export", "response-template", str(model))
    assert code == 0 and out == _cli(capsys, "export", "response-template", str(tmp_path / f"{QWEN3}.jinja"))[1]


def test_parse_reads_with_the_gguf_template(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import json

    jinja = tmp_path / "qwen3.jinja"
    jinja.write_text(_corpus(QWEN3), encoding="utf-8")
    results = []
    for template in (model, jinja):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"<think>\nhm\n</think>\n\nHello")))
        code, out, _ = _cli(capsys, "parse", str(template))
        assert code == 0
        results.append(json.loads(out))
    assert results[0] == results[1] and results[0]["content"] == "Hello"


def test_cli_gguf_errors_are_one_line_exit_2(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.gguf"
    for argv, needle in ((["analyze", str(model), "--variant", "rag"], "has no chat template 'rag'; it has default, tool_use"),
                         (["parse", str(model), "--variant", "rag"], "has no chat template 'rag'"),
                         (["export", "response-template", str(model), "--variant", "rag"], "'rag'"),
                         (["analyze", str(missing)], f"cannot read GGUF file {missing}: No such file")):
        code, out, err = _cli(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err
