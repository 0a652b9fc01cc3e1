"""wandb (offline) gets the reference metric names and values; the API key goes nowhere."""

from __future__ import annotations

import json

import pytest

from tests.conftest import json_events, read_jsonl, run_cli, sim_admin
from tests.wandb_log import config, history
from vftui import stats

SECRET = "sk-vftui-test-secret-0123456789"


def test_wandb_offline_logs_the_reference_metrics(tmp_path):
    out = tmp_path / "run" / "groups.jsonl"
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "4",
            "--group-size",
            "4",
            "--wandb",
            "--wandb-project",
            "vftui-test",
            "--out",
            str(out),
        ],
        tmp_path,
        WANDB_MODE="offline",
    )
    assert result.returncode == 0, result.stderr
    (run_file,) = (out.parent / "wandb").glob("offline-run-*/run-*.wandb")
    rows = [row for row in history(run_file) if "metrics/mean_reward" in row]
    groups = read_jsonl(out)
    assert len(rows) == len(groups) == 4
    for row, group in zip(rows, groups, strict=True):
        scores = group["scores"]
        assert row["metrics/mean_reward"] == pytest.approx(stats.mean(scores))
        assert row["metrics/reward_std"] == pytest.approx(stats.population_std(scores))
        assert row["metrics/identical_score_rate"] == float(len(set(scores)) == 1)
        assert row["metrics/groups_total"] == 1
        assert row["metrics/avg_num_turns"] == pytest.approx(1.0)
        for name in ("sorted_correctly", "format_ok"):
            assert row[f"metrics/{name}"] == pytest.approx(
                stats.mean(group["vftui"]["metrics"][name])
            )
    assert config(run_file)["vf_env_name"] == "vftui/alphabet-sort"


def test_the_api_key_never_leaves_the_process(tmp_path, sim):
    out = tmp_path / "run" / "groups.jsonl"
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--verbose",
            "--steps",
            "3",
            "--group-size",
            "2",
            "--base-url",
            sim.base_url,
            "--wandb",
            "--out",
            str(out),
        ],
        tmp_path,
        OPENAI_API_KEY=SECRET,
        WANDB_MODE="offline",
    )
    assert result.returncode == 0, result.stderr
    assert json_events(result.stdout)
    assert SECRET not in result.stdout and SECRET not in result.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files) and any(
        p.name.endswith(".run.json") for p in files
    )
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), f"the key leaked into {path}"


@pytest.mark.parametrize(
    "fault", [{"status": 500, "count": 3}, {"status": 401, "count": -1}], ids=["retried", "fatal"]
)
def test_an_error_body_that_quotes_the_key_is_scrubbed_everywhere(tmp_path, sim, fault):
    """An endpoint that echoes the Authorization header back must not put the key on screen or in files."""
    sim_admin(
        sim,
        "/sim/faults",
        {**fault, "message": f"bad request; your header was Bearer {SECRET}, and sk-other12345678"},
    )
    out = tmp_path / "run" / "groups.jsonl"
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--base-url",
            sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
        OPENAI_API_KEY=SECRET,
    )
    assert result.returncode == (0 if fault["count"] > 0 else 1), result.stderr
    if fault["count"] > 0:
        troubles = [e for e in json_events(result.stdout) if e["event"] == "EndpointTrouble"]
        assert troubles and all(
            "your header was Bearer ***, and ***" in json.dumps(e) for e in troubles
        ), troubles
    for text in (
        result.stdout,
        result.stderr,
        *(p.read_text() for p in tmp_path.rglob("*") if p.is_file()),
    ):
        assert SECRET not in text and "sk-other12345678" not in text
