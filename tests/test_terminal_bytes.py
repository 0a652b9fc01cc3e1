"""What the dashboard writes to its terminal: only what changed, no more often than a person reads it.

The app runs under Pilot with a terminal that keeps what Textual writes (a headless driver that
says it is not headless, so every frame is rendered); the test feeds the run's events and
ticks the app itself, so every count is of frames, never of time.
"""

from __future__ import annotations

import random
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from textual.drivers.headless_driver import HeadlessDriver
from textual.strip import Strip

from vftui.events import GroupCollected, Mode, RunStarted, RunState, RunStatus
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import Feed
from vftui.ui.inbox import Inbox
from vftui.ui.widgets.changed_lines import changed_span

CLOCK = 1_796_000_000.0
CURSOR_TO = re.compile(r"\x1b\[(\d+);(\d+)H")
STYLE = re.compile(r"\x1b\[[0-9;]*m")


class KeptTerminal(HeadlessDriver):
    """A terminal of the pane's size that keeps every write."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.written: list[str] = []

    @property
    def is_headless(self) -> bool:
        return False  # so the app renders its frames and writes them here

    def write(self, data: str) -> None:
        self.written.append(data)


class FedRun(Feed):
    """A live run whose events the test puts in the inbox itself."""

    def execute(self, closed: threading.Event) -> None:
        closed.wait()


def started() -> RunStarted:
    return RunStarted(
        mode=Mode.SFT,
        env="env",
        model="model",
        endpoint="http://127.0.0.1:1/v1",
        simulated=True,
        out_path="/runs/r1/groups.jsonl",
        groups_total=100_000,
        groups_done=0,
        group_size=4,
        temperature=1.0,
        reward_functions=["ok"],
    )


def group(index: int) -> GroupCollected:
    rng = random.Random(index)
    scores = [rng.choice((0.0, 0.25, 0.5, 1.0)) for _ in range(4)]
    tokens = [[(index * 31 + k * 17 + i) % 500 for i in range(120)] for k in range(4)]
    masks = [[-100] * 20 + t[20:] for t in tokens]
    return GroupCollected(
        index=index,
        item=index - 1,
        example_id=None,
        scores=scores,
        metrics={"ok": scores},
        turns=[1] * 4,
        tokens=tokens,
        masks=masks,
        messages=[[]] * 4,
        finish_reasons=["stop"] * 4,
        temperature=1.0,
        started_at=CLOCK - 5,
        elapsed_s=1.0,
    )


def fed_app() -> VftuiApp:
    app = VftuiApp(FedRun(Inbox()), clock=lambda: CLOCK)
    app.model.monotonic = lambda: (
        100.0
    )  # the header's clock stands still: a frame shows only the run's news
    app.driver_class = KeptTerminal
    return app


async def settled(pilot) -> None:
    """Every frame the last change asked for is written."""
    for _ in range(3):
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()


async def frame(pilot, act) -> list[tuple[int, int, str]]:
    """What is written after ``act()``, once it has settled: (row, column, text), both from 0, for each
    cursor move followed by text (a frame ends by parking the cursor), its styles left out."""
    written = pilot.app._driver.written
    written.clear()
    act()
    await settled(pilot)
    data = "".join(written)
    moves = list(CURSOR_TO.finditer(data))
    ends = [m.start() for m in moves[1:]] + [len(data)]
    pieces = (
        (int(m.group(1)) - 1, int(m.group(2)) - 1, STYLE.sub("", data[m.end() : end]))
        for m, end in zip(moves, ends, strict=True)
    )
    return [
        (row, column, text.rstrip("\r\n")) for row, column, text in pieces if text.strip("\r\n")
    ]


def collected(app: VftuiApp, first: int, count: int) -> None:
    """``count`` more groups, then the tick that shows them."""
    for index in range(first, first + count):
        app.inbox.put(group(index))
    app.tick()


def rows_of(*widgets) -> set[int]:
    return {y for widget in widgets for y in range(widget.region.y, widget.region.bottom)}


async def running(pilot, groups: int) -> None:
    app = pilot.app
    app.inbox.put(started())
    app.inbox.put(RunStatus(RunState.RUNNING, groups_done=0, groups_total=100_000))
    for index in range(1, groups + 1):
        app.inbox.put(group(index))
    app.tick()
    await settled(pilot)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_preview_showing_another_group_repaints_the_preview_not_the_screen(size):
    """The app's preview reactives repainted the whole screen each time the preview followed a new group
    (a full screen every two seconds while collecting)."""
    app = fed_app()
    async with app.run_test(headless=False, size=size) as pilot:
        await running(pilot, 30)
        written = await frame(pilot, lambda: app.dashboard.action_cursor(-1))
        assert app.dashboard.previewed.index == 29
        # the table's two rows, the preview's header and text: not the panels' borders, nor the rest
        allowed = rows_of(
            app.dashboard.table, app.query_one("#token-counts"), app.query_one("#token-text")
        )
        rows = {row for row, _, _ in written}
        assert rows and rows <= allowed, (sorted(rows), sorted(allowed))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_table_rows_that_show_newer_groups_repaint_their_figures_not_the_blank_rest(size):
    """Every row of a table that follows the newest group changes each tick; each was repainted to the
    table's edge (half of a row at 120 columns is blank), its scrollbar with it."""
    app = fed_app()
    async with app.run_test(headless=False, size=size) as pilot:
        await running(pilot, 300)
        for first in (301, 341):  # the first tick scrolls the full window into place
            written = await frame(pilot, lambda first=first: collected(app, first, 40))
        table = app.dashboard.table.region
        rows = [
            (row, column, text.rstrip("\r\n"))
            for row, column, text in written
            if table.y <= row < table.bottom and table.x <= column < table.right
        ]
        assert len({row for row, _, _ in rows}) == table.height - 1  # every row but the header
        for row, column, text in rows:
            assert not text.endswith("  "), (row, text)
            assert column + len(text) < table.right - 2, (row, text)  # 2: the scrollbar


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_header_clock_moving_repaints_up_to_the_clock_not_the_path_after_it(size):
    """A paused run's only news each second is its clock: the whole status line was sent for it."""
    app = fed_app()
    async with app.run_test(headless=False, size=size) as pilot:
        await running(pilot, 30)
        app.model.monotonic = lambda: 101.0

        written = await frame(pilot, app.tick)
        assert [(row, text.rstrip().endswith("0:00:01")) for row, _, text in written] == [(1, True)]
        assert (
            "groups.jsonl" in app.dashboard.status_bar.render().plain
        )  # shown, but not sent again


CELLS = st.lists(st.tuples(st.sampled_from("ab █▁→"), st.sampled_from([None, "bold", "red"])))


def strip_of(cells: list[tuple[str, str | None]]) -> Strip:
    return Strip([Segment(char, Style.parse(style) if style else None) for char, style in cells])


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(CELLS, CELLS)
def test_the_changed_span_holds_every_cell_that_differs(old, new):
    """Painting ``new``'s cells of the span over ``old`` gives ``new``; no span when they are the same."""
    span = changed_span(strip_of(old), strip_of(new))
    if span is None:
        assert old == new
        return
    start, end = span
    width = max(len(old), len(new))
    padded_old = old + [("", None)] * (width - len(old))
    padded_new = new + [("", None)] * (width - len(new))
    painted = padded_old[:start] + padded_new[start:end] + padded_old[end:]
    assert painted == padded_new
    assert padded_old[start] != padded_new[start] and padded_old[end - 1] != padded_new[end - 1]
