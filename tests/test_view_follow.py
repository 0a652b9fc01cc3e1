"""``vftui view --follow``: a file another process is still writing, shown as its lines arrive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import REPO, until
from vftui.events import RunState
from vftui.run_files.groupfile import FOLLOW_EVERY_S, FOLLOWING, GroupFile
from vftui.sim.server import TOKENIZER_DIR
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox

FIXTURE = REPO / "tests/data/groups.jsonl"
LINES = FIXTURE.read_bytes().splitlines(keepends=True)
ITEMS = [json.loads(line)["vftui"]["item"] for line in LINES]

# Another writer, as a headless run elsewhere would be: lines 3 to 8 of the fixture, with
# pauses; the 6th goes out in two halves, the second once the test writes a line to stdin.
# The sleeps pace the writer on purpose (lines that arrive over time, as a run's do); the test
# waits on what the app shows, never on them.
WRITER = """
import sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
half = len(lines[5]) // 2
with open(sys.argv[2], "ab", buffering=0) as f:
    for line in lines[2:4]:
        time.sleep(0.3)
        f.write(line)
    time.sleep(0.3)
    f.write(lines[4] + lines[5][:half])
    sys.stdin.readline()
    f.write(lines[5][half:])
    for line in lines[6:]:
        time.sleep(0.3)
        f.write(line)
"""


def following_app(path: Path) -> tuple[VftuiApp, threading.Event]:
    """The app as ``vftui view --follow`` makes it, and an event set once its worker has returned."""
    source, returned = (
        ViewedFile(Inbox(), GroupFile(path), str(TOKENIZER_DIR), follow=True),
        threading.Event(),
    )
    read = source.execute

    def execute(closed: threading.Event):
        try:
            return read(closed)
        finally:
            returned.set()

    source.execute = execute
    return VftuiApp(source), returned


def status(app: VftuiApp) -> str:
    return str(app.query_one("#status").render())


def items_on_disk(app: VftuiApp) -> list[int]:
    """Each row's group as read back from the file."""
    return [app.model.rows.group(row).item for row in app.model.rows]


async def test_follow_shows_each_whole_line_another_process_appends_and_ends_with_the_app(tmp_path):
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(LINES[:2]))
    app, returned = following_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            lambda: app.dashboard.table.row_count == 2 and FOLLOWING in status(app), pilot=pilot
        )
        assert (
            "running" in status(app) and "finished" not in status(app) and "g/s" not in status(app)
        )
        assert app.dashboard.check_action("toggle_pause", ()) is False, (
            "read-only: nothing to steer"
        )
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(FIXTURE), str(path)], stdin=subprocess.PIPE
        )
        try:
            await until(lambda: app.dashboard.table.row_count == 5, pilot=pilot)
            assert not path.read_bytes().endswith(b"\n"), (
                "the 6th line is half written, in the same write as the 5th"
            )
            assert app.model.rows.skipped == 0 and not [
                r for r in app.model.logs if "skipped" in r.message
            ]
            writer.stdin.write(b"finish the line\n")
            writer.stdin.flush()
            await until(lambda: app.dashboard.table.row_count == len(LINES), pilot=pilot)
        finally:
            writer.stdin.close()
            writer.wait(timeout=30)
        assert writer.returncode == 0
        assert items_on_disk(app) == ITEMS and app.model.rows.skipped == 0
        assert app.dashboard.table.selected.index == len(LINES), (
            "the cursor on the last row follows the newest group"
        )
        assert app.model.groups_done == app.model.groups_total == len(LINES)
        assert app.model.state is RunState.RUNNING and FOLLOWING in status(app)
        assert not returned.is_set()
        await pilot.press("q")
    try:
        assert returned.wait(FOLLOW_EVERY_S / 2), (
            "the worker stops when the app ends, without waiting out a look"
        )
    finally:
        app.closed.set()  # when it did not, the event loop's end would wait for it


async def test_a_followed_file_that_shrinks_or_is_replaced_is_read_again_from_the_start(tmp_path):
    path = tmp_path / "rewritten.jsonl"
    path.write_bytes(b"".join(LINES))
    app, returned = following_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            lambda: app.dashboard.table.row_count == len(LINES) and FOLLOWING in status(app),
            pilot=pilot,
        )
        path.write_bytes(b"".join(LINES[5:7]))  # truncated in place, other groups
        await until(
            lambda: app.dashboard.table.row_count == 2 and items_on_disk(app) == ITEMS[5:7],
            pilot=pilot,
        )
        assert any("shrank or was replaced: reading it again" in r.message for r in app.model.logs)
        replacement = tmp_path / "replacement.jsonl"
        replacement.write_bytes(
            b"".join(LINES[1:5])
        )  # longer than what was read: only its inode tells
        os.replace(replacement, path)
        await until(
            lambda: items_on_disk(app) == ITEMS[1:5] and app.dashboard.table.row_count == 4,
            pilot=pilot,
        )
        assert app.dashboard.selected_group().item == ITEMS[4], (
            "the table's rows are the new file's"
        )
        assert app.model.state is RunState.RUNNING and app.model.rows.skipped == 0
        assert not [r for r in app.model.logs if r.level == "ERROR"]
    try:
        assert returned.wait(FOLLOW_EVERY_S / 2)
    finally:
        app.closed.set()
    assert app.return_code in (None, 0)
