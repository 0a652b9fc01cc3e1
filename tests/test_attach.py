"""A run that outlives its terminal: the control socket, attach, detach, runs, the first frame."""

from __future__ import annotations

import json
import os
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.conftest import (
    cli_env,
    ended_run,
    free_port,
    read_jsonl,
    run_cli,
    start_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    until,
    wait_for_lines,
    wait_for_screen,
    wait_until,
)
from vftui import stats
from vftui.collector.controls import Controls
from vftui.collector.gate import GroupGate
from vftui.errors import UserError
from vftui.events import Health, RunState, RunStatus
from vftui.figures.run_tally import RunTally
from vftui.live.client import AttachedRun, ask_status, connect
from vftui.live.server import RunServer
from vftui.run_files.files import RunFiles
from vftui.run_files.index import remember
from vftui.run_files.listing import COLUMNS, cells, describe
from vftui.run_files.store import GroupWindow
from vftui.sim.server import BackgroundSimServer
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import AttachedTo
from vftui.ui.inbox import Inbox
from vftui.ui.runs_app import RunsApp
from vftui.ui.screens.confirm import ConfirmScreen

needs_tmux = pytest.mark.needs("tmux")


def headless(sim, out, steps=2000) -> list[str]:
    return [
        "run",
        "--no-ui",
        "--steps",
        str(steps),
        "--group-size",
        "2",
        "--concurrency",
        "4",
        "--base-url",
        sim.base_url,
        "--out",
        str(out),
    ]


