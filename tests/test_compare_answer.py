"""``vftui compare``'s answer first, in the screen and in ``--no-ui``: the paired change with its interval and
the verdict, how the sources were made, the drops and the gains; hostile sources shown, never obeyed.

tests/data/compare holds two vf-eval outputs of one environment (12 examples, 4 rollouts each): B, a later
checkpoint sampled at temperature 0.3 against A's 1.0, drops on four examples and gains on two."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, run_cli, screen_lines
from vftui.commands.compare import load_all
from vftui.comparing.comparison import ItemChange, measure, moved, widest_pair
from vftui.events import EvalReport
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.results import Setup, viewable
from vftui.ui.compare_app import CompareApp
from vftui.ui.screens.help import HelpScreen

DATA = Path("tests/data/compare")  # relative, so snapshots match on any checkout
BOTH = [DATA / "a", DATA / "b"]


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(REPO)


def app_of(paths: list[Path], margin: float | None = None) -> CompareApp:
    summaries, changes = measure(load_all(paths), None)
    return CompareApp(summaries, changes, margin)


def results(folder: Path, rollouts: dict[int, list[float]], **metadata) -> Path:
    """vf-eval's output: a results.jsonl of these rollouts' rewards, and a metadata.json when given one."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "example_id": n,
            "reward": reward,
            "prompt": [{"role": "user", "content": f"sort {n}"}],
            "completion": [{"role": "assistant", "content": f"answer {n}.{r}"}],
        }
        for n, rewards in rollouts.items()
        for r, reward in enumerate(rewards)
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if metadata:
        (folder / "metadata.json").write_text(json.dumps(metadata))
    return folder


# -- compare --no-ui -----------------------------------------------------------------------------


