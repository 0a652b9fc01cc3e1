"""End to end as a person sees it: the dashboard in a detached tmux session."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    REPO,
    ended_run,
    hang_up,
    pane_pid,
    read_jsonl,
    run_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    wait_for_screen,
    wait_until,
)
from vftui.errors import UserError
from vftui.live.client import control
from vftui.run_files.files import RunFiles
from vftui.sim.server import BackgroundSimServer

pytestmark = pytest.mark.needs("tmux")


def test_dashboard_pause_temperature_dump_quit(tmp_path):
    sim = BackgroundSimServer(seed=0, latency_s=0.25).start()
    out = tmp_path / "groups.jsonl"
    command = (
        f"cd {shlex.quote(str(tmp_path))} && "
        + tmux_cli_command(
            tmp_path,
            f"run --mode sft --steps 40 --group-size 4 --base-url {sim.base_url} "
            f"--out {shlex.quote(str(out))}",
        )
        + "; echo EXIT=$?; sleep 60"
    )
    try:
        with tmux_session(command) as session:
            screen = wait_for_screen(session, "running")
            assert "SIMULATION" in screen and "rewards" in screen and "identical scores" in screen
            wait_for_screen(
                session, "sorted_correct"
            )  # groups have come: the reward functions' figures
            tmux("send-keys", "-t", session, "space")
            screen = wait_for_screen(session, "paused")
            tmux("send-keys", "-t", session, "+")
            screen = wait_for_screen(session, "T=1.10")
            tmux("send-keys", "-t", session, "d")
            screen = wait_for_screen(session, "dumped the groups in memory")
            tmux("send-keys", "-t", session, "q")
            wait_for_screen(session, "Stop it and quit?")
            tmux("send-keys", "-t", session, "y")
            screen = wait_for_screen(session, "EXIT=")
            assert (
                "EXIT=130" in screen
                and "run stopped" in screen
                and str(out) in screen.replace("\n", "")
            )
    finally:
        sim.stop()
    groups = read_jsonl(out)
    assert 0 < len(groups) < 40
    dumps = list(tmp_path.glob("dump-*.jsonl"))
    assert len(dumps) == 1 and read_jsonl(dumps[0]) == groups[: len(read_jsonl(dumps[0]))]


@contextlib.contextmanager
def view_with_a_pager(tmp_path: Path, width: int) -> Iterator[tuple[str, Path]]:
    """``vftui view`` of the test data in a tmux session ``width`` columns wide, its $PAGER writing
    what it is given to a file: the session and that file."""
    paged = tmp_path / "paged.txt"
    pager = shlex.quote(f"sh -c 'cat > {paged}'")
    viewed = shlex.quote(str(REPO / "tests" / "data" / "groups.jsonl"))
    command = (
        f"export PAGER={pager} && " + tmux_cli_command(tmp_path, f"view {viewed}") + "; sleep 60"
    )
    with tmux_session(command, width) as session:
        yield session, paged


def test_v_opens_the_previewed_rollout_in_the_pager_and_comes_back(tmp_path):
    with view_with_a_pager(tmp_path, width=100) as (session, paged):
        wait_for_screen(session, "finished")
        wait_for_screen(session, "assistant")  # the preview is drawn: the key has a rollout to page
        tmux("send-keys", "-t", session, "v")
        try:
            wait_until(
                lambda: paged.exists() and "assistant" in paged.read_text(),
                "the pager got the rollout",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}; the screen was:\n{tmux('capture-pane', '-p', '-t', session)}"
            ) from None
        wait_for_screen(session, "finished")  # the dashboard again


def test_v_as_the_view_opens_pages_words_with_a_header_wrapped_at_the_terminal(tmp_path):
    """``v`` the moment the preview shows (the tokenizer still loading): the pager gets the rollout's words, not
    token ids, under its header, with spans marked, each line within the 90 columns and no word cut."""
    with view_with_a_pager(tmp_path, width=90) as (session, paged):
        wait_for_screen(session, "rollout 1/4")
        tmux("send-keys", "-t", session, "v")
        wait_until(lambda: paged.exists() and "assistant" in paged.read_text(), "the pager ran")
    lines = paged.read_text().splitlines()
    assert lines[0].startswith("group ") and " · rollout 1/4 · reward " in lines[0], lines[:2]
    assert not re.search(r"<\d+>", paged.read_text()), "words, not token ids"
    assert [line.split(" · ")[0] for line in lines if line.startswith("── ")][:2] == [
        "── masked",
        "── trained",
    ]
    assert all(len(line) <= 90 for line in lines) and max(map(len, lines)) > 78
    assert "Sort names alphabetically" in " ".join(lines), "a sentence reads whole, across lines"


def test_ctrl_c_in_the_pager_is_the_pagers_and_the_run_goes_on(tmp_path):
    """Ctrl-C in ``less`` goes to the terminal's whole foreground group, the dashboard included: a pager that
    sends it so (``kill -INT 0``) must leave the dashboard and its run as they were."""
    paged, out = tmp_path / "paged.txt", tmp_path / "groups.jsonl"
    pager = shlex.quote(f"sh -c 'cat > {paged}; kill -INT 0'")
    run = tmux_cli_command(
        tmp_path, f"run --steps 1000 --sim-latency 0.2 --out {shlex.quote(str(out))}"
    )
    with tmux_session(f"export PAGER={pager} && {run}; echo EXIT=$?; sleep 60") as session:
        wait_until(
            lambda: out.exists() and out.read_bytes().count(b"\n") >= 2,
            "the run collected",
            timeout=120,
        )
        wait_for_screen(session, "assistant")
        tmux("send-keys", "-t", session, "v")
        wait_until(paged.exists, "the pager ran")
        wait_for_screen(session, "running")  # the dashboard is back, its run going
        before = out.read_bytes().count(b"\n")
        wait_until(
            lambda: out.read_bytes().count(b"\n") > before + 2, "the run went on after the pager"
        )
        assert "EXIT=" not in tmux("capture-pane", "-p", "-t", session)
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "Stop it and quit?")
        tmux("send-keys", "-t", session, "y")
        assert "EXIT=130" in wait_for_screen(session, "EXIT=")


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
def test_header_footer_and_help_fit_at_every_size(tmp_path, size):
    """A live run as a person sees it: the header keeps its counters and the run's path, the footer its keys,
    and the help scrolls to its last key."""
    width, height = size
    out = tmp_path / "a-run-folder-with-a-long-name-that-a-header-must-shorten" / "groups.jsonl"
    command = tmux_cli_command(
        tmp_path, f"run --steps 1000 --sim-latency 0.5 --out {shlex.quote(str(out))}"
    )
    with tmux_session(command + "; sleep 60", width, height) as session:
        wait_for_screen(session, "running ")
        lines = wait_until(
            lambda: (
                (shown := tmux("capture-pane", "-p", "-t", session).splitlines())[-1].strip()
                and shown
            ),
            "the footer is drawn",
        )
        header, state, footer = lines[0], lines[1], lines[-1]
        assert "alphabet-sort" in header and "SIMULATION" in header and "T=" in header, header
        assert (
            state.lstrip().startswith("running") and "/1000 groups" in state and "g/s" in state
        ), state
        whole_folder = f"…/{out.parent.name}/…"  # the run's id, where it fits whole
        assert state.rstrip().endswith(("groups.jsonl", whole_folder)), (
            f"the run's path, shortened from the left or to its run folder: {state!r}"
        )
        assert all(len(line) <= width for line in lines)
        for key in ("pause", "dump", "filter", "health", "help", "quit"):
            assert key in footer, f"{key!r} not in the footer at {width}x{height}: {footer!r}"
        tmux("send-keys", "-t", session, "?")
        wait_for_screen(session, "vftui keys")
        tmux("send-keys", "-t", session, "End")
        wait_for_screen(session, "command palette")
        tmux("send-keys", "-t", session, "Escape")
        wait_until(
            lambda: "vftui keys" not in tmux("capture-pane", "-p", "-t", session),
            "esc closes the help",
        )
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "Stop it and quit?")
        tmux("send-keys", "-t", session, "y")
        wait_for_screen(session, "run stopped")


def test_q_in_a_view_opened_from_the_runs_screen_comes_back_to_the_list(tmp_path):
    """As k9s: v opens the run, q there is the list again (on the same run), q on the list is the shell. A run
    deleted since the list was drawn is a sentence on the list."""
    home = tmp_path / "xdg-data" / "vftui" / "runs"
    runs = [
        ended_run(home / f"run-{i}", "vftui/alphabet-sort", "sft", 1, 2, 0.5, 1e9 + i)
        for i in range(2)
    ]
    shutil.copy(REPO / "tests" / "data" / "groups.jsonl", runs[0])
    command = tmux_cli_command(tmp_path, "runs") + "; echo EXIT=$?; sleep 60"
    with tmux_session(command, height=20) as session:
        wait_for_screen(session, "2 runs")
        tmux("send-keys", "-t", session, "Down", "v")
        wait_for_screen(session, "rollout 1/4")  # the viewer, on run-0 (the older, second row)
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "2 runs")
        shutil.rmtree(runs[0].parent)
        tmux("send-keys", "-t", session, "v")  # still on run-0, gone
        wait_for_screen(session, "no such file")  # the sentence, on the list
        assert "EXIT=" not in tmux("capture-pane", "-p", "-t", session)
        tmux("send-keys", "-t", session, "q")
        assert "EXIT=0" in wait_for_screen(session, "EXIT=")


SLOW_TRANSFORMERS = '''
import sys
import time


class SlowTransformers:
    """Importing transformers takes ten minutes: a tokenizer that is still loading when the user quits."""

    def find_spec(self, name, path=None, target=None):
        if name == "transformers":
            time.sleep(600)


sys.meta_path.insert(0, SlowTransformers())
'''


def test_q_closes_the_view_at_once_while_its_tokenizer_still_loads(tmp_path):
    """The CI's defect: a quit waited for the tokenizer's loading (asyncio's executor, which the app's exit
    joins), seconds of transformers' import under load."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_TRANSFORMERS)
    viewed = shlex.quote(str(REPO / "tests" / "data" / "groups.jsonl"))
    cli = tmux_cli_command(tmp_path, f"view {viewed}", PYTHONPATH=str(site))
    with tmux_session(f"{cli}; echo EXIT=$?; sleep 60") as session:
        wait_for_screen(session, "finished")
        tmux("send-keys", "-t", session, "q")
        screen = wait_for_screen(session, "EXIT=", timeout=60)
    assert "EXIT=0" in screen and "Traceback" not in screen, screen


