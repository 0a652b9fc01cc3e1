"""`vftui compare` and `vftui view` against vf-eval's own output: an eval by vftui and one by vf-eval of the
same classic environment on the same simulated endpoint, then compared, gated and viewed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    REPO,
    inside_lines,
    json_events,
    read_jsonl,
    run_cli,
    screen_lines,
    until,
)
from vftui.commands.compare import load_all
from vftui.comparing.comparison import measure, widest_pair
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.results import viewable
from vftui.sim.server import TOKENIZER_DIR, BackgroundSimServer
from vftui.ui.app import VftuiApp
from vftui.ui.compare_app import CompareApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox

pytestmark = [pytest.mark.e2e, pytest.mark.classic]
ENV = "vftui/alphabet-sort-classic"


def vf_eval(tmp_path: Path, base_url: str) -> Path:
    """vf-eval's own run, saved as it saves results; its folder."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "alphabet_sort_classic.py").write_text(
        "from vftui.sim.envs.alphabet_sort_classic import load_environment  # noqa: F401\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shim), str(REPO)]),
        "OPENAI_API_KEY": "EMPTY",
    }
    vf = Path(sys.executable).parent / "vf-eval"
    subprocess.run(
        [
            str(vf),
            "alphabet_sort_classic",
            "-m",
            "vftui-sim",
            "-b",
            base_url,
            "-k",
            "OPENAI_API_KEY",
            "-n",
            "10",
            "-r",
            "4",
            "--save-results",
            "--output-dir",
            str(tmp_path / "vf"),
            "--disable-tui",
            "--disable-env-server",
        ],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = (tmp_path / "vf").glob("evals/*/*/metadata.json")
    return found.parent


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """vftui's eval and vf-eval's of the same environment on one simulated endpoint, made once for the tests
    that read them (``SHARED``: on one worker)."""
    tmp_path = tmp_path_factory.mktemp("both")
    sim = BackgroundSimServer(seed=0).start()
    try:
        yield _evals_by_both(tmp_path, sim.base_url)
    finally:
        sim.stop()


SHARED = pytest.mark.xdist_group("compare-both")


def _evals_by_both(tmp_path: Path, base_url: str) -> tuple[Path, Path]:
    result = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--env",
            ENV,
            "--base-url",
            base_url,
            "--num-examples",
            "10",
            "--rollouts-per-example",
            "4",
            "--out",
            str(tmp_path / "ours.jsonl"),
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return tmp_path / "ours.eval", vf_eval(tmp_path, base_url)


@SHARED
def test_compare_pairs_vftuis_eval_with_vf_evals_and_agrees_with_its_figures(both, tmp_path):
    ours, theirs = both
    result = run_cli(["compare", str(ours), str(theirs), "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    meta = json.loads((theirs / "metadata.json").read_text())
    a, b = report["sources"]
    assert (a["items"], b["items"], b["kind"], b["rollouts"]) == (10, 10, "vf-eval", 4)
    assert b["reward"]["mean"] == pytest.approx(meta["avg_reward"]), "vf-eval's own mean"
    assert b["pass@1"]["mean"] == pytest.approx(meta["pass_at_k"]["1"]), "vf-eval's own pass@1"
    assert a["reward"]["mean"] == pytest.approx(
        json.loads((ours / "metadata.json").read_text())["avg_reward"]
    )
    change = report["changes"][0]
    assert change["paired"] == 10, "the same eval split, item by item"
    assert [i["change"] for i in change["items"]] == sorted(i["change"] for i in change["items"]), (
        "worst first"
    )
    assert change["reward"]["mean"] == pytest.approx(b["reward"]["mean"] - a["reward"]["mean"])
    text = run_cli(["compare", str(ours), str(theirs)], tmp_path)
    assert (
        text.returncode == 0
        and "B - A reward " in text.stdout
        and "(paired bootstrap over 10 items)" in text.stdout
        and "histogram" in text.stdout
    )


@SHARED
def test_fail_if_worse_exits_3_and_other_environments_are_refused(both, tmp_path):
    ours, _ = both
    worse = tmp_path / "worse.jsonl"
    groups = read_jsonl(ours.parent / "ours.jsonl")
    worse.write_text(
        "".join(json.dumps({**g, "scores": [0.0] * len(g["scores"])}) + "\n" for g in groups)
    )
    result = run_cli(["compare", str(ours), str(worse), "--fail-if-worse", "0.05"], tmp_path)
    assert result.returncode == 3, result.stderr
    assert "is worse than" in result.stderr and "beyond the 95% interval" in result.stderr
    assert (
        run_cli(
            ["compare", str(ours), str(ours / "results.jsonl"), "--fail-if-worse", "0"], tmp_path
        ).returncode
        == 0
    ), "no change is not worse"
    other = run_cli(
        ["run", "--no-ui", "--steps", "2", "--out", str(tmp_path / "v1.jsonl")], tmp_path
    )
    assert other.returncode == 0, other.stderr
    for args, said in (
        ([str(ours), str(tmp_path / "v1.jsonl")], "different environments"),
        ([str(ours)], "at least two"),
        ([str(ours), str(tmp_path / "nope")], "no such file"),
    ):
        result = run_cli(["compare", *args], tmp_path)
        assert (
            result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr
        ), result.stderr


@SHARED
async def test_view_opens_vf_evals_folder_with_its_figures(both, tmp_path, monkeypatch):
    _, theirs = both
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    meta = json.loads((theirs / "metadata.json").read_text())
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(viewable(theirs)), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            pilot=pilot,
            predicate=lambda: (
                app.model.summary is not None
                and app.model.eval_report is not None
                and app.model.eval_report.final
            ),
        )
        report = app.model.eval_report
        assert report.items == 10 and report.figures["pass@1"]["mean"] == pytest.approx(
            meta["pass_at_k"]["1"]
        )
        await pilot.pause()  # the panel drawn with the final report
        assert app.dashboard.has_class("-eval") and "pass@1" in "\n".join(screen_lines(app))
        await pilot.press("o")
        shown = list(app.model.visible_groups())
        assert [sum(g.scores) for g in shown] == sorted(sum(g.scores) for g in shown), (
            "hardest first"
        )
        assert app.dashboard.table.cursor == 0
        await pilot.press("q")


def test_eval_json_events_carry_the_report_live(sim, tmp_path):
    result = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--json",
            "--base-url",
            sim.base_url,
            "--num-examples",
            "3",
            "--out",
            str(tmp_path / "e.jsonl"),
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    kinds = [e["event"] for e in json_events(result.stdout)]
    assert kinds.index("EvalReport") < kinds.index("RunSummary")


@SHARED
async def test_the_compare_view_lists_items_worst_first_and_shows_both_sides_rollouts(
    both, tmp_path
):
    ours, theirs = both
    sources = load_all([ours, theirs])
    summaries, (change,) = measure(sources, 0.5)
    app = CompareApp(summaries, [change])
    async with app.run_test(size=(130, 45)) as pilot:
        items = app.query_one("#items")
        worst = change.items[0]
        assert items.row_count == 10 and str(items.get_row_at(0)[0]) == worst.key
        a, b = (sources[n].items[worst.key] for n in (0, 1))
        i, j = widest_pair(a.rewards, b.rewards)
        side_a, side_b = (app.query_one(f"#side-{x}") for x in "AB")
        assert f"· rollout {i + 1}/4 · item {worst.key}" in side_a.border_title
        assert f"· rollout {j + 1}/4 · item {worst.key}" in side_b.border_title
        answer = b.rollouts[j][-1]["content"].splitlines()[0]
        assert answer in str(side_b.render())
        await pilot.press("enter")
        assert f"rollout {(i + 1) % 4 + 1}/4" in side_a.border_title
        await pilot.press("down")
        assert f"· item {change.items[1].key}" in side_b.border_title
        await pilot.press("q")


def results_file(path: Path, rewards: list[float], role: str = "user", functions: int = 1) -> Path:
    """vf-eval's results.jsonl, one row an example, each with ``functions`` reward functions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "example_id": n,
            "reward": r,
            "metrics": {f"function_{f}": r for f in range(functions)},
            "prompt": [{"role": role, "content": "sort"}],
            "completion": [{"role": "assistant", "content": f"answer {n}"}],
        }
        for n, r in enumerate(rewards)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_the_compare_screen_shows_a_roles_escapes_as_signs(tmp_path):
    hostile = "user\x1b]0;PWNTITLE\x07\x1b[2J"
    paths = [
        results_file(tmp_path / side / "results.jsonl", [1.0, 0.0], role=hostile) for side in "ab"
    ]
    app = CompareApp(*measure(load_all(paths), 0.5))
    async with app.run_test(size=(130, 40)) as pilot:
        side = str(app.query_one("#side-A").render())
        assert "\x1b" not in side and "\x07" not in side and "user␛]0;PWNTITLE␇␛[2J: sort" in side
        await pilot.press("q")


async def test_at_80x24_the_compare_screen_shows_the_selected_items_answers(tmp_path):
    """Three sources of four reward functions: the figures scroll rather than leave the rollouts no room."""
    paths = [
        results_file(tmp_path / side / "results.jsonl", [1.0, 0.0, 0.5, 0.25], functions=4)
        for side in "abc"
    ]
    app = CompareApp(*measure(load_all(paths), 0.5))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = "\n".join(screen_lines(app))
        key = app.changes[0].items[0].key
        assert screen.count(f"assistant: answer {key}") == 2, screen
        await pilot.press("q")


@pytest.mark.parametrize("rewards", [[0.0], [-100.0]])
def test_the_gate_refuses_a_change_it_has_no_interval_for(tmp_path, rewards):
    base = results_file(tmp_path / "a" / "results.jsonl", [1.0, 0.0, 1.0, 0.5])
    one = results_file(tmp_path / "b" / "results.jsonl", rewards)  # one item in common: no interval
    result = run_cli(
        ["compare", "--json", "--fail-if-worse", "0.02", str(base), str(one)], tmp_path
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--fail-if-worse cannot judge" in result.stderr and "1 item in common" in result.stderr
    assert result.stdout == ""
    assert run_cli(["compare", "--json", str(base), str(one)], tmp_path).returncode == 0, (
        "without the gate: shown"
    )


def test_another_tools_errors_field_in_metadata_counts_no_errors(tmp_path):
    paths = [results_file(tmp_path / side / "results.jsonl", [1.0, 0.0, 0.5]) for side in "ab"]
    (tmp_path / "b" / "metadata.json").write_text(json.dumps({"env_id": "x", "errors": 3}))
    result = run_cli(["compare", "--json", *map(str, paths)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert [s["errors"] for s in json.loads(result.stdout)["sources"]] == [0, 0]


async def test_g_overlays_the_sources_on_charts_a_colour_each_and_redraws_for_a_new_size(tmp_path):
    paths = [
        results_file(tmp_path / side / "results.jsonl", rewards)
        for side, rewards in (("a", [1.0, 0.0, 0.5, 0.25] * 5), ("b", [0.0, 1.0, 0.5, 0.75] * 5))
    ]
    app = CompareApp(*measure(load_all(paths), 0.5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("g")
        await until(lambda: type(app.screen).__name__ == "CompareChartsScreen", pilot=pilot)
        charts = app.screen.query("Chart")

        def drawn() -> list[str]:
            return ["\n".join(inside_lines(app, chart)) for chart in charts]

        await until(lambda: all("item" in text for text in drawn()), pilot=pilot, timeout=10)
        assert [c.border_title for c in charts] == [
            "mean reward per item",
            "completion length, mean per item",
            "identical scores, rate over 20 items",
            "truncated rollouts, rate over 20 items",
        ]
        assert all("A" in c.border_subtitle and "B" in c.border_subtitle for c in charts)
        before = drawn()
        await pilot.resize_terminal(160, 48)
        await until(lambda: drawn() != before, pilot=pilot, timeout=10)
        await pilot.press("escape")
        assert type(app.screen).__name__ != "CompareChartsScreen"


async def test_g_draws_eight_sources_and_more_a_colour_each_cycling(tmp_path):
    """Seven colours: the eighth source's chart raised KeyError."""
    paths = [
        results_file(tmp_path / f"s{n}" / "results.jsonl", [n / 8, 1.0, 0.5]) for n in range(9)
    ]
    app = CompareApp(*measure(load_all(paths), 0.5))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("g")
        await until(lambda: type(app.screen).__name__ == "CompareChartsScreen", pilot=pilot)
        reward = app.screen.query_one("#chart-reward")
        await until(lambda: "I" in (reward.border_subtitle or ""), pilot=pilot, timeout=10)
        assert "item" in "\n".join(inside_lines(app, reward))


@pytest.mark.unit
def test_an_rl_runs_groups_give_its_reward_by_trainer_step(tmp_path):
    """vftui's rl groups record the trainer step they were sampled at: the compare charts' steps."""
    from vftui.comparing.comparison import source_series
    from vftui.group_format import META
    from vftui.run_files.results import load

    path = tmp_path / "groups.jsonl"
    lines = [
        {"scores": [1.0, 0.0], "tokens": [[1], [2]], META: {"item": i, "trainer_step": step}}
        for i, step in enumerate([0, 0, 1, 3])
    ]
    lines[1]["scores"] = [1.0, 1.0]
    path.write_text("".join(json.dumps(g) + "\n" for g in lines))
    assert source_series(load(path)).by_step == [(0, 0.75), (1, 0.5), (3, 0.5)]
    lines = [{k: v for k, v in g.items() if k != META} for g in lines]  # an sft run: no steps
    path.write_text("".join(json.dumps(g) + "\n" for g in lines))
    assert source_series(load(path)).by_step == []