def test_no_ui_lists_the_worst_drops_and_the_biggest_gains(tmp_path):
    result = run_cli(["compare", "--no-ui", *(str(REPO / p) for p in BOTH)], tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "items that dropped most (4 of 4 that dropped)" in out, out
    assert "items that gained most (2 of 2 that gained)" in out, out
    gains = out.split("items that gained most")[1].splitlines()[1:3]
    assert [line.split()[0] for line in gains] == ["5", "9"] and all(
        line.endswith("+0.250") for line in gains
    ), out
    assert "+0.000" not in out.split("items that dropped most")[1], "unchanged items are no news"
    assert "6 items unchanged" in out


def test_no_ui_says_how_the_sources_differ_and_unknown_where_a_source_does_not_record_it(tmp_path):
    bare = results(tmp_path / "bare", {n: [1.0, 0.0] for n in range(12)})  # no metadata.json
    result = run_cli(["compare", "--no-ui", *(str(REPO / p) for p in BOTH), str(bare)], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {
        line.split()[0]: line.split()[1:] for line in result.stdout.splitlines() if line.strip()
    }
    assert rows["model"] == ["acme/sorter-7b", "acme/sorter-7b-step200", "unknown"], rows
    assert rows["temperature"] == ["1", "0.3", "unknown"], rows
    assert rows["split"] == ["eval", "eval", "unknown"], rows
    assert rows["versions"] == [
        "env",
        "0.2.0,",
        "vf",
        "0.1.9",
        "env",
        "0.2.0,",
        "vf",
        "0.1.10",
        "unknown",
    ]
    report = json.loads(
        run_cli(["compare", "--json", *(str(REPO / p) for p in BOTH), str(bare)], tmp_path).stdout
    )
    setups = [s["setup"] for s in report["sources"]]
    assert setups[1]["model"] == "acme/sorter-7b-step200" and setups[1]["temperatures"] == [0.3]
    assert setups[2] == {
        "model": None,
        "temperatures": [],
        "env_args": None,
        "split": None,
        "versions": None,
    }


def test_a_runs_setup_comes_from_its_groups_run_json_and_eval_metadata_and_without_them_is_unknown(
    tmp_path,
):
    eval_run = tmp_path / "e.jsonl"
    result = run_cli(
        ["run", "--mode", "eval", "--no-ui", "--num-examples", "3", "--out", str(eval_run)],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    bare = tmp_path / "bare" / "e.jsonl"  # the groups alone: no run.json, no eval folder
    bare.parent.mkdir()
    bare.write_bytes(eval_run.read_bytes())
    result = run_cli(["compare", "--json", str(eval_run), str(bare)], tmp_path)
    assert result.returncode == 0, result.stderr
    ran, alone = (s["setup"] for s in json.loads(result.stdout)["sources"])
    versions = json.loads((tmp_path / "e.eval" / "metadata.json").read_text())["version_info"]
    assert ran == {
        "model": "vftui-sim",
        "temperatures": [0.0],  # one rollout an example: greedy
        "env_args": '{"split": "eval"}',  # the built-in's eval split, which eval mode takes
        "split": "eval",
        "versions": ", ".join(f"{name} {v}" for name, v in sorted(versions.items())),
    }
    assert alone == {**ran, "env_args": None, "split": None, "versions": None}, "from the groups"


@pytest.mark.unit
def test_a_folder_of_shards_setup_is_what_they_all_record():
    one = Setup("m", (1.0,), "{}", "train", None)
    assert one.merged(one) == one
    other = Setup("n", (0.3,), "{}", None, "vftui 1")
    assert one.merged(other) == Setup("m | n", (0.3, 1.0), "{}", "train", "vftui 1")


@pytest.mark.parametrize("margin", ["0.5", "0.01"])
def test_fail_if_worse_says_its_verdict_either_way(tmp_path, margin):
    result = run_cli(
        ["compare", "--no-ui", "--fail-if-worse", margin, *(str(REPO / p) for p in BOTH)],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (said,) = [line for line in result.stderr.splitlines() if "--fail-if-worse" in line]
    assert (
        f"--fail-if-worse {margin} passed: " in said
        and f"b/results.jsonl is not worse than {REPO / BOTH[0]}/results.jsonl by more than {margin} "
        in said
        and "beyond the 95% interval, by paired bootstrap over 12 items" in said
        and "(B - A reward -0.188 [-0.479, +0.076])" in said
    ), said


def test_fail_if_worse_says_which_source_failed_with_its_figure(tmp_path):
    base = results(tmp_path / "a", {n: [1.0, 1.0] for n in range(6)})
    worse = results(tmp_path / "b", {n: [0.0, 0.5] for n in range(6)})
    result = run_cli(
        ["compare", "--no-ui", "--fail-if-worse", "0.1", str(base), str(worse)], tmp_path
    )
    assert result.returncode == 3
    (said,) = [line for line in result.stderr.splitlines() if "--fail-if-worse" in line]
    assert "0.1 failed: " in said and "is worse than" in said and "B - A reward -0.750" in said, (
        said
    )


def test_fail_if_worse_refuses_to_judge_a_few_items_that_moved_alike(tmp_path):
    """2 items that both dropped a little were 'worse beyond its interval' ([-0.050, -0.025]) and failed the
    gate: a bootstrap cannot reach past the changes seen, and no test reaches 95% on so few."""
    base = results(tmp_path / "a", {0: [1.0, 0.9], 1: [0.8, 0.7]})
    worse = results(tmp_path / "b", {0: [0.95, 0.9], 1: [0.7, 0.7]})
    result = run_cli(
        ["compare", "--no-ui", "--fail-if-worse", "0.01", str(base), str(worse)], tmp_path
    )
    assert result.returncode == 2, result.stderr
    assert (
        "only 2 items in common, too few for a 95% interval of the change (it needs 6 or more)"
        in result.stderr
    ), result.stderr
    shown = run_cli(["compare", "--no-ui", str(base), str(worse)], tmp_path).stdout
    assert "B - A reward -0.037: no interval, 2 items in common" in shown, shown


def test_an_example_with_a_reward_that_is_no_number_is_an_error_not_its_other_rollouts(tmp_path):
    """The NaN row alone was dropped: the example scored over its other rollouts, higher where a judge gave NaN
    to the bad answers, with 'errors 0' and the gate passed."""
    base = results(tmp_path / "a", {n: [1.0, 0.0] for n in range(8)})
    nan = results(tmp_path / "b", {n: [1.0, float("nan") if n < 2 else 0.0] for n in range(8)})
    shown = run_cli(["compare", "--json", str(base), str(nan)], tmp_path)
    assert shown.returncode == 0, shown.stderr
    a, b = json.loads(shown.stdout)["sources"]
    assert (b["items"], b["errors"], b["skipped_lines"]) == (6, 2, 2), b
    assert b["reward"]["mean"] == a["reward"]["mean"] == 0.5, "the examples left are scored as in A"
    events: list = []  # and the view says the same of the same file
    GroupFile(viewable(nan)).read(events.append, "")
    (final,) = [e for e in events if isinstance(e, EvalReport) and e.final]
    assert (final.items, final.errors, final.figures["reward"]["mean"]) == (6, 2, 0.5)


def test_hostile_sources_are_compared_and_their_text_shown_not_obeyed(tmp_path):
    escape = "\x1b]0;PWNED\x07\x1b[2J"
    a = results(
        tmp_path / f"a{escape}",
        {0: [1e100, -1e100], 1: [float("nan"), 0.5], 2: [1e308, 0.0]},
        model=f"m{escape}",
        env_args={"split": f"x{escape}"},
        version_info=[1, 2],  # another tool's form: no versions this view can read
    )
    b = results(tmp_path / "b", {0: [0.0, 1.0], 5: [1.0]})  # one item in common, no metadata
    result = run_cli(["compare", "--no-ui", str(a), str(b)], tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout
    assert "m␛]0;PWNED␇␛[2J" in result.stdout
    said = "B - A reward +0.500: no interval, 1 item in common (paired bootstrap over 1 item)"
    assert said in result.stdout, result.stdout


# -- the compare screen ----------------------------------------------------------------------------


def at_rows(lines: list[str], *words: str) -> list[int]:
    return [n for n, line in enumerate(lines) if all(w in line for w in words)]


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
async def test_the_screen_shows_the_answer_first_then_how_the_sources_differ(size):
    app = app_of(BOTH, margin=0.02)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        screen = "\n".join(lines)
        (answer,) = at_rows(lines, "B - A reward -0.188 [-0.479, +0.076]: no clear change")
        assert answer == 1, screen
        assert at_rows(lines, "McNemar exact p = 0.25: 3 items pass -> fail, 0 fail -> pass") == [2]
        assert at_rows(lines, "--fail-if-worse 0.02: B passed (paired bootstrap)"), screen
        assert at_rows(lines, "how they differ: model, t"), screen
        beside = r"temperature +A +1 .*\n.*│ +B +0\.3 "  # a table of its own, a line a source
        above = r"│ temperature +1 +0\.3 "  # narrow: in the figures' table, above them
        assert re.search(beside if size == (100, 30) else above, screen), screen
        assert re.search(r"│ reward +0\.875 ± 0\.107 +0\.688 ± 0\.226", screen), screen
        shown = [
            c.key for c in app.changes[0].items if at_rows(lines, f"│ {c.key} ", f"{c.change:+.3f}")
        ]
        assert len(shown) >= (4 if size == (100, 30) else 3), screen
        assert screen.count("assistant: ") >= 2, "both sides' answers: " + screen
        await pilot.press("q")


async def test_the_screen_shows_the_histogram_rollouts_and_threshold_when_scrolled():
    app = app_of(BOTH)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        figures = app.query_one("#figures")
        labels = [str(figures.get_row_at(n)[0]) for n in range(figures.row_count)]
        assert {"rollouts/item", "passes at", "histogram [0, 1]"} <= set(labels), labels
        row = figures.get_row_at(labels.index("histogram [0, 1]"))
        assert all("48" in str(cell) for cell in row[1:]), row
        await pilot.press("q")


async def test_question_mark_opens_help_built_from_the_bindings():
    app = app_of(BOTH)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        screen = "\n".join(screen_lines(app))
        for binding in app.BINDINGS:
            assert (binding.tooltip or binding.description) in screen, screen
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")


async def test_each_item_opens_at_the_rollouts_that_differ_most(tmp_path):
    a = results(tmp_path / "a", {0: [1.0, 1.0, 1.0, 1.0], 1: [0.0, 0.0, 0.5, 0.0]})
    b = results(tmp_path / "b", {0: [1.0, 1.0, 1.0, 0.0], 1: [0.0, 1.0, 0.0, 0.0]})
    app = app_of([a, b])
    async with app.run_test(size=(120, 40)) as pilot:

        def sides() -> list[str]:
            shown = [app.query_one(f"#side-{x}") for x in "AB"]
            return [f"{side.border_title}\n{side.render()}" for side in shown]

        side_a, side_b = sides()
        assert "A · reward 1.000 · rollout 1/4 · item 0" in side_a, side_a  # the drop: A's best...
        assert "B · reward 0.000 · rollout 4/4 · item 0" in side_b, side_b  # ...against B's worst
        assert "answer 0.3" in side_b
        await pilot.press("n")
        assert "rollout 1/4" in sides()[1] and "rollout 2/4" in sides()[0]
        await pilot.press("down")
        side_a, side_b = sides()
        assert "A · reward 0.000 · rollout 1/4 · item 1" in side_a, side_a  # the gain: A's worst...
        assert "B · reward 1.000 · rollout 2/4 · item 1" in side_b, side_b  # ...against B's best
        await pilot.press("q")


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_snapshot_compare_screen(snap_compare, size):
    assert snap_compare(app_of(BOTH, margin=0.02), terminal_size=size)


# -- the figures behind them -------------------------------------------------------------------------

rewards = st.lists(
    st.floats(min_value=-1e100, max_value=1e100, allow_nan=False), min_size=1, max_size=8
)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(rewards, rewards)
def test_widest_pair_is_the_pair_of_rollouts_that_differ_most(first, later):
    i, j = widest_pair(first, later)
    assert abs(first[i] - later[j]) == max(abs(x - y) for x in first for y in later)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-4, 4), max_size=30), st.integers(1, 6))
def test_moved_items_are_the_worst_drops_and_the_biggest_gains(steps, shown):
    changes = sorted(
        (ItemChange(str(n), 0.0, step / 4) for n, step in enumerate(steps)),
        key=lambda c: (c.change, c.key),
    )
    drops, gains = moved(changes, shown)
    assert all(c.change < 0 for c in drops) and all(c.change > 0 for c in gains)
    assert [c.change for c in drops] == sorted(c.change for c in changes if c.change < 0)[:shown]
    assert [c.change for c in gains] == sorted(
        (c.change for c in changes if c.change > 0), reverse=True
    )[:shown]


def test_a_huge_answer_is_cut_in_the_compare_screen_as_the_report_cuts_it():
    """The hostile probe's find: a 50-million-character answer stalled the compare screen for 20 s and
    took a gigabyte to lay out; past ``MESSAGE_CHARS`` a message shows its start and how much more."""
    from vftui.ui.compare_app import MESSAGE_CHARS, rollout_text

    huge = "x" * (MESSAGE_CHARS + 12_345)
    shown = rollout_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": huge}])
    assert shown.plain.endswith("… 12,345 more characters, in the file\n")
    assert len(shown.plain) < MESSAGE_CHARS + 100
    assert rollout_text([{"role": "assistant", "content": "short"}]).plain == "assistant: short\n"
