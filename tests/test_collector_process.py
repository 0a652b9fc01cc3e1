"""The dashboard's collector process: refusals, a killed collector, a killed dashboard."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess

import pytest
from textual.widgets._toast import Toast

from tests.conftest import (
    pane_pid,
    read_jsonl,
    tmux_cli_command,
    tmux_session,
    until,
    wait_until,
)
from vftui.collector.child import child_main
from vftui.config import RunConfig
from vftui.errors import UserError
from vftui.events import RunState
from vftui.live.process import CollectorProcess
from vftui.live.wire import CollectorGone
from vftui.sim.server import BackgroundSimServer
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox


def test_a_refused_run_raises_its_sentence_in_the_parent(tmp_path):
    run = CollectorProcess(RunConfig(out=tmp_path), Inbox().put, target=child_main).start()
    with pytest.raises(UserError, match=r"is a folder; give a \.jsonl file path"):
        run.wait_summary()
    run.close()
    assert run.pid is not None and not _alive(run.pid), "the refused child is reaped"


async def test_a_killed_collector_shows_as_failed_and_the_app_stays_open(slow_sim, tmp_path):
    out = tmp_path / "groups.jsonl"
    inbox = Inbox()
    run = CollectorProcess(
        RunConfig(base_url=slow_sim.base_url, group_size=4, steps=400, out=out),
        inbox.put,
        target=child_main,
    )
    run.start()
    app = VftuiApp(StartedRun(inbox, run))
    try:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 2)
            os.kill(run.pid, signal.SIGKILL)  # as the OOM killer would
            await until(pilot=pilot, predicate=lambda: app.model.state is RunState.FAILED)
            status = str(app.query_one("#status").render())
            assert "failed" in status and "collector crashed" in status and "exit code -9" in status
            assert "collector crashed" in app.model.logs[-1].message, "the log panel says it too"
            with pytest.raises(CollectorGone):
                run.controls.dump()
            await pilot.press("d")
            await until(pilot=pilot, predicate=lambda: "dump failed" in _toasts(app), timeout=5)
            assert app.is_running, "a failed run stays open for reading"
            await pilot.press("q")  # no question once the run is over
            await until(pilot=pilot, predicate=lambda: not app.is_running, timeout=10)
    finally:
        run.close()
    assert len(read_jsonl(out)) >= 2, "every line written before the kill is whole"


@pytest.mark.needs("tmux")
def test_a_killed_dashboard_leaves_a_stopped_and_flushed_run(tmp_path):
    sim = BackgroundSimServer(seed=0, latency_s=0.05).start()
    out = tmp_path / "groups.jsonl"
    command = tmux_cli_command(
        tmp_path,
        f"run --steps 100000 --group-size 4 --base-url {sim.base_url} "
        f"--out {shlex.quote(str(out))}",
    )
    try:
        with tmux_session(command) as session:
            wait_until(
                lambda: out.exists() and len(read_jsonl(out)) >= 3,
                "the run did not start collecting",
            )
            dashboard = pane_pid(session)
            collector = _collector_of(dashboard)
            os.kill(dashboard, signal.SIGKILL)
            wait_until(
                lambda: not _alive(collector), "the collector kept running without its dashboard"
            )
    finally:
        sim.stop()
    groups = read_jsonl(out)
    checkpoint = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert out.read_bytes().endswith(b"\n")
    assert checkpoint["groups"] == len(groups)
    items = sorted(g["vftui"]["item"] for g in groups)
    assert items == list(range(len(groups))) and checkpoint["done_below"] == checkpoint[
        "iter"
    ] == len(groups), "the groups in flight were finished, none lost"


def _toasts(app: VftuiApp) -> str:
    return " ".join(str(toast.render()) for toast in app.query(Toast))


def _collector_of(dashboard: int) -> int:
    """The dashboard's child running the collector (spawned by multiprocessing)."""

    def found() -> list[int]:
        listing = subprocess.run(
            ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(dashboard)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return [
            int(line.split()[0])
            for line in listing.splitlines()
            if "spawn_main" in line and "resource_tracker" not in line
        ]

    return wait_until(found, f"no collector process under {dashboard}", 30)[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its dead parent's reaper) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[-1][0] != "Z"
