"""Nothing lost: kill -9 leaves whole lines, Ctrl-C stops cleanly, --resume carries on."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.conftest import read_jsonl, run_cli, sim_admin, start_cli, wait_for_lines
from vftui.sim.server import BackgroundSimServer
from vftui.text.wording import counted


def run_args(server, out, steps=40) -> list[str]:
    return [
        "run",
        "--no-ui",
        "--steps",
        str(steps),
        "--group-size",
        "4",
        "--base-url",
        server.base_url,
        "--out",
        str(out),
    ]


@pytest.fixture
def busy_sim():
    """0.2 s a request at 16 requests in flight: five groups of four at once, about 20 groups/s."""
    server = BackgroundSimServer(seed=0, latency_s=0.2).start()
    try:
        yield server
    finally:
        server.stop()


def busy_args(server, out, steps=100) -> list[str]:
    return [*run_args(server, out, steps), "--concurrency", "16"]


def checkpoint_of(out):
    return json.loads(out.with_suffix(".checkpoint.json").read_text())


def kill_9_after(args: list[str], out, tmp_path, lines: int) -> list[dict]:
    """Start a run, kill -9 it once ``lines`` groups are written; the file must hold only whole lines."""
    proc = start_cli(args, tmp_path)
    wait_for_lines(out, lines, proc)
    proc.kill()
    proc.wait(timeout=30)
    data = out.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


def assert_resume_completes(out, tmp_path, before: list[dict], steps: int) -> None:
    """--resume appends the rest: every item once, the lines written before untouched."""
    lost = set(range(checkpoint_of(out)["iter"])) - {g["vftui"]["item"] for g in before}
    result = run_cli(["run", "--no-ui", "--resume", str(out.parent)], tmp_path)
    assert result.returncode == 0, result.stderr
    if lost:
        said = f"{counted(len(lost), 'item')} in flight when the run stopped: collecting them again first"
        assert said in result.stderr
    groups = read_jsonl(out)
    assert groups[: len(before)] == before, "resume only appends"
    items = [g["vftui"]["item"] for g in groups]
    assert sorted(items) == list(range(steps)), "no item skipped or collected twice"
    checkpoint = checkpoint_of(out)
    assert (
        checkpoint["groups"] == steps
        and checkpoint["done_below"] == steps
        and checkpoint["done_above"] == []
    )


def test_kill_9_with_groups_in_flight_loses_only_them(tmp_path, busy_sim):
    out = tmp_path / "run" / "groups.jsonl"
    killed_at = kill_9_after(busy_args(busy_sim, out), out, tmp_path, 12)
    assert 12 <= len(killed_at) < 100
    written = [g["vftui"]["item"] for g in killed_at]
    assert len(set(written)) == len(written)
    checkpoint = checkpoint_of(out)
    assert set(range(checkpoint["done_below"])) | set(checkpoint["done_above"]) <= set(written)
    assert_resume_completes(out, tmp_path, killed_at, 100)


@pytest.mark.parametrize("signals", [1, 2], ids=["once", "twice"])
def test_ctrl_c_finishes_the_groups_in_flight_and_twice_cancels_them(tmp_path, busy_sim, signals):
    out = tmp_path / "run" / "groups.jsonl"
    proc = start_cli(busy_args(busy_sim, out), tmp_path)
    wait_for_lines(out, 12, proc)
    for _ in range(signals):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)  # two separate presses, as a person makes them
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "run stopped" in stderr
    groups = read_jsonl(out)
    checkpoint = checkpoint_of(out)
    assert checkpoint["groups"] == len(groups) < 100
    items = sorted(g["vftui"]["item"] for g in groups)
    if signals == 1:
        assert "finishing" in stderr and "in flight" in stderr
        assert items == list(range(len(items))), "every group in flight was finished and kept"
        assert checkpoint["iter"] == checkpoint["done_below"] == len(items)
    else:
        assert checkpoint["iter"] > len(items), (
            "the groups in flight were cancelled, not waited for"
        )
    assert_resume_completes(out, tmp_path, groups, 100)


def test_kill_9_leaves_whole_lines_and_resume_finishes_the_run(tmp_path, slow_sim):
    out = tmp_path / "run" / "groups.jsonl"
    killed_at = kill_9_after(run_args(slow_sim, out), out, tmp_path, 5)
    assert 5 <= len(killed_at) < 40
    assert_resume_completes(out, tmp_path, killed_at, 40)


def test_resume_repairs_a_torn_last_line(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    result = run_cli(run_args(slow_sim, out, steps=3), tmp_path)
    assert result.returncode == 0, result.stderr
    with out.open("ab") as f:
        f.write(b'{"tokens": [[1, 2')
    result = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "5"], tmp_path)
    assert result.returncode == 0, result.stderr
    groups = read_jsonl(out)
    assert sorted(g["vftui"]["item"] for g in groups) == [0, 1, 2, 3, 4]
    assert os.path.getsize(out) == sum(
        len(json.dumps(g, separators=(",", ":"), ensure_ascii=False)) + 1 for g in groups
    )


def test_a_run_that_failed_on_endpoint_errors_resumes_without_a_gap(tmp_path, slow_sim):
    """The groups that failed were never written: resume collects them, none is skipped."""
    out = tmp_path / "run" / "groups.jsonl"
    proc = start_cli([*run_args(slow_sim, out, steps=30), "--retries", "1"], tmp_path)
    wait_for_lines(out, 3, proc)
    sim_admin(slow_sim, "/sim/faults", {"status": 500, "count": -1})
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "the endpoint failed 2 times in a row" in stderr, stderr
    assert f"vftui run --no-ui --resume {out}   collects the " in stderr, (
        "a failed run says how to go on"
    )
    failed_at = read_jsonl(out)
    assert len(failed_at) < 30
    sim_admin(slow_sim, "/sim/faults", {"count": 0})
    assert_resume_completes(out, tmp_path, failed_at, 30)
