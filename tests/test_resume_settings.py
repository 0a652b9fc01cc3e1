"""A resumed run appends to its own jsonl: what a line means cannot change halfway through the file."""

from __future__ import annotations

import pytest

from tests.conftest import read_jsonl, run_cli


def first_run(sim, out, tmp_path, *extra: str):
    done = run_cli(["run", "--no-ui", "--steps", "2", "--group-size", "2", "--base-url", sim.base_url,
                    "--out", str(out), *extra], tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("flags", "says"), [
    (["--group-size", "4"], "the run was collected with --group-size 2, and its lines mean that; drop --group-size 4"),
    (["--env", "vftui/alphabet-sort-classic"], "collected with --env vftui/alphabet-sort"),
    (["--env-args", '{"max_turns": 1}'], 'collected with --env-args {"max_turns": 3}'),
    (["--mode", "eval"], "collected with --mode sft"),
    (["--tokenizer", "Qwen/Qwen2.5-0.5B-Instruct"], "collected with tokenizer"),
])
def test_a_setting_that_changes_what_a_line_means_is_refused_naming_it(sim, tmp_path, flags, says):
    out = tmp_path / "groups.jsonl"
    first_run(sim, out, tmp_path, "--env-args", '{"max_turns": 3}')
    before = out.read_bytes()
    done = run_cli(["run", "--no-ui", "--steps", "4", "--resume", str(out), *flags], tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert out.read_bytes() == before, "nothing appended"


def test_a_resume_may_change_how_groups_are_collected_and_each_group_says_how(sim, tmp_path):
    out = tmp_path / "groups.jsonl"
    first_run(sim, out, tmp_path)
    done = run_cli(["run", "--no-ui", "--steps", "4", "--resume", str(out), "--temperature", "0.5",
                    "--concurrency", "3", "--timeout", "30"], tmp_path)
    assert done.returncode == 0, done.stderr
    groups = read_jsonl(out)
    assert [g["generation_params"]["temperature"] for g in groups] == [1.0, 1.0, 0.5, 0.5]
    assert [g["vftui"]["collected_with"]["concurrency"] for g in groups][2:] == [3, 3]
    timeouts = [g["vftui"]["collected_with"]["timeout"] for g in groups]
    assert timeouts[0] != 30 and timeouts[2:] == [30, 30]
