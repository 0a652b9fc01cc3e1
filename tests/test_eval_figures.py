"""Eval, view and compare figures are what was measured (issue 29.3, 29.4, 29.6): an example whose reward
raises or is no number is an error of that example, never replaced by the next one; a resume collects
exactly what the file lacks, whatever the checkpoint claims; numbers of any magnitude are figures or
skipped rows, counted; a source with nothing readable is refused; names from files never drive the
terminal. Each through the real CLI (or the real reader and app), with a small environment of its own."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from tests.conftest import json_events, read_jsonl, run_cli, screen_lines
from vftui.commands.compare import load_all
from vftui.comparing.comparison import compare, summarize
from vftui.run_files.groupfile import GroupFile
from vftui.ui.compare_app import CompareApp

JUDGED_ENV = """
import math

import verifiers as vf
from datasets import Dataset

ODD = {"nan": math.nan, "str": "0.5", "none": None, "big": 1e308, "negbig": -1e308, "hugeint": 10**400}


def judged(completion, info, **kwargs):
    if info["kind"] == "raise":
        raise RuntimeError("cannot judge this one")
    return ODD.get(info["kind"], 1.0)


def load_environment(kinds="ok raise ok raise ok raise ok raise ok raise ok raise"):
    rows = [{"question": f"Sort these names alphabetically: Zoe, Ada ({n})", "answer": "", "info": {"kind": kind}}
            for n, kind in enumerate(kinds.split())]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows),
                            rubric=vf.Rubric(funcs=[judged]))
