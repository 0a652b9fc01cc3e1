"""Panels that repaint only the cells that changed.

Textual repaints a whole widget when its content changes; over a slow link a panel whose
one figure moves every tick would send every row again. ``ChangedLines`` keeps the rows
it last drew and marks dirty only the span of each row that differs (``changed_span``), so
Textual writes just those cells: a clock's last digit, not its line.
``FiguresPanel`` adds the usual pattern on top: a panel sets its ``figures`` reactive to
the few values it shows, and Textual calls ``watch_figures`` only when they differ.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Generic, TypeVar

from rich.cells import cell_len
from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget


def changed_span(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The cells ``[start, end)`` where two lines differ, or None; a line with a character wider than a cell
    differs whole (its characters are not its cells)."""
    if old.text == new.text and list(old) == list(new):
        return None
    if cell_len(old.text) != len(old.text) or cell_len(new.text) != len(new.text):
        return 0, max(old.cell_length, new.cell_length)
    a: list[tuple[str, Style | None] | None] = [(c, s.style) for s in old for c in s.text]
    b: list[tuple[str, Style | None] | None] = [(c, s.style) for s in new for c in s.text]
    width = max(len(a), len(b))
    a, b = a + [None] * (width - len(a)), b + [None] * (width - len(b))
    changed = [x for x in range(width) if a[x] != b[x]]
    return (changed[0], changed[-1] + 1) if changed else None


class ChangedLines(Widget):
    """Shows a Rich renderable, cropped to the widget's size; ``draw`` repaints the rows that differ."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._renderable: RenderableType = Text()
        self._lines: list[Strip] = []
        self._drawn_with: tuple[int, int, Style] | None = None

    def draw(self, renderable: RenderableType) -> None:
        self._renderable = renderable
        lines = self._render_lines()
        width = self.size.width
        if self._drawn_with != (width, self.size.height, self.rich_style):
            self.refresh()
        else:
            for y, (old, new) in enumerate(zip_longest(self._lines, lines)):
                if old is None or new is None:
                    self.refresh(Region(0, y, width, 1))
                elif span := changed_span(old, new):
                    self.refresh(Region(span[0], y, span[1] - span[0], 1))
        self._lines = lines
        self._drawn_with = (width, self.size.height, self.rich_style)

    def render(self) -> RenderableType:
        """What is shown (Textual draws it line by line with ``render_line``)."""
        return self._renderable

    def render_line(self, y: int) -> Strip:
        if self._drawn_with != (
            self.size.width,
            self.size.height,
            self.rich_style,
        ):  # resized or restyled
            self._lines = self._render_lines()
            self._drawn_with = (self.size.width, self.size.height, self.rich_style)
        return (
            self._lines[y]
            if y < len(self._lines)
            else Strip.blank(self.size.width, self.rich_style)
        )

    def _render_lines(self) -> list[Strip]:
        width, height = self.size
        if width <= 0 or height <= 0:
            return []
        console = self.app.console
        lines = console.render_lines(
            self._renderable, console.options.update_width(width), style=self.rich_style
        )
        return [
            Strip(line, width).crop_extend(0, width, self.rich_style) for line in lines[:height]
        ]


F = TypeVar("F")  # a panel's figures: what it shows, compared with ==


class FiguresPanel(ChangedLines, Generic[F]):
    figures: reactive[F | None] = reactive(
        None, init=False, repaint=False
    )  # draw() repaints what changed

    def watch_figures(self, figures: F) -> None:
        self.draw(self.render_figures(figures))

    def render_figures(self, figures: F) -> RenderableType:
        raise NotImplementedError