def lines_in(path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


# -- the socket itself ------------------------------------------------------------------


def test_the_socket_is_its_owners_alone_and_another_uid_gets_nothing(tmp_path):
    """The peer check itself: a server that takes the caller for another user answers nothing."""
    path = tmp_path / "run.sock"
    ignore = [].append
    controls = Controls(
        GroupGate(10, 0, ignore), 1.0, GroupWindow(4), RunFiles(tmp_path / "groups.jsonl"), ignore
    )
    stranger = RunServer(4, RunTally(), uid=os.getuid() + 1)  # as if we were someone else
    stranger.publish(RunStatus(RunState.RUNNING, 3, 10))
    stranger.listen(path, controls)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert ask_status(path, timeout=5) is None, "refused: no status for another uid"
        try:
            conn = connect(path, "events")
        except UserError:
            pass  # hung up before our wish was sent: nothing read
        else:
            assert conn.poll(5)
            with pytest.raises((EOFError, ConnectionResetError)):  # hung up without a byte
                conn.recv()
    finally:
        stranger.close()
    ours = RunServer(4, RunTally())
    ours.publish(RunStatus(RunState.RUNNING, 3, 10))
    ours.listen(path, controls)
    try:
        info = ask_status(path)
        assert info is not None and (info.state, info.groups_done, info.groups_total) == (
            RunState.RUNNING,
            3,
            10,
        )
    finally:
        ours.close()
    assert not path.exists(), "removed when the run ends"


def test_a_socket_path_too_long_for_the_kernel_moves_to_a_private_folder(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "groups.jsonl"
    path = RunFiles(deep).socket
    assert (
        path == RunFiles(deep).socket
        and RunFiles(deep).socket_is_private
        and len(os.fsencode(path)) < 108
        and path.parent.name == f"vftui-{os.getuid()}"
    )
    with socket.socket(socket.AF_UNIX) as sock:  # it binds
        path.parent.mkdir(mode=0o700, exist_ok=True)
        sock.bind(str(path))
    path.unlink()


# -- attaching ----------------------------------------------------------------------------


async def test_two_dashboards_attach_to_a_headless_run_and_steer_it(tmp_path, slow_sim):
    out = tmp_path / "elsewhere" / "groups.jsonl"
    proc = start_cli(headless(slow_sim, out), tmp_path)
    try:
        wait_for_lines(out, 4, proc)
        first, second = Inbox(), Inbox()
        one = AttachedRun(RunFiles(out).socket, first.put).start()
        two = AttachedRun(RunFiles(out).socket, second.put).start()
        app = VftuiApp(AttachedTo(first, one))
        async with app.run_test(size=(100, 30)) as pilot:
            await until(
                lambda: app.model.groups_done >= 4 and app.model.run_started is not None,
                pilot=pilot,
            )
            assert app.model.run_metrics()["metrics/groups_total"] >= 4, (
                "the replay counts the groups before"
            )
            await pilot.press("space")
            await until(lambda: app.model.state is RunState.PAUSED, pilot=pilot)
            held = lines_in(out)
            wait_until(
                lambda: any(
                    isinstance(e, RunStatus) and e.state is RunState.PAUSED
                    for e in second.drain(10**6)
                ),
                "the other dashboard saw the pause",
            )
            await pilot.pause(1.5)
            assert lines_in(out) == held, "paused from the dashboard: the jsonl stops growing"
            await pilot.press("p")
            await until(lambda: lines_in(out) > held, pilot=pilot)
            await pilot.press("q")
            await until(lambda: app.screen.__class__.__name__ == "ConfirmScreen", pilot=pilot)
            await pilot.press("l")  # leave it running
            await until(lambda: not app.is_running, pilot=pilot)
        one.close()
        two.close()
        assert app.left_running and proc.poll() is None, "the run goes on"
        growing = lines_in(out)
        wait_until(
            lambda: lines_in(out) > growing + 2, "the run kept collecting after the dashboards left"
        )
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


@needs_tmux
def test_attach_in_a_terminal_pause_resume_detach_and_the_run_finishes_on_its_own(tmp_path):
    out = tmp_path / "groups.jsonl"
    steps = 150
    sim = BackgroundSimServer(
        seed=0, latency_s=0.2
    ).start()  # ~10 groups/s: still running when attached
    proc = start_cli(headless(sim, out, steps), tmp_path)
    try:
        wait_for_lines(out, 2, proc)
        attach = f"{tmux_cli_command(tmp_path, 'attach')}; echo EXIT=$?; sleep 60"
        with tmux_session(attach, 120, 40) as session:  # no RUN: the newest running one
            wait_for_screen(session, "running")
            tmux("send-keys", "-t", session, "space")
            wait_for_screen(session, "paused")
            held = lines_in(out)
            ticks: list[Health] = []
            watcher = AttachedRun(
                RunFiles(out).socket, lambda e: ticks.append(e) if isinstance(e, Health) else None
            ).start()
            try:  # two ticks of the run's own clock while paused, time for several groups at this speed: none may come
                wait_until(
                    lambda: len(ticks) >= 3, "the paused run's health ticks"
                )  # the replay's, then two new ones
            finally:
                watcher.close()
            assert lines_in(out) == held < steps
            tmux(
                "send-keys", "-t", session, "space"
            )  # the screen's log already says "running": the jsonl tells
            wait_until(lambda: lines_in(out) > held, "the resumed run collecting again")
            tmux("send-keys", "-t", session, "q")
            wait_for_screen(session, "leave it running")
            tmux("send-keys", "-t", session, "l")
            screen = wait_for_screen(session, "EXIT=")
            assert "EXIT=0" in screen and "the run goes on" in screen
            _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        sim.stop()
    assert proc.returncode == 0, stderr
    assert sorted(g["vftui"]["item"] for g in read_jsonl(out)) == list(range(steps)), (
        "finished on its own, whole"
    )


def test_attach_says_when_nothing_runs(tmp_path):
    result = run_cli(["attach"], tmp_path)
    assert result.returncode == 2 and "no vftui run is running" in result.stderr, result.stderr


def test_attach_to_a_run_that_ended_names_the_view_command_shell_quoted(tmp_path):
    out = tmp_path / "my runs" / "it's.jsonl"
    assert (
        run_cli(
            ["run", "--no-ui", "--steps", "1", "--group-size", "2", "--out", str(out)], tmp_path
        ).returncode
        == 0
    )
    result = run_cli(["attach", str(out)], tmp_path)
    assert (
        result.returncode == 2
        and f"; vftui view {shlex.quote(str(out))} shows what it collected" in result.stderr
    )


# -- detach and runs ----------------------------------------------------------------------


def test_detach_starts_a_run_that_outlives_its_command_and_runs_lists_it(tmp_path, slow_sim):
    out = (
        tmp_path / "it's my $HOME run" / "groups.jsonl"
    )  # the attach command printed must paste as it is
    started = run_cli(
        [
            "run",
            "--detach",
            "--steps",
            "40",
            "--group-size",
            "2",
            "--base-url",
            slow_sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert started.returncode == 0, started.stderr
    attach = next(line for line in started.stderr.splitlines() if "vftui attach" in line)
    assert shlex.split(attach)[:3] == ["vftui", "attach", str(out)], attach
    listed = run_cli(["runs"], tmp_path)
    assert listed.returncode == 0 and str(out) in listed.stdout
    row = next(line for line in listed.stdout.splitlines() if str(out) in line)
    assert row.split()[1] in ("running", "finished"), listed.stdout
    wait_until(
        lambda: "finished" in run_cli(["runs"], tmp_path).stdout,
        "the background run finished",
        timeout=120,
    )
    assert len(read_jsonl(out)) == 40
    assert not RunFiles(out).socket.exists() and not out.with_suffix(".lock").exists()
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert saved["state"] == "finished"


def test_a_detached_run_that_is_refused_says_why_here(tmp_path):
    result = run_cli(
        [
            "run",
            "--detach",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "g.jsonl"),
        ],
        tmp_path,
    )
    assert (
        result.returncode == 2
        and "ended before it was ready" in result.stderr
        and "127.0.0.1:9" in result.stderr
    )


def test_runs_tells_finished_stopped_and_killed_runs_apart(tmp_path, slow_sim):
    finished, stopped, killed = (tmp_path / name / "groups.jsonl" for name in "fsk")
    runs = [
        start_cli(headless(slow_sim, out, **steps), tmp_path)
        for out, steps in ((finished, {"steps": 3}), (stopped, {}), (killed, {}))
    ]
    assert runs[0].wait(timeout=120) == 0, runs[0].communicate()
    wait_for_lines(stopped, 2, runs[1])
    runs[1].terminate()
    runs[1].communicate(timeout=60)
    wait_for_lines(killed, 2, runs[2])
    runs[2].kill()
    runs[2].wait(timeout=30)
    rows = {
        line.split()[-1]: line.split()[1]
        for line in run_cli(["runs"], tmp_path).stdout.splitlines()[1:]
    }
    assert rows == {
        str(finished): "finished",
        str(stopped): "stopped",
        str(killed): "interrupted",
    }, rows


def test_runs_lists_a_stopped_eval_as_stopped_out_of_its_examples(tmp_path, slow_sim):
    out = tmp_path / "eval.jsonl"
    run = start_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--num-examples",
            "40",
            "--concurrency",
            "2",
            "--env-args",
            '{"split": "eval"}',
            "--base-url",
            slow_sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
    )
    wait_for_lines(out, 2, run)
    run.terminate()
    assert run.wait(timeout=60) == 130, run.communicate()
    (listed,) = [
        json.loads(line) for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()
    ]
    assert (listed["state"], listed["groups_total"]) == ("stopped", 40), listed
    assert listed["groups_done"] == lines_in(out), listed


# -- the first frame ----------------------------------------------------------------------


@needs_tmux
def test_the_first_frame_shows_the_preparation_before_the_run_is_ready(tmp_path):
    out = tmp_path / "groups.jsonl"
    run = tmux_cli_command(tmp_path, f"run --steps 3 --out {shlex.quote(str(out))}")
    with tmux_session(f"{run}; echo EXIT=$?; sleep 60") as session:
        screen = wait_for_screen(session, "starting")
        assert "running" not in screen and not RunFiles(out).socket.exists(), (
            "on screen before the run is prepared"
        )
        wait_for_screen(session, "loading the")  # its steps are shown as they come
        wait_for_screen(session, "finished")
        tmux("send-keys", "-t", session, "q")
        screen = wait_for_screen(session, "EXIT=")
        assert "EXIT=0" in screen
    assert len(read_jsonl(out)) == 3


@needs_tmux
def test_a_refused_setting_closes_the_dashboard_with_its_sentence(tmp_path):
    run = tmux_cli_command(tmp_path, "run --base-url http://127.0.0.1:9/v1")
    with tmux_session(f"{run}; echo EXIT=$?; sleep 60") as session:
        screen = wait_for_screen(session, "EXIT=")
    assert "EXIT=2" in screen and "vftui: error:" in screen and "Traceback" not in screen, screen


def test_detach_and_the_sim_trainer_start_the_same_from_a_folder_holding_a_vftui_folder(tmp_path):
    decoy = tmp_path / "vftui"  # the clone's parent folder holds one
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the folder named vftui was imported')\n")
    script = Path(sys.executable).parent / "vftui"  # as a user starts it: the installed command
    out = tmp_path / "bg" / "groups.jsonl"
    started = subprocess.run(
        [str(script), "run", "--detach", "--steps", "3", "--group-size", "2", "--out", str(out)],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert started.returncode == 0 and "Traceback" not in started.stderr, started.stderr
    wait_until(
        lambda: out.exists() and len(read_jsonl(out)) == 3, "the detached run's groups", timeout=120
    )
    rl = subprocess.run(
        [
            str(script),
            "run",
            "--mode",
            "rl",
            "--no-ui",
            "--start-api",
            "--api-url",
            f"http://127.0.0.1:{free_port()}",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--out",
            str(tmp_path / "rl.jsonl"),
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert rl.returncode == 0 and len(read_jsonl(tmp_path / "rl.jsonl")) == 2, rl.stderr[-3000:]


def test_runs_lists_ids_env_mode_model_reward_and_every_command_takes_an_id(tmp_path):
    elsewhere = tmp_path / "elsewhere.jsonl"
    assert (
        run_cli(
            ["run", "--no-ui", "--steps", "3", "--group-size", "2", "--out", str(elsewhere)],
            tmp_path,
        ).returncode
        == 0
    )
    assert (
        run_cli(["run", "--mode", "eval", "--no-ui", "--num-examples", "3"], tmp_path).returncode
        == 0
    )
    listed = [
        json.loads(line) for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()
    ]
    assert [r["mode"] for r in listed] == ["eval", "sft"], "newest first"
    ev, sft = listed
    assert (sft["env"], sft["model"], sft["groups_done"], sft["state"]) == (
        "vftui/alphabet-sort",
        "vftui-sim",
        3,
        "finished",
    )
    groups = read_jsonl(elsewhere)
    assert sft["mean_reward"] == pytest.approx(stats.mean([s for g in groups for s in g["scores"]]))
    table = run_cli(["runs"], tmp_path).stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "STATE", "STARTED", "TIME"] and table[1].startswith(
        ev["id"]
    )
    compared = run_cli(["compare", ev["id"], sft["id"], "--json"], tmp_path)
    assert compared.returncode == 0 and json.loads(compared.stdout)["sources"][1]["path"] == str(
        elsewhere
    )
    resumed = run_cli(["run", "--no-ui", "--resume", sft["id"], "--steps", "5"], tmp_path)
    assert resumed.returncode == 0 and len(read_jsonl(elsewhere)) == 5, resumed.stderr
    pruned = run_cli(["runs", "--prune", "--json"], tmp_path)
    assert "1 runs kept elsewhere forgotten" in pruned.stderr
    assert [json.loads(line)["id"] for line in pruned.stdout.splitlines()] == [ev["id"]], (
        "the default folder's stays"
    )
    assert elsewhere.exists(), "forgotten, not deleted"


def test_runs_kept_elsewhere_are_listed_by_their_start_too_and_a_closed_pipe_ends_quietly(
    tmp_path, monkeypatch
):
    """A bench's ``--out`` run, started between the user's own, is listed between them in ``runs`` and
    ``--json`` (newest first, wherever kept); ``runs --json | head`` of hundreds of runs ends as a pipe
    writer should."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))  # as the CLI's (cli_env)
    home = tmp_path / "xdg-data" / "vftui" / "runs"
    own = [
        ended_run(home / f"r{i}", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + i)
        for i in range(3)
    ]
    bench = ended_run(tmp_path / "bench" / "b", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + 1.5)
    remember(RunFiles(bench))
    listed = [
        json.loads(line)["path"]
        for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()
    ]
    assert listed == [str(p.resolve()) for p in [own[2], bench, own[1], own[0]]]
    table = run_cli(["runs", "--no-ui"], tmp_path).stdout.splitlines()
    assert table[2].endswith(str(bench.resolve())), table
    for i in range(300):
        ended_run(home / f"many{i}", "vftui/alphabet-sort", "sft", 2, 2, 0.5, 1e9 + 10 + i)
    process = start_cli(["runs", "--json"], tmp_path)
    assert json.loads(process.stdout.readline())["id"]
    process.stdout.close()  # head -1
    said = process.stderr.read()
    assert process.wait(timeout=120) == 141 and said == "", said


async def test_the_runs_screen_pauses_stops_and_opens_a_run(tmp_path, slow_sim, monkeypatch):
    monkeypatch.setenv(
        "XDG_DATA_HOME", str(tmp_path / "xdg-data")
    )  # where the CLI's runs keep their index
    out = tmp_path / "live" / "groups.jsonl"
    process = start_cli(headless(slow_sim, out), tmp_path)
    try:
        wait_for_lines(out, 2, process)
        app = RunsApp()
        async with app.run_test(size=(160, 20)) as pilot:
            assert app.selected == out.resolve() and "running" in str(
                app.query_one("#runs").get_row_at(0)
            )
            await pilot.press("p")
            # paused, not pausing: while its groups in flight finish, a pausing run still has a rate
            await until(pilot=pilot, predicate=lambda: describe(out.resolve()).state == "paused")
            assert cells(describe(out.resolve()))[COLUMNS.index("RATE")] == "0.00 g/s", (
                "a paused run's rate, as its dashboard says it"
            )
            await pilot.press("x")
            await until(pilot=pilot, predicate=lambda: isinstance(app.screen, ConfirmScreen))
            assert "Stop run" in str(app.screen.query(Static).first().render())
            await pilot.press("n")
            await pilot.pause(1.0)
            assert process.poll() is None, "n: the run goes on"
            await pilot.press("x", "y")
            assert process.wait(timeout=60) == 130, "stopped gracefully before the end"
            await pilot.press("v")
        assert app.return_value == ("view", out.resolve())
    finally:
        process.kill()
        process.communicate()
