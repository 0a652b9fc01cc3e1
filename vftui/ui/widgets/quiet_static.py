"""A Static that repaints only when what it shows changed.

Panels are handed the model on every tick; most ticks change a few of them. Each panel
sets its ``figures`` reactive to the few values it shows, and Textual calls
``watch_figures`` only when they differ from last time: the text is built then, and
repainted without a layout pass (every panel has a fixed size).
"""

from __future__ import annotations

from collections.abc import Hashable

from rich.console import RenderableType
from textual.reactive import reactive
from textual.widgets import Static


class QuietStatic(Static):
    figures: reactive[Hashable] = reactive(None, init=False)

    def watch_figures(self, figures: Hashable) -> None:
        self.update(self.render_figures(figures), layout=False)

    def render_figures(self, figures: Hashable) -> RenderableType:
        raise NotImplementedError
