"""The selected rollout as the trainer sees it: token boundaries, masks and logprobs."""

from __future__ import annotations

import math

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from vftui.events import GroupCollected
from vftui.ui.decode import TokenDecoder

SHADES = ("on grey15", "on grey23")
HEAT = ["red", "dark_orange", "yellow", "green_yellow", "green"]


def logprob_style(logprob: float) -> str:
    p = math.exp(min(0.0, logprob))
    return f"bold {HEAT[min(len(HEAT) - 1, int(p * len(HEAT)))]}"


def render_rollout(
    group: GroupCollected, rollout: int, decoder: TokenDecoder, show_ids: bool = False, limit: int = 4000
) -> tuple[Text, int, int]:
    """The preview text and the (trained, masked) token counts."""
    tokens, masks = group.tokens[rollout], group.masks[rollout]
    logprobs = group.logprobs[rollout] if group.logprobs else None
    trained = sum(1 for m in masks if m != -100)
    text = Text()
    for i, (token, mask) in enumerate(zip(tokens[:limit], masks[:limit], strict=False)):
        piece = decoder.piece(token).replace("\n", "↵\n")
        if show_ids:
            piece = f"{piece}·{token}"
        shade = SHADES[i % 2]
        if mask == -100:
            text.append(piece, style=f"dim {shade}")
        elif logprobs is not None:
            text.append(piece, style=f"{logprob_style(logprobs[i])} {shade}")
        else:
            text.append(piece, style=f"bold cyan {shade}")
    if len(tokens) > limit:
        text.append(f"\n… {len(tokens) - limit} more tokens", style="italic")
    return text, trained, len(tokens) - trained


class TokenPreview(VerticalScroll):
    """Shows ``group``'s rollout ``rollout``; the app sets both and calls ``refresh_preview``."""

    def compose(self):
        yield Static(id="token-counts")
        yield Static(id="token-text")

    def refresh_preview(self, group: GroupCollected | None, rollout: int, decoder: TokenDecoder, show_ids: bool) -> None:
        counts = self.query_one("#token-counts", Static)
        body = self.query_one("#token-text", Static)
        if group is None:
            counts.update("no group selected")
            body.update("")
            return
        rollout %= len(group.tokens)
        text, trained, masked = render_rollout(group, rollout, decoder, show_ids)
        header = Text()
        header.append(f"group {group.index} · rollout {rollout + 1}/{len(group.tokens)} · ", style="bold")
        header.append(f"reward {group.scores[rollout]:.3f} · ")
        header.append(f"trained {trained}", style="bold cyan").append(" · ")
        header.append(f"masked {masked}", style="dim").append(f" · total {trained + masked}")
        reason = group.finish_reasons[rollout] if rollout < len(group.finish_reasons) else None
        if reason:
            header.append(f" · {reason}")
        if not decoder.available:
            header.append(" · (no tokenizer: ids)", style="italic")
        counts.update(header)
        body.update(text)
