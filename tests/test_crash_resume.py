"""Nothing lost: kill -9 leaves whole lines, Ctrl-C stops cleanly, --resume carries on."""

from __future__ import annotations

import json
import os
import signal

from tests.conftest import read_jsonl, run_cli, start_cli, wait_for_lines


def run_args(server, out, steps=40) -> list[str]:
    return ["run", "--no-ui", "--steps", str(steps), "--group-size", "4", "--base-url", server.base_url, "--out", str(out)]


def test_kill_9_leaves_whole_lines_and_resume_finishes_the_run(tmp_path, slow_sim):
    out = tmp_path / "run" / "groups.jsonl"
    proc = start_cli(run_args(slow_sim, out), tmp_path)
    wait_for_lines(out, 5, proc)
    proc.kill()
    proc.wait(timeout=30)
    data = out.read_bytes()
    assert data.endswith(b"\n")
    killed_at = [json.loads(line) for line in data.splitlines()]
    assert 5 <= len(killed_at) < 40

    result = run_cli(["run", "--no-ui", "--resume", str(out.parent)], tmp_path)
    assert result.returncode == 0, result.stderr
    groups = read_jsonl(out)
    assert len(groups) == 40
    assert groups[: len(killed_at)] == killed_at, "resume only appends"
    assert [g["vftui"]["item"] for g in groups] == list(range(40)), "no item skipped or collected twice"
    checkpoint = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert checkpoint["iter"] == 40 and checkpoint["groups"] == 40


def test_ctrl_c_stops_gracefully_with_files_flushed(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    proc = start_cli(run_args(slow_sim, out, steps=200), tmp_path)
    wait_for_lines(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "run stopped" in stderr
    groups = read_jsonl(out)
    checkpoint = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert checkpoint["groups"] == len(groups) < 200
    assert checkpoint["iter"] == groups[-1]["vftui"]["item"] + 1


def test_resume_repairs_a_torn_last_line(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    result = run_cli(run_args(slow_sim, out, steps=3), tmp_path)
    assert result.returncode == 0, result.stderr
    with out.open("ab") as f:
        f.write(b'{"tokens": [[1, 2')
    result = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "5"], tmp_path)
    assert result.returncode == 0, result.stderr
    groups = read_jsonl(out)
    assert [g["vftui"]["item"] for g in groups] == [0, 1, 2, 3, 4]
    assert os.path.getsize(out) == sum(len(json.dumps(g, separators=(",", ":"), ensure_ascii=False)) + 1 for g in groups)
