"""``vftui runs`` and ``vftui view`` say the same of a run: its state while it lives, the seconds it ran, and
the runs screen lists every run by its start with paths that tell them apart."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, ended_run, run_cli, screen_lines, until
from vftui.collector.controls import Controls
from vftui.collector.gate import GroupGate
from vftui.commands.view import viewer
from vftui.events import RunState, RunStatus
from vftui.figures.run_tally import RunTally
from vftui.live.server import RunServer
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.index import remember
from vftui.run_files.listing import COLUMNS, all_runs, describe, seconds_run
from vftui.run_files.lock import RunLock
from vftui.run_files.records import Checkpoint, read
from vftui.run_files.store import GroupWindow
from vftui.text.wording import clock
from vftui.ui.runs_app import RunsApp, short_path

GROUP = json.loads((REPO / "tests" / "data" / "groups.jsonl").read_text().splitlines()[0])
DAY = 86_400.0


def run_files(
    out: Path, started: list[float], checkpoint: dict, mode: str = "eval", created: float = 0.0
) -> RunFiles:
    """A run's files as vftui writes them: its settings, a group a start time (each 1 s long) and its
    checkpoint."""
    files = RunFiles(out)
    files.folder.mkdir(parents=True, exist_ok=True)
    files.run_json.write_text(
        json.dumps(
            {
                "config": {"env": "vftui/alphabet-sort", "mode": mode, "steps": len(started)},
                "model": "vftui-sim",
                "created": created or started[0] - 2,
            }
        )
    )
    lines = [
        json.dumps(
            {**GROUP, "vftui": {**GROUP["vftui"], "item": i, "started_at": at, "elapsed_s": 1.0}}
        )
        for i, at in enumerate(started)
    ]
    out.write_text("\n".join(lines) + "\n")
    files.checkpoint.write_text(json.dumps({"groups": len(started), **checkpoint}))
    return files


async def status_line(app, pilot) -> str:
    """The viewer's status, once it has read the whole file."""
    await until(lambda: app.model.summary is not None, pilot=pilot)
    await pilot.pause()
    return next(line for line in screen_lines(app) if " groups " in line)


async def test_a_resumed_runs_time_is_the_seconds_it_ran_in_runs_and_in_the_viewer(
    tmp_path, monkeypatch
):
    """Two sessions five minutes apart, 8 s of running between them: both say 0:00:08, not the 0:05:18 from
    the first group's start to the last one's end."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))  # as the CLI's (cli_env)
    t0 = 1_796_000_000.0
    out = tmp_path / "elsewhere" / "groups.jsonl"
    files = run_files(
        out,
        [t0, t0 + 2, t0 + 4, t0 + 310, t0 + 312, t0 + 317],
        {"elapsed_s": 8.0, "saved_at": t0 + 318, "state": "finished", "groups_done": 6},
    )
    remember(files)
    listed = [
        json.loads(line) for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()
    ]
    assert [(r["path"], r["duration_s"]) for r in listed] == [(str(out.resolve()), 8.0)]
    summary = GroupFile(out).read([].append, "")
    assert summary.elapsed_s == 8.0 and summary.state is RunState.FINISHED
    app, _ = viewer(out)
    async with app.run_test(size=(100, 24)) as pilot:
        status = await status_line(app, pilot)
    assert f"  {clock(8.0)}  " in status and "0:05:18" not in status, status
    assert "finished" in status, status


@pytest.fixture
def paused_run(tmp_path):
    """A run that lives (it holds its lock and answers on its socket) and is paused, 8 s into its running
    as its last checkpoint says."""
    now = time.time()
    out = tmp_path / "live" / "groups.jsonl"
    files = run_files(
        out,
        [now - 9 + i for i in range(3)],
        {"elapsed_s": 8.0, "saved_at": now - 1},
        mode="sft",
    )
    lock = RunLock(files).acquire("stop it first")
    ignore = [].append
    server = RunServer(4, RunTally())
    server.publish(RunStatus(RunState.PAUSED, 3, 10))
    controls = Controls(GroupGate(10, 3, ignore), 1.0, GroupWindow(4), files, ignore)
    server.listen(files.socket, controls, private=files.socket_is_private)
    try:
        yield out
    finally:
        server.close()
        lock.release()


async def test_viewing_a_paused_run_says_paused_never_finished(paused_run):
    """``v`` on a paused run in the runs screen: the viewer says what the run says of itself, as ``runs``."""
    assert describe(paused_run).state == "paused"
    summary = GroupFile(paused_run).read([].append, "")
    assert summary.state is RunState.PAUSED
    assert 8.0 <= summary.elapsed_s < 60, (
        "its checkpoint's seconds and those since: not since created"
    )
    app, _ = viewer(paused_run)
    async with app.run_test(size=(100, 24)) as pilot:
        status = await status_line(app, pilot)
    assert "paused" in status and "finished" not in status, status


def test_a_live_runs_time_counts_no_gap_between_its_sessions(tmp_path):
    """Resumed a day after it stopped and running since: its checkpoint's seconds and this session's, never
    the day between (the seconds since it was created)."""
    now = time.time()
    files = run_files(
        tmp_path / "r" / "groups.jsonl",
        [now - DAY - 30, now - DAY - 20],
        {"elapsed_s": 25.0, "saved_at": now - DAY - 15},
        mode="sft",
    )
    lock = RunLock(files).acquire("stop it first")  # this session: just begun
    os.utime(files.lock_path, (now - 5, now - 5))
    try:
        seconds = seconds_run(files, read(files.checkpoint, Checkpoint), now - DAY - 40, live=True)
    finally:
        lock.release()
    assert 30.0 <= seconds < 40.0, seconds


def test_runs_kept_anywhere_are_listed_by_their_start(tmp_path, monkeypatch):
    """A run kept elsewhere (``--out``) that started last comes first, as "sorted by started" says."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    home = tmp_path / "xdg-data" / "vftui" / "runs"
    old = ended_run(home / "old", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9)
    new = ended_run(home / "new", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + 20)
    between = ended_run(tmp_path / "bench" / "b", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + 10)
    latest = ended_run(tmp_path / "bench" / "c", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + 30)
    for run in (between, latest):
        remember(RunFiles(run))
    assert [r.out_path for r in all_runs()] == [p.resolve() for p in (latest, new, between, old)]


