"""`vftui run --mode eval`: the eval split, k rollouts an example, figures recomputed from the groups file,
vf-eval's files read back by verifiers' own loader, atroposlib's eval files, gates and a resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from verifiers.legacy.utils.save_utils import load_outputs, validate_resume_metadata

from tests.conftest import json_events, read_jsonl, run_cli
from vftui.events import EvalReport
from vftui.figures.eval_stats import ItemResult, estimate, pass_at
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.results import viewable
from vftui.sim import task


def run_eval(tmp_path: Path, *extra: str, out: Path | None = None) -> tuple[list[dict], Path]:
    out = out or tmp_path / "eval.jsonl"
    result = run_cli(
        ["run", "--mode", "eval", "--no-ui", "--json", "--out", str(out), *extra], tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json_events(result.stdout), out


def final_report(events: list[dict]) -> dict:
    reports = [e for e in events if e["event"] == "EvalReport"]
    assert reports and reports[-1]["final"] and not any(r["final"] for r in reports[:-1])
    return reports[-1]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "env",
    ["vftui/alphabet-sort", pytest.param("vftui/alphabet-sort-classic", marks=pytest.mark.classic)],
)
def test_eval_figures_agree_with_the_groups_and_the_files_read_as_vf_evals(
    tmp_path, env, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ["--env", env, "--num-examples", "12", "--rollouts-per-example", "4"]
    if env == "vftui/alphabet-sort":
        args += ["--env-args", '{"split": "eval"}']  # a v1 taskset picks its split in its config
    events, out = run_eval(tmp_path, *args)
    report = final_report(events)
    groups = read_jsonl(out)
    assert report["items"] == report["items_total"] == len(groups) == 12
    assert sorted(g["vftui"]["item"] for g in groups) == list(range(12)), (
        "each example once, from the start"
    )
    eval_rows = task.make_examples(100, 3, 6, 1, task.EVAL_SEED_OFFSET)
    for g in groups:  # the eval split's examples, not the training ones
        names = eval_rows[g["vftui"]["item"]]["info"]["batches"][0]
        assert all(name in g["messages"][0][-2]["content"] for name in names)
    items = [ItemResult(g["vftui"]["item"], tuple(g["scores"])) for g in groups]
    assert report["figures"]["reward"]["mean"] == pytest.approx(
        estimate([i.mean for i in items]).mean
    )
    for k in (1, 2, 4):
        expected = pass_at(items, k, 0.5)
        got = report["figures"][f"pass@{k}"]
        assert (got["mean"], got["ci_low"], got["ci_high"]) == pytest.approx(
            (expected.mean, expected.low, expected.high)
        )
    assert {"sorted_correctly", "format_ok"} <= set(report["functions"])
    assert groups[0]["generation_params"]["temperature"] == 1.0, "k > 1 samples at 1.0 by default"

    folder = out.with_suffix(".eval")
    rows = load_outputs(folder)  # verifiers' own reader
    assert len(rows) == 48 and {r["example_id"] for r in rows} == {
        g["vftui"]["example_id"] for g in groups
    }
    meta = json.loads((folder / "metadata.json").read_text())
    validate_resume_metadata(folder, env, "vftui-sim", 12, 4)  # vf-eval would resume it
    assert (
        meta["pass@1"]
        == meta["pass_at_k"]["1"]
        == pytest.approx(report["figures"]["pass@1"]["mean"])
    )
    assert meta["avg_reward"] == pytest.approx(sum(r["reward"] for r in rows) / len(rows))
    assert meta["intervals"]["pass@1"] == pytest.approx(
        [report["figures"]["pass@1"]["ci_low"], report["figures"]["pass@1"]["ci_high"]]
    )
    items = read_jsonl(folder / "items.jsonl")
    assert [i["mean"] for i in items] == sorted(i["mean"] for i in items), "hardest first"
    assert all(
        i["min"] == min(i["rewards"]) and i["max"] == max(i["rewards"]) and len(i["rewards"]) == 4
        for i in items
    )
    atropos = json.loads((folder / "atropos" / "metrics.json").read_text())
    assert atropos["results"]["all"]["eval/pass@1"] == pytest.approx(meta["pass@1"])
    assert len(read_jsonl(folder / "atropos" / "samples.jsonl")) == 48

    # vftui view opens the run's folder, the eval folder and atroposlib's samples, with the same figures
    assert viewable(out.parent) == out
    for opened in (folder, folder / "atropos"):
        events: list = []
        GroupFile(viewable(opened)).read(events.append, "")
        (final,) = [e for e in events if isinstance(e, EvalReport) and e.final]
        assert final.items == 12 and final.figures["pass@1"]["mean"] == pytest.approx(
            meta["pass@1"]
        )


@pytest.mark.e2e
def test_one_rollout_an_example_is_greedy_and_a_resume_extends_the_same_eval(tmp_path):
    events, out = run_eval(tmp_path, "--num-examples", "5")
    assert final_report(events)["items"] == 5
    assert {g["generation_params"]["temperature"] for g in read_jsonl(out)} == {0.0}, (
        "K=1: greedy by default"
    )
    assert not [e for e in events if e["event"] == "Alert" and e["name"] == "identical"], (
        "one rollout: no alarm"
    )
    events, _ = run_eval(tmp_path, "--resume", str(out), "--num-examples", "9", out=None)
    report = final_report(events)
    assert report["items"] == report["items_total"] == 9
    rows = load_outputs(out.with_suffix(".eval"))
    assert sorted(r["info"]["item"] for r in rows) == list(range(9)), (
        "the first five kept, four more, none twice"
    )
    again = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--json",
            "--resume",
            str(out),
            "--fail-on",
            "reward<5",
        ],
        tmp_path,
    )  # nothing left to collect: still the figures, the files and the gate
    assert again.returncode == 3 and "gate reward<5 tripped" in again.stderr, again.stderr
    assert final_report(json_events(again.stdout))["items"] == 9
    assert not re.search(r"(^|\s)-4\b", again.stderr), (
        "no negative count (a path's digits are no count)"
    )


@pytest.mark.e2e
def test_eval_gates_exit_3_with_a_sentence_and_bad_ones_are_refused(tmp_path):
    result = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--num-examples",
            "4",
            "--rollouts-per-example",
            "2",
            "--out",
            str(tmp_path / "a.jsonl"),
            "--fail-on",
            "reward<10",  # the simulated rewards are at most 1.2: it trips (pass@1<1.01 is refused now)
        ],
        tmp_path,
    )
    assert result.returncode == 3, result.stderr
    assert "gate reward<10 tripped: reward is" in result.stderr
    result = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--num-examples",
            "4",
            "--out",
            str(tmp_path / "b.jsonl"),
            "--fail-on",
            "reward>5,reward<-1",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    cut = run_cli(
        [
            *("run", "--mode", "eval", "--no-ui", "--num-examples", "100000"),
            *("--env-args", '{"num_eval_examples": 3}', "--out", str(tmp_path / "c.jsonl")),
        ],
        tmp_path,
    )
    assert cut.returncode == 0, cut.stderr
    assert "--num-examples 100000: vftui/alphabet-sort holds 3 examples" in cut.stderr, cut.stderr
    held = re.search(
        r"gates: reward>5 held \(reward ([\d.]+)\); reward<-1 held \(reward ([\d.]+)\)",
        result.stderr,
    )
    assert held, "a gate that held is said, with its value (it printed nothing)"
    for args, said in (
        (["--fail-on", "pass@1<0.5"], "is a gate over an eval's figures: use it with --mode eval"),
        (["--num-examples", "3"], "--num-examples is for --mode eval"),
        (
            ["--mode", "eval", "--rollouts-per-example", "2", "--fail-on", "pass@4<0.5"],
            "pass@k for k up to that",
        ),
        (["--mode", "eval", "--fail-on", "identical<0.5"], "cannot read 'identical<0.5'"),
    ):
        result = run_cli(["run", "--no-ui", *args], tmp_path)
        assert (
            result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr
        ), result.stderr
