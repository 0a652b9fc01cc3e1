"""What the dashboard writes to its terminal: only what changed, no more often than a person reads it.

The app runs under Pilot with a terminal that keeps what Textual writes (a headless driver that
says it is not headless, so every frame is rendered); the test feeds the run's events and
ticks the app itself, so every count is of frames, never of time.
"""

from __future__ import annotations

import re
import threading

import pytest
from textual.drivers.headless_driver import HeadlessDriver

from vftui.events import GroupCollected, Mode, RunStarted, RunState, RunStatus
from vftui.ui.app import VftuiApp
from vftui.ui.inbox import Inbox
from vftui.ui.sources import Source

CLOCK = 1_796_000_000.0
CURSOR_TO = re.compile(r"\x1b\[(\d+);\d+H")


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


class FedRun(Source):
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
    scores = [((index * 7 + k * 3) % 10) / 10 for k in range(4)]
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


async def frame_rows(pilot, act) -> set[int]:
    """The screen rows (from 1) written to the terminal after ``act()``, once it has settled."""
    written = pilot.app._driver.written
    written.clear()
    act()
    await settled(pilot)
    return rows_written("".join(written))


def rows_written(data: str) -> set[int]:
    """The rows something is written on: each cursor move followed by text (a frame ends by parking the cursor)."""
    moves = list(CURSOR_TO.finditer(data))
    ends = [m.start() for m in moves[1:]] + [len(data)]
    return {int(m.group(1)) for m, end in zip(moves, ends, strict=True) if end > m.end()}


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
        rows = await frame_rows(pilot, lambda: app.action_cursor(-1))
        assert app.previewed.index == 29
        # the table's two rows, the preview's header and text: not the panels' borders, nor the rest
        changed = [app.table, app.query_one("#token-counts"), app.query_one("#token-text")]
        allowed = {
            y + 1 for widget in changed for y in range(widget.region.y, widget.region.bottom)
        }
        assert rows and rows <= allowed, (sorted(rows), sorted(allowed))
