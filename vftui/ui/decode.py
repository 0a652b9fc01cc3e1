"""Token ids to display strings for the preview, with a cache (decoding is per token)."""

from __future__ import annotations

import functools
from typing import Any

from vftui.text.printable import printable


class TokenDecoder:
    """Wraps a Hugging Face tokenizer; without one, tokens show as their ids."""

    def __init__(self, tokenizer: Any | None = None, loading: bool = False) -> None:
        """``loading``: a stand-in while the tokenizer loads, so the preview says so rather than "no tokenizer"."""
        self._tokenizer = tokenizer
        self.loading = loading
        self.piece = functools.lru_cache(maxsize=65536)(self._piece)

    @classmethod
    def load(cls, name: str) -> TokenDecoder:
        """Load a tokenizer by folder or cached name; never touches the network."""
        if not name:
            return cls()
        try:
            from transformers import AutoTokenizer

            return cls(AutoTokenizer.from_pretrained(name, local_files_only=True))
        except Exception:  # noqa: BLE001 - no tokenizer is a degraded preview, not an error
            return cls()

    @property
    def available(self) -> bool:
        return self._tokenizer is not None

    def _piece(self, token_id: int) -> str:
        if self._tokenizer is None:
            return f"<{token_id}>"
        return printable(self._tokenizer.decode([token_id]))