"""


def strict(text: str):
    """JSON as other tools read it: NaN or Infinity in it fails the test."""

    def refuse(name):
        raise AssertionError(f"{name} in {text[:200]}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def judged_env(tmp_path) -> str:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "judged_env.py").write_text(JUDGED_ENV)
    return os.pathsep.join([str(tmp_path / "envs"), os.environ.get("PYTHONPATH", "")])


def run_eval(tmp_path: Path, env_path: str, out: Path, *extra: str):
    return run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--json",
            "--env",
            "judged-env",
            "--rollouts-per-example",
            "2",
            "--out",
            str(out),
            *extra,
        ],
        tmp_path,
        PYTHONPATH=env_path,
    )


def final_report(stdout: str) -> dict:
    return [e for e in json_events(stdout) if e["event"] == "EvalReport" and e["final"]][-1]


def items_of(path: Path) -> list[int]:
    return sorted(g["vftui"]["item"] for g in read_jsonl(path))


@pytest.mark.classic
def test_an_example_whose_reward_raises_is_an_error_of_that_example_never_replaced(
    tmp_path, judged_env
):
    out = tmp_path / "eval.jsonl"
    result = run_eval(tmp_path, judged_env, out, "--num-examples", "6")
    assert result.returncode == 0, result.stderr
    assert items_of(out) == [0, 2, 4], (
        "the examples asked for, never 6, 8, 10 in the place of the failed ones"
    )
    report = final_report(result.stdout)
    assert (report["items"], report["errors"], report["items_total"]) == (3, 3, 6)
    assert "errors: 3 of the 6 examples done failed to score" in result.stderr
    meta = strict((out.with_suffix(".eval") / "metadata.json").read_text())
    assert meta["complete"] is False and meta["avg_error"] == 0.5 and meta["num_examples"] == 3
    assert [e["item"] for e in meta["errors"]] == [1, 3, 5]
    assert all(
        "reward function 'judged' failed: RuntimeError: cannot judge this one" in e["error"]
        for e in meta["errors"]
    )
    events: list = []
    GroupFile(out).read(events.append, "")
    assert [e for e in events if type(e).__name__ == "EvalReport"][-1].errors == 3, (
        "the view counts them too"
    )

    again = run_cli(
        ["run", "--no-ui", "--json", "--resume", str(out)], tmp_path, PYTHONPATH=judged_env
    )
    assert again.returncode == 0, again.stderr
    assert items_of(out) == [0, 2, 4], (
        "an error is done: a resume does not collect it again, nor another"
    )
    assert final_report(again.stdout)["errors"] == 3


@pytest.mark.classic
def test_a_reward_that_is_no_finite_number_is_an_error_and_huge_ones_never_crash(
    tmp_path, judged_env
):
    out = tmp_path / "eval.jsonl"
    kinds = "ok str none big negbig hugeint nan ok"
    result = run_eval(
        tmp_path,
        judged_env,
        out,
        "--num-examples",
        "8",
        "--retries",
        "9",
        "--env-args",
        json.dumps({"kinds": kinds}),
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert items_of(out) == [0, 7]
    report = final_report(result.stdout)
    assert (report["items"], report["errors"]) == (2, 6) and report["figures"]["reward"][
        "mean"
    ] == 1.0
    errors = {
        e["item"]: e["error"]
        for e in strict((out.with_suffix(".eval") / "metadata.json").read_text())["errors"]
    }
    assert errors[1].endswith("returned '0.5', not a number") and errors[2].endswith(
        "returned None, not a number"
    )
    assert errors[3].endswith("returned 1e+308, beyond ±1e+100")
    assert errors[4].endswith("returned -1e+308, beyond ±1e+100")
    assert "beyond ±1e+100" in errors[5] and errors[6].endswith("returned nan, not a finite number")
    for line in (out.with_suffix(".eval") / "results.jsonl").read_text().splitlines():
        assert strict(line)["reward"] == 1.0


@pytest.mark.classic
@pytest.mark.parametrize("gate", [[], ["--fail-on", "pass@1<0.5"]], ids=["no-gate", "gate"])
def test_an_eval_that_scored_no_example_fails(tmp_path, judged_env, gate):
    """It measured nothing: CI must not read exit 0 (or a gate's verdict) as a result; its files hold each error."""
    out = tmp_path / "eval.jsonl"
    result = run_eval(
        tmp_path,
        judged_env,
        out,
        "--num-examples",
        "3",
        "--env-args",
        '{"kinds": "raise raise raise"}',
        *gate,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "no example was scored: all 3 failed to score" in result.stderr
    assert final_report(result.stdout)["errors"] == 3
    meta = strict((out.with_suffix(".eval") / "metadata.json").read_text())
    assert [e["item"] for e in meta["errors"]] == [0, 1, 2] and meta["complete"] is False


def test_a_gate_on_a_pass_at_k_the_eval_does_not_report_is_refused(tmp_path):
    """pass@k is reported for the powers of two up to k and k itself: a gate on another k was never checked."""
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--mode",
            "eval",
            "--rollouts-per-example",
            "4",
            "--fail-on",
            "pass@3<0.5",
        ],
        tmp_path,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert (
        "--fail-on pass@3: an eval of 4 rollouts per example reports pass@1, pass@2, pass@4"
        in result.stderr
    )


@pytest.mark.classic
def test_compare_counts_an_evals_errors_that_are_in_none_of_its_figures(tmp_path, judged_env):
    clean, failing = tmp_path / "clean.jsonl", tmp_path / "failing.jsonl"
    assert (
        run_eval(
            tmp_path,
            judged_env,
            clean,
            "--num-examples",
            "6",
            "--env-args",
            '{"kinds": "ok ok ok ok ok ok"}',
        ).returncode
        == 0
    )
    assert (
        run_eval(tmp_path, judged_env, failing, "--num-examples", "6").returncode == 0
    )  # 1, 3, 5 raise
    for source in (
        failing,
        failing.with_suffix(".eval"),
    ):  # the run's groups and its vf-eval files alike
        result = run_cli(["compare", "--json", str(clean), str(source)], tmp_path)
        assert result.returncode == 0, result.stderr
        assert [s["errors"] for s in strict(result.stdout)["sources"]] == [0, 3]
        assert (
            "3 examples failed to score (errors): they are in none of its figures" in result.stderr
        )
        text = run_cli(["compare", "--no-ui", str(clean), str(source)], tmp_path).stdout
        assert re.search(r"errors +0 +3", text), text


def test_an_eval_resume_collects_exactly_the_missing_examples_of_its_range(tmp_path):
    out = tmp_path / "eval.jsonl"
    args = ["--env-args", '{"split": "eval"}', "--num-examples", "30"]
    first = run_cli(["run", "--mode", "eval", "--no-ui", "--out", str(out), *args], tmp_path)
    assert first.returncode == 0, first.stderr
    lines = sorted(
        out.read_text().splitlines(True), key=lambda line: json.loads(line)["vftui"]["item"]
    )
    out.write_text(
        "".join(lines[:7]) + lines[7][:40]
    )  # killed while item 7's line was being written
    checkpoint = out.with_suffix(".checkpoint.json")
    checkpoint.write_text(
        json.dumps(
            {**json.loads(checkpoint.read_text()), "done_below": 8, "done_above": [], "iter": 8}
        )
    )
    result = run_cli(["run", "--no-ui", "--json", "--resume", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cut a torn last line" in result.stderr
    assert "counts 1 item done that neither eval.jsonl nor its drop log holds" in result.stderr
    assert items_of(out) == list(range(30)), (
        "item 7 collected again, and nothing past the 30 asked for"
    )
    assert final_report(result.stdout)["items"] == 30


@pytest.mark.classic
def test_a_torn_last_drop_is_cut_before_a_resume_appends_to_the_drop_log(tmp_path, judged_env):
    out = tmp_path / "eval.jsonl"
    assert run_eval(tmp_path, judged_env, out, "--num-examples", "6").returncode == 0
    drops = out.with_suffix(".dropped.jsonl")
    lines = drops.read_text().splitlines(True)
    drops.write_text(
        "".join(lines[:-1]) + lines[-1][:30]
    )  # killed while its last drop was being written
    resumed = run_cli(
        ["run", "--no-ui", "--json", "--resume", str(out)], tmp_path, PYTHONPATH=judged_env
    )
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "cut a torn last line (30 bytes) from" in resumed.stderr
        and "eval.dropped.jsonl" in resumed.stderr
    )
    assert sorted(strict(line)["item"] for line in drops.read_text().splitlines()) == [1, 3, 5], (
        "every line whole"
    )
    again = run_cli(
        ["run", "--no-ui", "--json", "--resume", str(out)], tmp_path, PYTHONPATH=judged_env
    )
    assert again.returncode == 0, again.stderr
    assert "group of item" not in again.stderr, "each error recorded once: none collected again"
    assert final_report(again.stdout)["errors"] == 3 and items_of(out) == [0, 2, 4]


def test_an_eval_resumed_with_fewer_examples_than_it_holds_covers_all_it_holds(tmp_path):
    out = tmp_path / "eval.jsonl"
    first = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--out",
            str(out),
            "--env-args",
            '{"split": "eval"}',
            "--num-examples",
            "4",
        ],
        tmp_path,
    )
    assert first.returncode == 0, first.stderr
    wider = run_cli(["run", "--no-ui", "--resume", str(out), "--num-examples", "7"], tmp_path)
    assert wider.returncode == 0 and "run finished: 7/7 groups" in wider.stderr, wider.stderr
    for fewer in ([], ["--num-examples", "3"]):  # the run's own 4, or fewer still
        again = run_cli(["run", "--no-ui", "--json", "--resume", str(out), *fewer], tmp_path)
        assert again.returncode == 0, again.stderr
        report = final_report(again.stdout)
        assert (report["items"], report["items_total"], report["errors"]) == (7, 7, 0), report
        assert "this eval holds 7 examples, more than the" in again.stderr, again.stderr
        assert "run finished: 7/7 groups" in again.stderr and "eval: 7/7 items" in again.stderr
        meta = strict((out.with_suffix(".eval") / "metadata.json").read_text())
        assert (meta["num_examples"], meta["complete"]) == (7, True)
    assert items_of(out) == list(range(7))


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        (
            {"done_below": 400_000_000},
            "counts 399,999,996 items done that neither groups.jsonl nor its drop log holds",
        ),
        (
            {"iter": 400_000_000},
            "says items up to 400,000,000 were handed out, far past the 4 that groups.jsonl "
            "accounts for",
        ),
    ],
)
def test_a_checkpoint_claiming_more_than_the_file_holds_is_repaired_down(tmp_path, claim, said):
    out = tmp_path / "groups.jsonl"
    assert run_cli(["run", "--no-ui", "--steps", "4", "--out", str(out)], tmp_path).returncode == 0
    out.with_suffix(".checkpoint.json").write_text(json.dumps(claim))
    result = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "6"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert said in result.stderr and "run finished: 6/6 groups" in result.stderr
    assert items_of(out) == list(range(6)), (
        "the two items the file lacks, never items past the claim"
    )


