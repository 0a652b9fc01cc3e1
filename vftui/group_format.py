"""What a saved group line holds besides Atropos's own fields (stdlib only: every reader imports it)."""

from __future__ import annotations

from collections.abc import Sequence

MASKED = -100  # the Atropos mask of a token the trainer does not learn from (prompt, tool results)

META = "vftui"  # the key of vftui's own object (item, metrics, turns, times) in each group line


def trained_tokens(mask: Sequence[int]) -> int:
    """How many of a rollout's tokens the trainer learns from (the model's own words): one count in C."""
    return len(mask) - mask.count(MASKED)
