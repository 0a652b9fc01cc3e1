"""An rl run's evals (``--eval-every``) as eval folders beside the run, each as ``--mode eval`` writes its
files, read by report, compare and runs as any eval; a resumed run adds its own and writes over none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import free_port, json_events, read_jsonl, run_cli
from vftui.run_files.files import RunFiles

GROUP_SIZE, EXAMPLES, K = 4, 4, 2


def rl_with_evals(tmp_path: Path, out: Path, *extra: str) -> list[dict]:
    """An rl run on the simulated endpoint with the sim trainer, an eval every 2 trainer steps; its reports."""
    args = [
        *("run", "--mode", "rl", "--no-ui", "--json", "--start-api"),
        *("--api-url", f"http://127.0.0.1:{free_port()}", "--group-size", str(GROUP_SIZE)),
        *("--eval-every", "2", "--num-examples", str(EXAMPLES), "--rollouts-per-example", str(K)),
        *extra,
    ]
    result = run_cli(args, tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    reports = [e for e in json_events(result.stdout) if e["event"] == "EvalReport"]
    assert reports, "an eval every 2 trainer steps"
    return reports


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.e2e
def test_each_rl_eval_is_an_eval_folder_that_report_compare_and_runs_read(tmp_path):
    out = tmp_path / "run" / "groups.jsonl"
    reports = rl_with_evals(tmp_path, out, "--steps", "8", "--out", str(out))
    evals = RunFiles(out).eval_dir
    folders = sorted(evals.iterdir())
    assert [f.name for f in folders] == [f"step_{r['step']:06d}" for r in reports]
    for folder, report in zip(folders, reports, strict=True):
        metadata = json.loads((folder / "metadata.json").read_text())
        assert metadata["trainer_step"] == report["step"] and metadata["env_id"]
        assert metadata["num_examples"] == EXAMPLES and metadata["rollouts_per_example"] == K
        assert metadata["avg_reward"] == pytest.approx(report["figures"]["reward"]["mean"])
        assert metadata["pass@1"] == pytest.approx(report["figures"]["pass@1"]["mean"])
        assert metadata["sampling_args"]["temperature"] == 1.0, "the eval's, with k > 1"
        rows = read_jsonl(folder / "results.jsonl")
        assert len(rows) == EXAMPLES * K and {r["example_id"] for r in rows} == {
            r["example_id"] for r in rows[::K]
        }
        assert all(r["completion"] and r["completion"][0]["role"] == "assistant" for r in rows)
        assert len(read_jsonl(folder / "items.jsonl")) == EXAMPLES
        assert len(read_jsonl(folder / "traces.jsonl")) == EXAMPLES * K
        atropos = json.loads((folder / "atropos" / "metrics.json").read_text())
        assert atropos["config_general"]["generation_parameters"]["temperature"] == 1.0
        assert atropos["results"]["all"]["eval/pass@1"] == pytest.approx(metadata["pass@1"])
    assert len(read_jsonl(out)) == 8, "the run's own file is its training groups"

    first, last = str(folders[0]), str(folders[-1])
    compared = run_cli(["compare", "--json", first, last], tmp_path)
    assert compared.returncode == 0, compared.stderr[-3000:]
    said = json.loads(compared.stdout)
    assert [source["items"] for source in said["sources"]] == [EXAMPLES, EXAMPLES], said
    assert {source["env_id"] for source in said["sources"]} == {"vftui/alphabet-sort"}
    assert len(said["changes"]) == 1, said

    page = tmp_path / "steps.html"
    reported = run_cli(["report", *map(str, folders), "-o", str(page)], tmp_path)
    assert reported.returncode == 0 and "Traceback" not in reported.stderr, reported.stderr
    assert page.is_file() and f"{folders[-1].name}" in page.read_text()

    listed = run_cli(["runs", "--json", str(tmp_path / "run")], tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    found = {Path(r["path"]).name: r for r in rows}
    assert {f.name for f in folders} <= set(found), rows
    assert all(found[f.name]["groups_done"] == EXAMPLES for f in folders), rows
    assert all(found[f.name]["mode"] == "eval" for f in folders), rows

    whole = run_cli(["report", str(evals), "-o", str(page)], tmp_path)
    assert whole.returncode == 2, whole.stderr
    assert f"holds {len(folders)} evals ({folders[0].name} ... {folders[-1].name})" in whole.stderr

    # a resume: its trainer counts from 0 again, so its evals take new names beside the first session's
    before = {f.name: contents(f) for f in folders}
    again = rl_with_evals(tmp_path, out, "--resume", str(out), "--steps", "16")
    after = sorted(evals.iterdir())
    assert {f.name: contents(f) for f in after if f.name in before} == before, "none written over"
    added = [f for f in after if f.name not in before]
    assert len(added) == len(again), [f.name for f in after]
    assert all((f / "metadata.json").is_file() for f in added)
