"""``--tokenizer model.gguf``: the tokenizer a llama.cpp server runs, rebuilt from the GGUF's own metadata.

A GGUF holds no ``tokenizer.json``, only llama.cpp's vocabulary, merges, token types, special ids and
chat template. atroposlib loads its tokenizer by name, so the file is turned once into a tokenizer
folder (``tokenizer.json`` and the template) in vftui's cache, and that folder is the run's tokenizer.
Only byte-level BPE vocabularies with a pre-tokenizer rebuilt here exactly are taken: a tokenizer that
splits text differently from the server would silently give the trainer other tokens than the model's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vftui.errors import UserError
from vftui.paths import cache_dir

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types: special tokens, and added plain ones


def is_gguf(name: str) -> bool:
    return name.lower().endswith(".gguf")


def tokenizer_folder(name: str) -> Path:
    """The cached tokenizer folder built from the GGUF file ``name`` (built on first use)."""
    path = Path(name).expanduser().resolve()
    try:
        stat = path.stat()
    except OSError as e:
        raise UserError(f"cannot read the GGUF file {name}: {e.strerror or e}") from e
    key = hashlib.sha256(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    folder = cache_dir() / "tokenizers" / f"{path.stem}-{key}"
    if not (folder / "tokenizer.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".building-"))
        try:
            build(path, building)
            os.replace(building, folder)  # another run may have built it meanwhile: same content
        except OSError:
            if not (folder / "tokenizer.json").is_file():
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return folder


def pre_tokenizer(name: str | None, path: Path) -> Any:
    """How llama.cpp splits text before BPE for the GGUF's ``tokenizer.ggml.pre``, as ``tokenizers`` does it."""
    from tokenizers import pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  # GPT-2's split
    if name in (None, "default", "gpt2"):
        return byte_level
    if name == "smollm":  # each digit alone, then GPT-2's split
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    raise UserError(
        f"vftui cannot rebuild the '{name}' pre-tokenizer of {path} exactly; pass the model's "
        "tokenizer folder or Hugging Face name with --tokenizer"
    )


def build(path: Path, folder: Path) -> None:
    """Write the transformers tokenizer that the GGUF at ``path`` describes into ``folder``."""
    try:
        from gguf import GGUFReader
    except ImportError as e:
        raise UserError(
            "a tokenizer from a GGUF file needs the gguf package: pip install 'vftui[real-model]'"
        ) from e
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    try:
        reader = GGUFReader(path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is not a readable GGUF file ({e})") from e

    def value(key: str, default: Any = None) -> Any:
        field = reader.get_field(key)
        return default if field is None else field.contents()

    kind = value("tokenizer.ggml.model")
    if kind != "gpt2":
        raise UserError(
            f"the tokenizer in {path} is '{kind}', not byte-level BPE ('gpt2'), the one kind vftui "
            "rebuilds from a GGUF; pass the model's tokenizer folder or name with --tokenizer"
        )
    tokens: list[str] = value("tokenizer.ggml.tokens")
    merges = [tuple(merge.split(" ", 1)) for merge in value("tokenizer.ggml.merges", [])]
    backend = Tokenizer(models.BPE({token: i for i, token in enumerate(tokens)}, merges))
    backend.pre_tokenizer = pre_tokenizer(value("tokenizer.ggml.pre"), path)
    backend.decoder = decoders.ByteLevel()
    types = value("tokenizer.ggml.token_type", [0] * len(tokens))  # none: plain tokens only
    backend.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, k in zip(tokens, types, strict=True)
            if k == CONTROL
        ]
    )
    backend.add_tokens(
        [
            AddedToken(t, normalized=False)
            for t, k in zip(tokens, types, strict=True)
            if k == USER_DEFINED
        ]
    )

    def special(key: str) -> str | None:
        index = value(f"tokenizer.ggml.{key}_token_id")
        return tokens[index] if index is not None else None

    bos = special("bos")
    if value("tokenizer.ggml.add_bos_token", False) and bos is not None:  # llama.cpp prepends it
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A",
            pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, value("tokenizer.ggml.bos_token_id"))],
        )
    PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=special("eos"),
        unk_token=special("unknown"),
        pad_token=special("padding"),
        chat_template=value("tokenizer.chat_template"),
    ).save_pretrained(str(folder))