async def test_the_runs_screen_sorts_every_run_by_start_and_tells_their_paths_apart_at_80_columns(
    tmp_path, monkeypatch
):
    """Runs folders named as vftui names them (their time, then their env) and two kept elsewhere: at 80
    columns each path shows its own run folder (the start of a long one), never only ``…/groups.jsonl``."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    home = tmp_path / "xdg-data" / "vftui" / "runs"
    t0, env = 1_796_000_000.0, "vftui/alphabet-sort"
    made = [
        ended_run(home / "20261201-101500-vftui-alphabet-sort", env, "sft", 200, 200, 0.9, t0),
        ended_run(tmp_path / "bench" / "lr-1e-5", env, "sft", 2, 100, 0.5, t0 + 10),
        ended_run(home / "20261201-103000-vftui-alphabet-sort", env, "eval", 64, 0, 0.7, t0 + 20),
        ended_run(tmp_path / "bench" / "lr-3e-5", env, "sft", 2, 100, 0.5, t0 + 30),
    ]
    for run in made[1::2]:
        remember(RunFiles(run))
    app = RunsApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
    header = lines[1]
    paths = [line[header.index("PATH") :].strip() for line in lines[2:6]]
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "sorted by started" in lines[0] and "listed last" not in lines[0], lines[0]
    assert [line.out_path for line in app.lines] == [p.resolve() for p in made[::-1]]
    assert len(set(paths)) == 4 and all(p.endswith("/groups.jsonl") for p in paths), paths
    assert "lr-3e-5/" in paths[0] and "lr-1e-5/" in paths[2], paths
    assert "20261201-1030" in paths[1] and "20261201-1015" in paths[3], paths
    assert COLUMNS.index("PATH") == len(COLUMNS) - 1


@pytest.mark.unit
def test_a_shortened_path_fits_its_width_and_keeps_its_run_folder_while_it_can():
    path = "/tmp/vftui/xdg-data/vftui/runs/20261201-103000-vftui-alphabet-sort/groups.jsonl"
    for width in range(1, len(path) + 2):
        shown = short_path(path, width)
        assert len(shown) <= width or shown == path
        if width >= len("…/20261201-103000…/groups.jsonl"):
            assert "/20261201-103000" in shown and shown.endswith("/groups.jsonl"), shown
        elif width >= len("…/20261201-103000…/…"):
            assert shown.startswith("…/20261201-103000"), shown
    assert short_path("/tmp/a/b/my-run/groups.jsonl", 26) == "/tmp/…/my-run/groups.jsonl"
    assert short_path("~/x/y/my-run/groups.jsonl", 23) == "~/…/my-run/groups.jsonl"
