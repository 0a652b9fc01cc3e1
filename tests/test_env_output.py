"""An environment's own output (print, bytes on descriptors 1 and 2, a subprocess's) never reaches vftui's
stdout or the terminal raw: it is kept in the run's collector log."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.classic

NOISY_ENV = """
import os
import subprocess

import verifiers as vf
from datasets import Dataset


def loud(completion, **kwargs):
    print("reward says hi \\x1b]52;c;cGF3bmVk\\x07")
    os.write(2, b"raw stderr \\x1b]0;title\\x07\\n")
    subprocess.run(["echo", "subprocess \\x1b[2J"], check=True)
    return 1.0


def load_environment():
    print("loading \\x1b]0;pwned\\x07")
    os.write(1, b"raw stdout\\n")
    rows = [{"question": "Sort these names alphabetically: Zoe, Ada", "answer": ""} for _ in range(3)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[loud]))
"""


def test_an_environments_output_goes_to_the_log_not_to_json_or_the_terminal(tmp_path, sim):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "noisy_env.py").write_text(NOISY_ENV)
    out = tmp_path / "groups.jsonl"
    paths = os.pathsep.join([str(tmp_path / "envs"), os.environ.get("PYTHONPATH", "")])
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--env",
            "noisy-env",
            "--group-size",
            "2",
            "--steps",
            "3",
            "--base-url",
            sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
        PYTHONPATH=paths,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(json.loads(line) for line in lines), "stdout is vftui's JSON alone"
    assert (
        "\x1b" not in done.stderr
        and "raw stderr" not in done.stderr
        and "reward says hi" not in done.stderr
    )
    log = out.with_suffix(".collector.log").read_text()
    for said in ("loading", "raw stdout", "reward says hi", "raw stderr", "subprocess"):
        assert said in log, f"{said!r} kept in the run's log"
