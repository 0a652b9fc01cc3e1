"""A rollout as the pager shows it (``v``): the preview's header, then its text decoded span by span, each
span marked trained or masked, wrapped at the terminal's width between words.

The preview lays tokens out one by one to show their boundaries; a pager is for reading, so each span of
tokens the trainer learns from (or not) is decoded together, as the model wrote it.
"""

from __future__ import annotations

import itertools
import textwrap

from vftui.events import GroupCollected
from vftui.group_format import MASKED, trained_tokens
from vftui.ui.decode import TokenDecoder
from vftui.ui.widgets.token_preview import message_pieces, rollout_header


def pager_text(group: GroupCollected, rollout: int, decoder: TokenDecoder, width: int) -> str:
    """The rollout's text for a pager ``width`` cells wide; a word longer than a line keeps its own line."""
    tokens, masks = group.tokens[rollout], group.masks[rollout]
    trained = trained_tokens(masks) if tokens else 0
    header = rollout_header(group, rollout, trained, len(tokens) - trained, decoder).plain
    lines = wrapped(header, width)
    if not tokens and rollout < len(group.messages):
        text = "".join(text for text, _ in message_pieces(group.messages[rollout]))
        return "\n".join([*lines, mark("its messages", width), *wrapped(text, width), ""])
    at = 0
    for is_masked, span in itertools.groupby(masks[: len(tokens)], key=lambda m: m == MASKED):
        count = len(list(span))
        lines += [
            mark(f"{'masked' if is_masked else 'trained'} · {count} tokens", width),
            *wrapped(decoder.text(tokens[at : at + count]), width),
        ]
        at += count
    return "\n".join(lines) + "\n"


def mark(words: str, width: int) -> str:
    """A span's first line, ``── masked · 40 tokens ──`` across the page: masked spans (prompt, tool results) are
    not learned from, trained ones (the model's words) are; a pager's search finds each."""
    line = f"── {words} "
    return line + "─" * max(2, width - len(line))


def wrapped(text: str, width: int) -> list[str]:
    """``text``'s lines wrapped between words at ``width``; empty lines and indentation kept."""
    return [
        part
        for line in text.split("\n")
        for part in textwrap.wrap(
            line, max(8, width), break_long_words=False, break_on_hyphens=False, tabsize=4
        )
        or [""]
    ]
