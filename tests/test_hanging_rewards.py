"""A reward function that never returns fails its group, naming it, and every stop ends the run in bounded time."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.conftest import run_cli, start_cli, wait_until

pytestmark = pytest.mark.classic

HANGING_ENV = """
import asyncio
import os
import pathlib
import time

import verifiers as vf
from datasets import Dataset


def blocking(completion, info, **kwargs):
    if info["kind"] == "sleep":
        if os.environ.get("BLOCKING"):  # a path, touched as it starts to block
            pathlib.Path(os.environ["BLOCKING"]).touch()
        time.sleep(1e6)  # blocks the run's thread: no await
    if info["kind"] == "spin":
        while True:
            pass
    return 1.0


async def awaiting(completion, info, **kwargs):
    if info["kind"] == "await":
        await asyncio.sleep(1e6)
    return 1.0


def load_environment(kinds="ok sleep spin await ok"):
    rows = [{"question": "Sort these names alphabetically: Zoe, Ada", "answer": "", "info": {"kind": k}}
            for k in kinds.split()]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[blocking, awaiting]))
"""


@pytest.fixture
def hanging_env(tmp_path) -> str:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "hanging_env.py").write_text(HANGING_ENV)
    return os.pathsep.join([str(tmp_path / "envs"), os.environ.get("PYTHONPATH", "")])


def test_a_reward_that_blocks_spins_or_awaits_for_ever_fails_its_group_naming_it(
    tmp_path, sim, hanging_env
):
    started = time.monotonic()
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--env",
            "hanging-env",
            "--group-size",
            "2",
            "--steps",
            "5",
            "--score-timeout",
            "2",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / "g.jsonl"),
        ],
        tmp_path,
        PYTHONPATH=hanging_env,
    )
    assert time.monotonic() - started < 120
    assert done.returncode == 0, done.stderr
    events = map(json.loads, done.stdout.splitlines())
    dropped = {e["item"]: e["reason"] for e in events if e["event"] == "GroupDropped"}
    assert {item % 5 for item in dropped} == {1, 2, 3}, (
        "the three that hang, each time the dataset comes round"
    )
    assert "reward function 'blocking' failed: ScoringTimeout" in dropped[1]
    assert "reward function 'blocking' failed: ScoringTimeout" in dropped[2]
    assert (
        "reward function 'awaiting' failed: ScoringTimeout" in dropped[3]
        and "--score-timeout" in dropped[3]
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_a_reward_blocks_ends_the_run_within_the_limit(
    tmp_path, sim, hanging_env, sig
):
    process = start_cli(
        [
            "run",
            "--no-ui",
            "--env",
            "hanging-env",
            "--env-args",
            '{"kinds": "sleep sleep sleep"}',
            "--group-size",
            "1",
            "--steps",
            "3",
            "--score-timeout",
            "5",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / "g.jsonl"),
        ],
        tmp_path,
        PYTHONPATH=hanging_env,
        BLOCKING=str(tmp_path / "blocking"),
    )
    wait_until((tmp_path / "blocking").exists, "no reward began to block", timeout=120)
    asked = time.monotonic()
    process.send_signal(sig)
    try:
        process.communicate(timeout=30)
    finally:
        process.kill()
    assert time.monotonic() - asked < 20, "bounded by --score-timeout, not by the reward function"
    assert process.returncode in (1, 130)