def write_rows(path: Path, rewards: list, metric: str = "judge") -> Path:
    """vf-eval's results.jsonl, one row an example, each reward written as JSON has it (Python's ints whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "example_id": n,
            "reward": r,
            "metrics": {metric: r},
            "prompt": [{"role": "user", "content": "sort"}],
            "completion": [{"role": "assistant", "content": f"answer {n}"}],
        }
        for n, r in enumerate(rewards)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_gate_refuses_a_source_with_nothing_readable(tmp_path):
    good = write_rows(tmp_path / "a" / "results.jsonl", [1.0, 0.0, 1.0, 0.5])
    unreadable = write_rows(tmp_path / "c" / "results.jsonl", [math.nan] * 4)
    for sources in ([good, unreadable], [unreadable, good]):
        result = run_cli(
            ["compare", "--fail-if-worse", "0.02", "--json", *map(str, sources)], tmp_path
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"{unreadable}: no result compare can read in it (4 lines skipped" in result.stderr
        assert result.stdout == ""


def test_numbers_of_any_magnitude_are_figures_or_skipped_rows_in_compare_and_view(tmp_path):
    base = write_rows(tmp_path / "a" / "results.jsonl", [1.0, 0.0, 1.0, 0.5, 0.25, 1.0])
    wild = write_rows(tmp_path / "b" / "results.jsonl", [1e308, -1e308, 1e100, -1e100, 0.5, 1e99])
    with wild.open("a") as f:  # a 401-digit int, a bool, a string: JSON's own, no reward
        for n, reward in ((6, "1" + "0" * 400), (7, "true"), (8, '"0.5"'), (9, "null")):
            f.write(
                f'{{"example_id": {n}, "reward": {reward}, "metrics": {{"judge": {reward}}}}}\n'
            )
    result = run_cli(["compare", "--json", str(base), str(wild)], tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    report = strict(result.stdout)
    assert [s["items"] for s in report["sources"]] == [6, 4] and report["sources"][1][
        "skipped_lines"
    ] == 6
    assert f"{wild}: 6 lines skipped" in result.stderr
    assert (
        report["changes"][0]["paired"] == 4
        and report["sources"][1]["reward"]["ci_high"] is not None
    )

    text = run_cli(["compare", "--no-ui", str(base), str(wild)], tmp_path)
    assert text.returncode == 0 and "1.000e+100" in text.stdout, text.stderr

    groups = tmp_path / "groups.jsonl"
    good = {
        "tokens": [[1, 2]],
        "masks": [[-100, 2]],
        "scores": [0.5, 1.0],
        "vftui": {"item": 0, "mode": "eval"},
    }
    lines = [
        json.dumps(good),
        json.dumps({**good, "scores": [1e308, -1e308]}),
        json.dumps(
            {**good, "scores": [0.5, 0.5], "vftui": {"item": 2, "metrics": {"judge": [1e308, 1]}}}
        ),
        json.dumps(good).replace("[0.5, 1.0]", "[1" + "0" * 400 + ", 1]"),
    ]
    groups.write_text("\n".join(lines) + "\n")
    events, view = [], GroupFile(groups)
    summary = view.read(events.append, "")
    assert len(view) == 1 and view.skipped == 3 and summary.error == "3 malformed lines skipped"
    said = [e.message for e in events if type(e).__name__ == "LogRecord"]
    assert said[:2] == [
        f"groups.jsonl line {n} skipped: bad group (it holds 1e+308, beyond ±1e+100)"
        for n in (2, 3)
    ]
    assert (
        said[2].startswith("groups.jsonl line 4 skipped: bad group (it holds 1000")
        and "beyond ±1e+100" in said[2]
    )
    reports = [e for e in events if type(e).__name__ == "EvalReport"]
    assert reports and reports[-1].figures["reward"]["mean"] == 0.75


async def test_the_compare_screen_shows_names_from_files_as_signs(tmp_path):
    hostile = "\x1b]0;PWNTITLE\x07\x1b]52;c;UFdO\x07\x1b[2J[red]judge"
    paths = [
        write_rows(tmp_path / side / "results.jsonl", [1.0, 0.0, 0.5], metric=hostile)
        for side in "ab"
    ]
    sources = load_all(paths)
    app = CompareApp([summarize(s, 0.5) for s in sources], [compare(*sources)])
    async with app.run_test(size=(130, 40)) as pilot:
        screen = "\n".join(screen_lines(app))
        assert "\x1b" not in screen and "\x07" not in screen
        assert "␛]0;PWNTITLE␇␛]52;c;UFdO␇␛[2J[red]judge" in screen, (
            "the name as signs, its brackets as text"
        )
        await pilot.press("q")


def test_a_resume_refuses_a_file_that_holds_an_item_twice(tmp_path):
    """A run writes each item once: a repeated line (two files joined by hand) would be counted twice in the
    eval's results.jsonl and once in its metadata."""
    out = tmp_path / "eval.jsonl"
    first = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--out",
            str(out),
            "--env-args",
            '{"split": "eval"}',
            "--num-examples",
            "3",
        ],
        tmp_path,
    )
    assert first.returncode == 0, first.stderr
    lines = out.read_text().splitlines(True)
    with out.open("a") as f:
        f.write(lines[0])
    repeated = json.loads(lines[0])["vftui"]["item"]
    result = run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"--resume: line 4 of {out} is a repeat of item {repeated} of line 1" in result.stderr, (
        result.stderr
    )


@pytest.mark.parametrize("at", [0, 1, 4])
def test_an_errored_row_fails_its_example_wherever_it_sits(tmp_path, at):
    """The hostile probe's find: read a line at a time, an errored row (an example id, no reward) on the
    first line came before the first row of either form and was only counted, so its example was scored
    on its other rollouts; it is that example's error wherever it sits."""
    from vftui.run_files.results import load

    rows = [{"example_id": n, "reward": 1.0, "prompt": "p", "completion": "c"} for n in range(4)]
    rows.insert(at, {"example_id": 0, "prompt": "p", "error": "the endpoint failed"})
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    source = load(path)
    assert (sorted(source.items), source.errors, source.skipped) == (["1", "2", "3"], 1, 1)
