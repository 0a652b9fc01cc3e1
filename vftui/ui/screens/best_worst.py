"""``b``: the selected group's best and worst rollouts side by side, to see what the reward rewards.

Both sides are the dashboard's own token preview (masks, logprobs, folding, the jump to the
completion), so they read as the preview does; the group stays as it was when the key was pressed.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Static

from vftui.events import GroupCollected
from vftui.ui.decode import TokenDecoder
from vftui.ui.widgets.token_preview import TokenPreview


def best_and_worst(scores: list[float]) -> tuple[int, int]:
    """The rollouts with the highest reward (the first of equals) and the lowest (the last of equals), so a
    group whose rollouts all scored the same still shows two of them."""
    best = max(range(len(scores)), key=scores.__getitem__)
    worst = min(reversed(range(len(scores))), key=scores.__getitem__)
    return best, worst


class BestWorstScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,b,q", "dismiss", "close"),
        Binding("f", "toggle_fold", "fold prompt"),
    ]

    def __init__(self, group: GroupCollected, decoder: TokenDecoder, fold: bool) -> None:
        super().__init__()
        self.group, self.decoder, self.fold = group, decoder, fold

    def compose(self):
        best, worst = best_and_worst(self.group.scores)
        spread = self.group.scores[best] - self.group.scores[worst]
        yield Static(
            f"[b]group {self.group.index}[/b] · item {self.group.item} · best vs worst rollout, "
            f"{spread:.3f} apart  (f folds the prompt; esc closes)",
            id="best-worst-title",
        )
        with Horizontal(id="best-worst"):
            for side, rollout in (("best", best), ("worst", worst)):
                preview = TokenPreview(id=f"{side}-rollout", classes="side-rollout")
                preview.border_title = f"{side}: rollout {rollout + 1}"
                yield preview

    def on_mount(self) -> None:
        for side, rollout in zip(("best", "worst"), best_and_worst(self.group.scores), strict=True):
            preview = self.query_one(f"#{side}-rollout", TokenPreview)
            preview.decoder, preview.fold, preview.group = self.decoder, self.fold, self.group
            preview.rollout = rollout

    def action_toggle_fold(self) -> None:
        self.fold = not self.fold
        for preview in self.query(TokenPreview):
            preview.fold = self.fold
