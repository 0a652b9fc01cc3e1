"""Token ids to display strings for the preview and the pager, with a cache (decoding is per token)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from vftui.text.printable import printable

SPLIT = "\ufffd"  # what a tokenizer gives for the bytes of a character cut across tokens
MAX_SPLIT = 4  # tokens: a character is at most 4 bytes of UTF-8, so at most 4 byte-level tokens


class TokenDecoder:
    """Wraps a Hugging Face tokenizer; without one, tokens show as their ids."""

    def __init__(self, tokenizer: Any | None = None, loading: bool = False) -> None:
        """``loading``: a stand-in while the tokenizer loads, so the preview says so rather than "no tokenizer"."""
        self._tokenizer = tokenizer
        self.loading = loading
        self.piece = functools.lru_cache(maxsize=65536)(self._piece)
        self._joined = functools.lru_cache(maxsize=4096)(self._decode)

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

    def _decode(self, tokens: tuple[int, ...]) -> str:
        return self.text(tokens)  # asked only with a tokenizer (``pieces``)

    def text(self, tokens: Sequence[int]) -> str:
        """The tokens decoded together, as the model wrote them (a split character whole); ids without a
        tokenizer."""
        if self._tokenizer is None:
            return "".join(map(self.piece, tokens))
        return printable(self._tokenizer.decode(list(tokens)))

    def pieces(self, tokens: Sequence[int]) -> list[tuple[int, str]]:
        """Each token's text, as (tokens it covers, text): a character cut across tokens is one piece of the
        fewest tokens that end where a character ends (each alone would be ``�``); a ``�`` nothing completes,
        or one the model wrote, stays one."""
        found: list[tuple[int, str]] = []
        i = 0
        while i < len(tokens):
            size, text = 1, self.piece(tokens[i])
            if SPLIT in text and self._tokenizer is not None:
                ends = (
                    n for n in range(1, MAX_SPLIT + 1) if self._ends_a_character(tokens, i, i + n)
                )
                size = next(ends, 1)
                text = self._joined(tuple(tokens[i : i + size]))
            found.append((size, text))
            i += size
        return found

    def _ends_a_character(self, tokens: Sequence[int], start: int, end: int) -> bool:
        """Whether ``tokens[start:end]`` ends between characters: decoded apart from the few tokens after it,
        the two give as many ``�`` as decoded together. A character cut there is completed when together
        (one ``�`` fewer); a ``�`` the model wrote, or bytes nothing completes, count the same either way."""
        if end >= len(tokens):
            return end == len(tokens)
        after = tuple(tokens[end : end + MAX_SPLIT - 1])
        apart = self._joined(tuple(tokens[start:end])).count(SPLIT) + self._joined(after).count(
            SPLIT
        )
        return self._joined(tuple(tokens[start:end]) + after).count(SPLIT) == apart
