"""`--tokenizer model.gguf`: a tokenizer folder rebuilt from a GGUF's metadata, on small GGUF files written here
with the gguf package's own writer (the real model's file is checked in tests/test_real_model.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from tests.conftest import unavailable
from vftui.collector import gguf_tokenizer
from vftui.errors import UserError

pytestmark = pytest.mark.unit

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_alphabet() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return sorted(set(bytes_to_unicode().values()))


def write_gguf(path: Path, kind: str = "gpt2", pre: str = "smollm") -> Path:
    """A tokenizer-only GGUF: every byte, a few merges ("12" among them), ChatML's specials, ``<think>``."""
    if importlib.util.find_spec("gguf") is None:
        unavailable("gguf is not installed (pip install -e '.[real-model]'; .ci/run installs it)")
    import gguf

    merges = ["h e", "l l", "he ll", "hell o", "1 2", "Ġ w"]
    tokens = [*SPECIALS, *byte_alphabet(), "he", "ll", "hell", "hello", "12", "Ġw", "<think>"]
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS) - 1) + [4]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(kind)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    gguf_tokenizer.build(write_gguf(folder / "tiny.gguf"), folder / "out")
    return AutoTokenizer.from_pretrained(str(folder / "out"))


def test_specials_template_and_digits_as_llama_cpp_splits_them(built):
    assert built.eos_token == "<|im_end|>" and built.bos_token == "<|im_start|>"
    ids = built.encode("<|im_start|>hello 12<think><|im_end|>", add_special_tokens=False)
    assert built.convert_ids_to_tokens(ids) == [
        "<|im_start|>", "hello", "Ġ", "1", "2", "<think>", "<|im_end|>",
    ]  # fmt: skip
    assert built.encode("w w", add_special_tokens=False)[-1] == built.convert_tokens_to_ids("Ġw")
    messages = [{"role": "user", "content": "hi"}]
    text = built.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
def test_any_text_round_trips(built, text):
    assert built.decode(built.encode(text, add_special_tokens=False)) == text


def test_the_folder_is_built_once_per_file_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = write_gguf(tmp_path / "model.gguf")
    folder = gguf_tokenizer.tokenizer_folder(str(path))
    assert folder.is_relative_to(tmp_path / "cache") and (folder / "tokenizer.json").is_file()
    built_at = (folder / "tokenizer.json").stat().st_mtime_ns
    assert gguf_tokenizer.tokenizer_folder(str(path)) == folder
    assert (folder / "tokenizer.json").stat().st_mtime_ns == built_at
    assert [p.name for p in folder.parent.iterdir()] == [folder.name], "no half-built folder left"


@pytest.mark.parametrize(
    ("kind", "pre", "says"),
    [("llama", "default", "not byte-level BPE"), ("gpt2", "qwen2", "'qwen2' pre-tokenizer")],
)
def test_a_tokenizer_it_cannot_rebuild_exactly_is_one_sentence(tmp_path, kind, pre, says):
    with pytest.raises(UserError, match=says):
        gguf_tokenizer.build(write_gguf(tmp_path / "m.gguf", kind, pre), tmp_path / "out")


def test_a_file_that_is_not_gguf_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    write_gguf(tmp_path / "unused.gguf")  # the gguf package is there
    (tmp_path / "fake.gguf").write_text("not a gguf")
    with pytest.raises(UserError, match="not a readable GGUF file"):
        gguf_tokenizer.tokenizer_folder(str(tmp_path / "fake.gguf"))
    with pytest.raises(UserError, match="cannot read the GGUF file"):
        gguf_tokenizer.tokenizer_folder(str(tmp_path / "missing.gguf"))
