"""What a run says as it ends, in both views: an eval's figures, where its page and eval files are, and
the command that carries on a stopped run."""

from __future__ import annotations

import shlex
import signal

import pytest

from tests.conftest import (
    read_jsonl,
    run_cli,
    start_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    wait_for_lines,
    wait_for_screen,
)
from vftui.sim import task

pytestmark = pytest.mark.e2e
EVAL_FILES = "(atropos/, configs/, items.jsonl, metadata.json, results.jsonl, traces.jsonl)"


def test_a_plain_eval_of_the_builtin_takes_its_eval_split_and_says_where_its_files_are(tmp_path):
    out = tmp_path / "an eval $x.jsonl"
    result = run_cli(
        ["run", "--mode", "eval", "--no-ui", "--num-examples", "4", "--out", str(out)], tmp_path
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "no eval split of its own" not in result.stderr, "it has one, and evaluates it"
    eval_rows = task.make_examples(100, 3, 6, 1, task.EVAL_SEED_OFFSET)
    groups = read_jsonl(out)
    assert len(groups) == 4
    for g in groups:  # the eval split's examples, with no --env-args
        names = eval_rows[g["vftui"]["item"]]["info"]["batches"][0]
        assert all(name in g["messages"][0][-2]["content"] for name in names)
    (pass1,) = [line for line in result.stderr.splitlines() if line.strip().startswith("pass@1")]
    assert "± 0.000" not in pass1, pass1
    assert f"eval files: {out.with_suffix('.eval')}/ {EVAL_FILES}" in result.stderr
    assert f"page: {out.with_suffix('.html')}" in result.stderr


def test_ctrl_c_headless_says_the_resume_command_and_it_carries_on(tmp_path):
    out = tmp_path / "it's a run" / "groups.jsonl"
    steps = 40
    args = ["run", "--no-ui", "--steps", str(steps), "--sim-latency", "0.1", "--out", str(out)]
    proc = start_cli(args, tmp_path)
    wait_for_lines(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    suggested = f"vftui run --no-ui --resume {shlex.quote(str(out))}"
    assert suggested in stderr, stderr
    line = next(line for line in stderr.splitlines() if suggested in line)
    done = len(read_jsonl(out))
    assert f"collects the {steps - done} groups left" in line
    command = shlex.split(line.split("   ")[0].strip())
    assert command[:2] == ["vftui", "run"]
    resumed = run_cli([*command[1:], "--sim-latency", "0"], tmp_path)
    assert resumed.returncode == 0 and len(read_jsonl(out)) == steps, resumed.stderr


@pytest.mark.needs("tmux")
def test_quitting_an_eval_in_the_dashboard_prints_its_figures_its_files_and_how_to_resume(
    tmp_path,
):
    out = tmp_path / "eval.jsonl"
    command = (
        f"cd {shlex.quote(str(tmp_path))} && "
        + tmux_cli_command(
            tmp_path,
            # at 8 requests of 1 s at once, 200 rollouts take 25 s: the quit comes before the end even under load
            f"run --mode eval --num-examples 100 --rollouts-per-example 2 --sim-latency 1 --concurrency 8 "
            f"--out {shlex.quote(str(out))}",
        )
        + "; echo EXIT=$?; sleep 60"
    )
    with tmux_session(command, 160, 40) as session:
        wait_for_screen(session, "pass@2")
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "Stop it and quit?")
        tmux("send-keys", "-t", session, "y")
        screen = wait_for_screen(session, "EXIT=").replace("\n", "")
    assert "EXIT=130" in screen
    assert "items x 2 rollouts" in screen and "pass@1" in screen and "pass@2" in screen, screen
    # a line as long as the terminal is wide wraps, and the space at its last column is not captured
    unwrapped = "".join(screen.split())
    assert "".join(f"eval files: {out.with_suffix('.eval')}/ {EVAL_FILES}".split()) in unwrapped, (
        screen
    )
    assert "".join(f"vftui run --resume {out}".split()) in unwrapped, screen


def test_a_run_whose_every_rollout_hit_the_token_limit_says_so_at_its_end(tmp_path):
    """--max-tokens 1 cuts every rollout: the summary said nothing of it (a low of issue 42)."""
    out = tmp_path / "cut.jsonl"
    result = run_cli(
        ["run", "--no-ui", "--steps", "2", "--max-tokens", "1", "--out", str(out)], tmp_path
    )
    assert result.returncode == 0, result.stderr
    rollouts = sum(len(g["scores"]) for g in read_jsonl(out))
    assert (
        f"truncated: 100.0% of the rollouts kept ({rollouts} of {rollouts}) hit the token limit"
        in result.stderr
    )
    again = run_cli(
        ["run", "--no-ui", "--steps", "2", "--out", str(tmp_path / "whole.jsonl")], tmp_path
    )
    assert again.returncode == 0 and "truncated:" not in again.stderr, again.stderr
