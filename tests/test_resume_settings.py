"""A run's lines keep one meaning: a resume cannot change it halfway through the file, nor can the clock."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import read_jsonl, run_cli, start_cli, wait_for_lines


def first_run(sim, out, tmp_path, *extra: str):
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--base-url",
            sim.base_url,
            "--out",
            str(out),
            *extra,
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--group-size", "4"],
            "the run was collected with --group-size 2, and its lines mean that; drop --group-size 4",
        ),
        (["--env", "vftui/alphabet-sort-classic"], "collected with --env vftui/alphabet-sort"),
        (["--env-args", '{"max_turns": 1}'], 'collected with --env-args {"max_turns": 3}'),
        (["--mode", "eval"], "collected with --mode sft"),
        (["--tokenizer", "Qwen/Qwen2.5-0.5B-Instruct"], "collected with tokenizer"),
        # it was dropped without a word, and the groups went on into the resumed run's file
        (["--out", "elsewhere.jsonl"], "--out cannot move it to elsewhere.jsonl: drop --out"),
    ],
)
def test_a_setting_that_changes_what_a_line_means_is_refused_naming_it(sim, tmp_path, flags, says):
    out = tmp_path / "groups.jsonl"
    first_run(sim, out, tmp_path, "--env-args", '{"max_turns": 3}')
    before = out.read_bytes()
    done = run_cli(["run", "--no-ui", "--steps", "4", "--resume", str(out), *flags], tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert out.read_bytes() == before, "nothing appended"
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_a_resume_may_change_how_groups_are_collected_and_each_group_says_how(sim, tmp_path):
    out = tmp_path / "groups.jsonl"
    first_run(sim, out, tmp_path)
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "4",
            "--resume",
            str(out),
            "--temperature",
            "0.5",
            "--concurrency",
            "3",
            "--timeout",
            "30",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    groups = read_jsonl(out)
    assert [g["generation_params"]["temperature"] for g in groups] == [1.0, 1.0, 0.5, 0.5]
    assert [g["vftui"]["collected_with"]["concurrency"] for g in groups][2:] == [3, 3]
    timeouts = [g["vftui"]["collected_with"]["timeout"] for g in groups]
    assert timeouts[0] != 30 and timeouts[2:] == [30, 30]


CLOCK_SET_BACK = """
import os, time
_real = time.time
def _set_back():  # an hour back once the test says so (a file it makes)
    return _real() - 3600 if os.path.exists({flag!r}) else _real()
time.time = _set_back
"""


def test_a_wall_clock_set_back_mid_run_makes_no_duration_or_rate_negative(tmp_path):
    """The wall clock goes back an hour mid-run (in every process of it): durations and rates come from a
    monotonic clock, the wall clock only stamps events."""
    shim, flag, out = tmp_path / "shim", tmp_path / "set-back", tmp_path / "groups.jsonl"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(CLOCK_SET_BACK.format(flag=str(flag)))
    process = start_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "120",
            "--group-size",
            "2",
            "--sim-latency",
            "0.3",
            "--out",
            str(out),
        ],
        tmp_path,
        PYTHONPATH=os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")]),
    )
    wait_for_lines(out, 20, process)
    flag.touch()
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr
    groups = read_jsonl(out)
    assert len(groups) == 120 and all(g["vftui"]["elapsed_s"] >= 0 for g in groups)
    assert groups[0]["vftui"]["started_at"] - groups[-1]["vftui"]["started_at"] > 3000, (
        "the clock went back"
    )
    rates = [float(r) for r in re.findall(r"(-?[\d.]+) groups/s", stderr)]
    assert rates and min(rates) >= 0, stderr[-2000:]
    took = re.search(r"run finished: 120/120 groups in (-?[\d.]+) s", stderr)
    assert took and 0 < float(took.group(1)) < 600, stderr[-2000:]
