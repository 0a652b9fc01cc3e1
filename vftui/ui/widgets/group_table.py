"""The recent groups, one line each, drawn with Textual's line API.

A live run adds and drops a dozen groups a tick; a widget per row (or DataTable's row
bookkeeping) makes every tick cost the whole window. Here a tick only swaps the sequence
the table reads from, and a repaint renders just the rows on screen. A viewed file's
sequence (``groupfile.GroupFile``) builds each row when it is drawn, so 200,000 rows cost
what the screen shows; it knows its own extent and where each row is.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest
from typing import Protocol, runtime_checkable

from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from vftui import stats
from vftui.events import GroupCollected
from vftui.ui.widgets.changed_lines import changed_span


@runtime_checkable
class FileRows(Protocol):
    """A file's rows (``groupfile.GroupFile``), numbered by position: it knows their largest figures."""

    max_item: int
    group_size: int


BLOCKS = "▁▂▃▄▅▆▇█"
COLOURS = ["red", "dark_orange", "yellow", "green_yellow", "green"]
HEADER = ("#", "item", "rewards", "mean", "std", "=", "T")
RIGHT_ALIGNED = (True, True, False, True, True, False, True)
MOVE = "move through groups"  # the help lists keys with the same words on one line
JUMP = "ten groups at a time, the first or the last"


def reward_cells(scores: list[float], low: float, high: float) -> Text:
    """Each rollout's reward as a block whose height and colour follow the window's range."""
    text = Text()
    span = (high - low) or 1.0
    for score in scores:
        level = min(1.0, max(0.0, (score - low) / span))
        text.append(
            BLOCKS[round(level * (len(BLOCKS) - 1))],
            style=COLOURS[round(level * (len(COLOURS) - 1))],
        )
    return text