def test_the_runs_screen_ends_with_its_terminal_after_attaching(tmp_path, slow_sim):
    """runs, Enter (attach), the terminal dies: the runs command was re-parented to init and spun at 40-60%
    CPU on the dead terminal for as long as nobody killed it. It ends; the run it attached to goes on."""
    out = tmp_path / "groups.jsonl"
    detached = ["run", "--detach", "--steps", "100000", "--group-size", "2", "--out", str(out)]
    started = run_cli([*detached, "--base-url", slow_sim.base_url], tmp_path)
    assert started.returncode == 0, started.stderr
    try:
        with tmux_session("exec " + tmux_cli_command(tmp_path, "runs")) as session:
            runs = pane_pid(session)  # exec'd: the pane's process is vftui runs itself
            wait_for_screen(session, "running")
            tmux("send-keys", "-t", session, "Enter")
            wait_for_screen(session, "ATTACHED")
            hang_up(session)  # SIGHUP, and the pty with it
            wait_until(
                lambda: not Path(f"/proc/{runs}").exists(), "vftui runs outlived its terminal", 30
            )
        listed = [
            json.loads(line) for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()
        ]
        assert [r["state"] for r in listed if r["path"] == str(out)] == ["running"], (
            "the run goes on"
        )
    finally:
        with contextlib.suppress(UserError):
            control(RunFiles(out).socket, lambda controls: controls.stop())
