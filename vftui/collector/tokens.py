"""Turning a finished rollout into the token ids and masks a trainer consumes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

from vftui.collector.compat import ChatTemplateTokenizer


@dataclass(frozen=True)
class Tokenized:
    tokens: list[int]
    masks: list[int]
    stripped_end_of_turn: bool


def sft_tokens(
    tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], finish_reason: str | None
) -> Tokenized:
    """tokenize_for_trainer with the reference's arguments, plus the truncation fix.

    A completion cut off by ``max_tokens`` still gets the chat template's end-of-turn
    tokens appended; training on them would teach the model to stop mid-answer. For such
    rollouts the trailing special (and whitespace) tokens are removed.
    """
    out = tokenize_for_trainer(
        tokenizer,
        messages,
        include_messages=True,
        train_on_all_assistant_turns=True,
        finish_reason=finish_reason or "",
    )
    tokens, masks = list(out["tokens"]), list(out["masks"])
    stripped = False
    if finish_reason == "length":
        keep = end_of_turn_start(tokenizer, tokens)
        stripped = keep < len(tokens)
        tokens, masks = tokens[:keep], masks[:keep]
    return Tokenized(tokens, masks, stripped)


def end_of_turn_start(tokenizer: Any, tokens: list[int]) -> int:
    """Index where the trailing end-of-turn run (special tokens, then whitespace) begins."""
    special = set(tokenizer.all_special_ids)
    i = len(tokens)
    while i > 0 and tokens[i - 1] not in special and not tokenizer.decode([tokens[i - 1]]).strip():
        i -= 1
    if i == 0 or tokens[i - 1] not in special:
        return len(tokens)
    while i > 0 and tokens[i - 1] in special:
        i -= 1
    return i
