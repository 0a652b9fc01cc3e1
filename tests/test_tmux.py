"""End to end as a person sees it: the dashboard in a detached tmux session."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import uuid

import pytest

from tests.conftest import REPO, read_jsonl, tmux, tmux_cli_command, wait_for_screen, wait_until
from vftui.sim.server import BackgroundSimServer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


def test_dashboard_pause_temperature_dump_quit(tmp_path):
    sim = BackgroundSimServer(seed=0, latency_s=0.25).start()
    session = f"vftui-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "groups.jsonl"
    command = (
        f"cd {shlex.quote(str(tmp_path))} && "
        + tmux_cli_command(tmp_path, f"run --mode sft --steps 40 --group-size 4 --base-url {sim.base_url} "
                                     f"--out {shlex.quote(str(out))}")
        + "; echo EXIT=$?; sleep 60"
    )
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)
    try:
        screen = wait_for_screen(session, "running")
        assert "SIMULATION" in screen and "rewards" in screen and "identical scores" in screen
        wait_for_screen(session, "sorted_correct")  # groups have come: the reward functions' figures
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
        assert "EXIT=130" in screen and "run stopped" in screen and str(out) in screen.replace("\n", "")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        sim.stop()
    groups = read_jsonl(out)
    assert 0 < len(groups) < 40
    dumps = list(tmp_path.glob("dump-*.jsonl"))
    assert len(dumps) == 1 and read_jsonl(dumps[0]) == groups[: len(read_jsonl(dumps[0]))]


def test_v_opens_the_previewed_rollout_in_the_pager_and_comes_back(tmp_path):
    session = f"vftui-{uuid.uuid4().hex[:8]}"
    paged = tmp_path / "paged.txt"
    pager = shlex.quote(f"sh -c 'cat > {paged}'")
    viewed = shlex.quote(str(REPO / "tests" / "data" / "groups.jsonl"))
    command = f"export PAGER={pager} && " + tmux_cli_command(tmp_path, f"view {viewed}") + "; sleep 60"
    tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)
    try:
        wait_for_screen(session, "finished")
        wait_for_screen(session, "assistant")  # the preview is drawn: the key has a rollout to page
        tmux("send-keys", "-t", session, "v")
        try:
            wait_until(lambda: paged.exists() and "assistant" in paged.read_text(), "the pager got the rollout")
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen was:\n{tmux('capture-pane', '-p', '-t', session)}") from None
        wait_for_screen(session, "finished")  # the dashboard again
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
