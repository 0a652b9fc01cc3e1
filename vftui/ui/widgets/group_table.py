"""The recent groups, one line each, drawn with Textual's line API.

A live run adds and drops a dozen groups a tick; a widget per row (or DataTable's row
bookkeeping) makes every tick cost the whole window. Here a tick only swaps the list the
table reads from, and a repaint renders just the rows on screen.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from vftui import stats
from vftui.events import GroupCollected

BLOCKS = "▁▂▃▄▅▆▇█"
COLOURS = ["red", "dark_orange", "yellow", "green_yellow", "green"]
HEADER = ("#", "item", "rewards", "mean", "std", "=", "T")
RIGHT_ALIGNED = (True, True, False, True, True, False, True)


def reward_cells(scores: list[float], low: float, high: float) -> Text:
    """Each rollout's reward as a block whose height and colour follow the window's range."""
    text = Text()
    span = (high - low) or 1.0
    for score in scores:
        level = min(1.0, max(0.0, (score - low) / span))
        text.append(BLOCKS[round(level * (len(BLOCKS) - 1))], style=COLOURS[round(level * (len(COLOURS) - 1))])
    return text


class GroupTable(ScrollView, can_focus=True):
    """Rows keyed by group index; follows the newest group while the cursor is on the last row."""

    BINDINGS = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "move(-10)", "page up", show=False),
        Binding("pagedown", "move(10)", "page down", show=False),
        Binding("home", "move(-1000000)", "first", show=False),
        Binding("end", "move(1000000)", "last", show=False),
    ]
    COMPONENT_CLASSES = {"group-table--header", "group-table--cursor"}
    DEFAULT_CSS = """
    GroupTable { overflow-x: hidden; scrollbar-gutter: stable; }
    GroupTable > .group-table--header { text-style: bold; color: $text-accent; }
    GroupTable > .group-table--cursor { background: $accent 40%; text-style: bold; }
    """

    class Highlighted(Message):
        """The cursor is on another group: the user moved it, or it follows the newest."""

        def __init__(self, by_user: bool) -> None:
            super().__init__()
            self.by_user = by_user

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: list[GroupCollected] = []
        self.cursor = 0
        self._low, self._high = 0.0, 1.0
        self._size_width = 1
        self._group_size = 1

    # -- data down ------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.groups)

    @property
    def following(self) -> bool:
        return self.cursor >= len(self.groups) - 1

    @property
    def selected(self) -> GroupCollected | None:
        return self.groups[self.cursor] if 0 <= self.cursor < len(self.groups) else None

    def sync(self, groups: list[GroupCollected], score_range: tuple[float, float]) -> None:
        """Show ``groups``; the cursor stays on its group, or on the newest while following."""
        before = self.selected
        follow = self.following
        self.groups = groups
        self._low, self._high = score_range
        self._group_size = max((len(g.scores) for g in groups), default=1)
        self._size_width = len(str(groups[-1].index)) if groups else 1
        self.virtual_size = Size(self.scrollable_content_region.width, len(groups) + 1)
        if follow or before is None:
            target = len(groups) - 1
        else:
            target = next((i for i, g in enumerate(groups) if g.index == before.index), 0)
        self.cursor = max(0, target)
        self._scroll_to_cursor()
        self.refresh()
        if self.selected is not before:
            self.post_message(self.Highlighted(by_user=False))

    # -- keys and mouse -------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        self._set_cursor(max(0, min(len(self.groups) - 1, self.cursor + step)))

    def on_click(self, event: Click) -> None:
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self.groups):
            self._set_cursor(row)

    def _set_cursor(self, row: int) -> None:
        before = self.selected
        self.cursor = row
        self._scroll_to_cursor()
        if self.selected is not before:
            self.refresh()
            self.post_message(self.Highlighted(by_user=True))

    def _scroll_to_cursor(self) -> None:
        rows_visible = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows_visible:
            self.scroll_to(y=self.cursor - rows_visible + 1, animate=False, immediate=True)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.groups) + 1)
        self._scroll_to_cursor()

    # -- rendering ------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip(self._row(HEADER), width, self.get_component_rich_style("group-table--header"))
        row = int(self.scroll_offset.y) + y - 1
        if row >= len(self.groups):
            return Strip.blank(width, self.rich_style)
        g = self.groups[row]
        cells = (
            str(g.index), str(g.item), reward_cells(g.scores, self._low, self._high),
            f"{stats.mean(g.scores):.3f}", f"{stats.population_std(g.scores):.3f}",
            Text("=", style="bold yellow") if g.identical else "", f"{g.temperature:.2f}",
        )
        style = self.get_component_rich_style("group-table--cursor") if row == self.cursor else self.rich_style
        return self._strip(self._row(cells), width, style)

    def _row(self, cells: tuple) -> Text:
        widths = (self._size_width, 4, max(7, self._group_size), 5, 5, 1, 4)
        text = Text()
        for cell, width, right in zip(cells, widths, RIGHT_ALIGNED, strict=True):
            cell = cell.copy() if isinstance(cell, Text) else Text(cell)
            cell.truncate(width)
            padding = " " * (width - cell.cell_len)
            if right:
                text.append(padding).append_text(cell)
            else:
                text.append_text(cell).append(padding)
            text.append(" ")
        return text

    def _strip(self, text: Text, width: int, style) -> Strip:
        segments = list(text.render(self.app.console))
        return Strip(segments).apply_style(style).crop_extend(0, width, style)

