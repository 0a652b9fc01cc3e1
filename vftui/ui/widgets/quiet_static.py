"""A Static that repaints only when what it shows changed.

Panels are handed the model on every tick; most ticks change a few of them. Each
repaint costs GIL time the collector thread shares, so unchanged panels stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from rich.console import RenderableType
from textual.widgets import Static


class QuietStatic(Static):
    _shown: Hashable = None

    def show_if_changed(self, key: Hashable, render: Callable[[], RenderableType]) -> None:
        """Render and repaint (without a layout pass) only when ``key`` differs from last time."""
        if key != self._shown:
            self._shown = key
            self.update(render(), layout=False)
