"""Loading tokenizers from a folder, the Hugging Face cache, or the Hub — failing fast.

Offline, ``from_pretrained`` on a Hub name retries for most of a minute before failing,
and atroposlib loads the tokenizer again by name. So the Hub is checked once; with the
Hub unreachable, a cached tokenizer is used offline and a missing one is a clear error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from vftui.errors import UserError


def hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    from huggingface_hub import constants

    try:
        httpx.head(constants.ENDPOINT, timeout=timeout)
    except httpx.HTTPError:
        return False
    return True


def check_tokenizer(name: str) -> Any:
    """The tokenizer ``name``, loaded here to make sure it loads; may switch the process to
    offline (cached) mode."""
    from transformers import AutoTokenizer

    if Path(name).expanduser().is_dir():
        try:
            return AutoTokenizer.from_pretrained(str(Path(name).expanduser()))
        except Exception as e:  # transformers raises many kinds for a bad folder
            raise UserError(
                f"the folder {name} does not hold a loadable tokenizer ({type(e).__name__}); name "
                "one that does with --tokenizer"
            ) from e
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:  # noqa: BLE001 - not in the cache (or not a valid name)
        tokenizer = None
    if hub_reachable():
        if tokenizer is None:
            try:
                tokenizer = AutoTokenizer.from_pretrained(name)
            except Exception as e:
                raise UserError(
                    f"cannot load tokenizer '{name}' from the Hugging Face Hub ({type(e).__name__})"
                ) from e
        return tokenizer
    if tokenizer is None:
        raise UserError(
            f"cannot load tokenizer '{name}': it is not in the local cache and the Hugging Face Hub "
            "is unreachable; pass a tokenizer folder with --tokenizer"
        )
    os.environ["HF_HUB_OFFLINE"] = "1"
    return tokenizer