class GroupTable(ScrollView, can_focus=True):
    """Rows keyed by group index; follows the newest group while the cursor is on the last row."""

    BINDINGS = [
        Binding("up", "move(-1)", "up", show=False, tooltip=MOVE),
        Binding("down", "move(1)", "down", show=False, tooltip=MOVE),
        Binding("pageup", "move(-10)", "page up", show=False, tooltip=JUMP),
        Binding("pagedown", "move(10)", "page down", show=False, tooltip=JUMP),
        Binding("home", "move(-1000000)", "first", show=False, tooltip=JUMP),
        Binding("end", "move(1000000)", "last", show=False, tooltip=JUMP),
    ]
    COMPONENT_CLASSES = {"group-table--header", "group-table--cursor", "group-table--previewed"}
    DEFAULT_CSS = """
    GroupTable { overflow-x: hidden; scrollbar-gutter: stable; }
    GroupTable > .group-table--header { text-style: bold; color: $text-accent; }
    GroupTable > .group-table--cursor { background: $accent 40%; text-style: bold; }
    GroupTable > .group-table--previewed { background: $accent 20%; text-style: underline; }
    """

    class Highlighted(Message):
        """The cursor is on another group: the user moved it, or it follows the newest."""

        def __init__(self, by_user: bool) -> None:
            super().__init__()
            self.by_user = by_user

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups: Sequence[GroupCollected] = []
        self.cursor = 0
        self.previewed: int | None = (
            None  # the group in the preview, marked where it is not the cursor's
        )
        self._low, self._high = 0.0, 1.0
        self._rows = 0
        self._size_width = 1
        self._item_width = 4
        self._group_size = 1
        # what each row showed ((group, cursor on it, previewed), its line), see _repaint
        self._drawn: tuple[tuple, list[tuple[tuple[GroupCollected, bool, bool], Strip]]] = ((), [])

    # -- data down ------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows as of the last ``sync``: a file being read grows in between."""
        return self._rows

    @property
    def following(self) -> bool:
        return self.cursor >= self.row_count - 1

    @property
    def selected(self) -> GroupCollected | None:
        return self.groups[self.cursor] if 0 <= self.cursor < self.row_count else None

    @property
    def _selected_index(self) -> int | None:
        """The selected group's number: a file's rows are new objects each time they are read."""
        selected = self.selected
        return selected.index if selected is not None else None

    def sync(self, groups: Sequence[GroupCollected], score_range: tuple[float, float]) -> None:
        """Show ``groups``; the cursor stays on its group, or on the newest while following."""
        before = self._selected_index
        follow = self.following
        self.groups, self._rows = groups, len(groups)
        self._low, self._high = score_range
        if isinstance(groups, FileRows):  # a file's rows, numbered by position
            max_item, self._group_size = groups.max_item, groups.group_size
            max_index = len(groups)
        else:  # a filter and an order put any number last: the largest shown sets the width
            max_item = max((g.item for g in groups), default=0)
            self._group_size = max((len(g.scores) for g in groups), default=1)
            max_index = max((g.index for g in groups), default=1)
        self._item_width = max(4, len(str(max_item)))
        self._size_width = len(str(max_index))
        self.virtual_size = Size(self.scrollable_content_region.width, len(groups) + 1)
        if follow or before is None:
            target = len(groups) - 1
        elif hasattr(groups, "position_of"):
            target = groups.position_of(before)
        else:
            target = next((i for i, g in enumerate(groups) if g.index == before), 0)
        self.cursor = max(0, target)
        self._scroll_to_cursor()
        self._repaint()
        if self._selected_index != before:
            self.post_message(self.Highlighted(by_user=False))

    # -- keys and mouse -------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        self._set_cursor(max(0, min(self.row_count - 1, self.cursor + step)))

    def on_click(self, event: Click) -> None:
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < self.row_count:
            self._set_cursor(row)

    def _set_cursor(self, row: int) -> None:
        before = self._selected_index
        self.cursor = row
        self._scroll_to_cursor()
        if self._selected_index != before:
            self._repaint()
            self.post_message(self.Highlighted(by_user=True))

    def _scroll_to_cursor(self) -> None:
        """Forced: right after the rows grow, the scrollbar that allows scrolling is not up yet."""
        rows_visible = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True, force=True)
        elif self.cursor >= top + rows_visible:
            self.scroll_to(
                y=self.cursor - rows_visible + 1, animate=False, immediate=True, force=True
            )

    def _repaint(self) -> None:
        """Mark as dirty only the cells of the rows whose group or cursor changed; all of them when the
        layout did.

        A row shows an immutable group, so the group and whether the cursor is on it say
        everything about it: a live group is the same object each time, a file's row an equal
        value (a file sorted or read again shows new rows). A paused run or a scrolled-back
        table then sends nothing, and a row that shows another group sends its changed cells,
        not the blank rest of the row (``changed_span``).
        """
        top = int(self.scroll_offset.y)
        bottom = min(self.row_count, top + max(0, self.size.height - 1))
        keys = [
            (self.groups[r], r == self.cursor, self.groups[r].index == self.previewed)
            for r in range(top, bottom)
        ]
        layout = (
            top,
            self.size,
            self._low,
            self._high,
            self._size_width,
            self._item_width,
            self._group_size,
        )
        drawn_layout, drawn_rows = self._drawn
        if layout != drawn_layout:
            self.refresh()
            drawn_rows = []
        rows = []
        for y, (old, key) in enumerate(zip_longest(drawn_rows, keys), start=1):  # 0: the header
            if key is None:  # fewer rows than before: this one is blank now
                self.refresh(Region(0, y, self.size.width, 1))
            elif old is not None and old[0] == key:
                rows.append(old)
            else:
                line = self.render_line(y)
                rows.append((key, line))
                span = changed_span(old[1], line) if old is not None else (0, self.size.width)
                if span and drawn_rows:
                    self.refresh(Region(span[0], y, span[1] - span[0], 1))
        self._drawn = (layout, rows)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count + 1)
        self._scroll_to_cursor()

    # -- rendering ------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip(
                self._row(HEADER), width, self.get_component_rich_style("group-table--header")
            )
        row = int(self.scroll_offset.y) + y - 1
        if row >= self.row_count:
            return Strip.blank(width, self.rich_style)
        g = self.groups[row]
        cells = (
            str(g.index),
            str(g.item),
            reward_cells(g.scores, self._low, self._high),
            f"{stats.mean(g.scores):.3f}",
            f"{stats.population_std(g.scores):.3f}",
            Text("=", style="bold yellow") if g.identical else "",
            f"{g.temperature:.2f}",
        )
        if row == self.cursor:
            style = self.get_component_rich_style("group-table--cursor")
        elif g.index == self.previewed:
            style = self.get_component_rich_style("group-table--previewed")
        else:
            style = self.rich_style
        return self._strip(self._row(cells), width, style)

    def _row(self, cells: tuple) -> Text:
        widths = (self._size_width, self._item_width, max(7, self._group_size), 5, 5, 1, 4)
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
