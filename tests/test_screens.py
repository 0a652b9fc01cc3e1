"""Screens that do not depend on a live run: snapshots, view mode, themes, small sizes."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.app import App

from tests.conftest import REPO, ended_run, inside_lines, screen_lines, until
from vftui import stats
from vftui.errors import UserError
from vftui.events import LogRecord
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.listing import COLUMNS, RunLine, cells
from vftui.sim.server import TOKENIZER_DIR
from vftui.ui import themes
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox
from vftui.ui.model import LOG_LINES
from vftui.ui.runs_app import RunsApp, fit, run_filter
from vftui.ui.screens.best_worst import BestWorstScreen
from vftui.ui.screens.help import HelpScreen
from vftui.ui.screens.prompt import PromptScreen
from vftui.ui.widgets import plots

FIXTURE = Path("tests/data/groups.jsonl")  # relative, so snapshots match on any checkout


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(REPO)


FIXED_CLOCK = 1_796_000_000.0


def viewer_app(path: Path = FIXTURE, theme: str = "vftui-dark") -> VftuiApp:
    """The app as ``vftui view`` makes it: the file read by its worker."""
    return VftuiApp(
        ViewedFile(Inbox(), GroupFile(path), str(TOKENIZER_DIR)),
        theme_name=theme,
        clock=lambda: FIXED_CLOCK,
    )


def read_through(app: VftuiApp) -> bool:
    """The whole file is in the model (its summary folded), not just read by the worker."""
    return app.model.summary is not None


async def settle(pilot) -> None:
    await until(
        lambda: read_through(pilot.app) and pilot.app.dashboard.decoder.available, pilot=pilot
    )
    pilot.app.dashboard.refresh_preview()
    await idle(pilot)


async def still(pilot) -> None:
    """Settled, the preview at its top: a snapshot of a screen, not of where a scrollbar's thumb is mid-repaint."""
    await settle(pilot)
    pilot.app.query_one("#token-text").scroll_home(animate=False, immediate=True)
    await idle(pilot)


async def idle(pilot) -> None:
    """Every repaint the last change asked for is done: a scrollbar follows its view a refresh later."""
    for _ in range(3):
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_snapshot_main_screen(snap_compare, size):
    assert snap_compare(viewer_app(), terminal_size=size, run_before=still)


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_snapshot_help_screen(snap_compare, size):
    async def open_help(pilot):
        await still(pilot)
        await pilot.press("question_mark")
        await until(lambda: isinstance(pilot.app.screen, HelpScreen), pilot=pilot)
        await pilot.pause()

    assert snap_compare(viewer_app(), terminal_size=size, run_before=open_help)


def test_snapshot_view_filtered(snap_compare):
    async def filtered(pilot):
        await still(pilot)
        await pilot.press("slash", *"varied", "enter")
        await until(
            lambda: (
                pilot.app.model.filter_text == "varied"
                and not isinstance(pilot.app.screen, PromptScreen)
            ),
            pilot=pilot,
        )
        await still(pilot)

    assert snap_compare(viewer_app(), terminal_size=(100, 30), run_before=filtered)


async def test_view_filter_shows_only_matching_groups_and_reports_bad_lines(tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = FIXTURE.read_text().splitlines()
    path.write_text(
        "\n".join([lines[0], "{not json", lines[1], '{"scores": [1]}', *lines[2:]]) + "\n"
    )
    app = viewer_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(lambda: read_through(app), pilot=pilot)
        assert len(app.model.all_groups()) == len(lines)
        messages = [r.message for r in app.model.logs]
        assert any("line 2 skipped: not JSON" in m for m in messages)
        assert any("line 4 skipped" in m for m in messages)
        await pilot.press("slash", *"identical", "enter")
        table = app.query_one("#rewards-table")
        expected = [g for g in app.model.all_groups() if g.identical]
        await until(lambda: table.row_count == len(expected), pilot=pilot)
        assert app.dashboard.previewed is not None and stats.is_identical(
            app.dashboard.previewed.scores
        ), "the preview follows the filter"
        shown = str(app.query_one("#identical-text").render())
        assert shown.startswith("filtered 100%"), (
            f"the side panels count the groups the filter keeps: {shown!r}"
        )
        await pilot.press("slash", "ctrl+a", "backspace", *"reward<", "enter")
        await until(
            lambda: "cannot read" in str(app.screen.query_one(".prompt-error").render()),
            pilot=pilot,
        )
        await pilot.press("escape")
        await pilot.press("space")  # steering keys do nothing when viewing a file
        assert app.model.state.value == "finished"


@pytest.mark.parametrize("size", [(60, 16), (40, 12), (20, 8)])
async def test_small_terminals_degrade_without_crashing(size):
    app = viewer_app()
    async with app.run_test(size=size) as pilot:
        await until(lambda: read_through(app), pilot=pilot)
        await pilot.press("j", "k", "enter", "question_mark", "escape", "tab")
        await pilot.pause()
        assert app.screen.has_class("-narrow") or app.screen.has_class("-low")
        assert not app.query_one("#right").display


@pytest.mark.unit
def test_shipped_themes_load_and_bad_ones_are_explained(tmp_path, monkeypatch):
    shipped = themes.available_themes()
    assert {"vftui-dark", "vftui-light", "vftui-contrast"} <= set(shipped)
    assert shipped["vftui-light"].dark is False
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    user_dir = tmp_path / "vftui" / "themes"
    user_dir.mkdir(parents=True)
    (user_dir / "mine.toml").write_text('name = "mine"\nprimary = "#ff8700"\n')
    assert "mine" in themes.available_themes()
    assert themes.resolve("mine", set()) == "mine"
    with pytest.raises(UserError, match=r"unknown theme 'nope'; available: .*vftui-dark"):
        themes.resolve("nope", set())
    (user_dir / "bad.toml").write_text('name = "bad"\nprimary = "not-a-colour"\n')
    with pytest.raises(UserError, match=r"bad\.toml is malformed"):
        themes.load_theme(user_dir / "bad.toml")
    (user_dir / "bad.toml").write_text('name = "bad"\nprimary = [\n')
    with pytest.raises(UserError, match=r"bad\.toml does not parse"):
        themes.load_theme(user_dir / "bad.toml")


@pytest.mark.parametrize(
    "broken", ["primary = [\n", 'primary = "not-a-colour"\n', 'colour = "#ffffff"\n']
)
@pytest.mark.unit
def test_a_broken_user_theme_is_skipped_unless_asked_for(broken, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    user_dir = tmp_path / "vftui" / "themes"
    user_dir.mkdir(parents=True)
    (user_dir / "mine.toml").write_text('name = "mine"\nprimary = "#ff8700"\n')
    (user_dir / "broken.toml").write_text(broken)
    ours = themes.available_themes()
    assert {"mine", "vftui-dark"} <= set(ours) and "broken" not in ours
    warning = capsys.readouterr().err.strip()
    assert (
        warning.startswith(f"vftui: warning: theme file {user_dir / 'broken.toml'} ")
        and "skipped it" in warning
    )
    assert themes.resolve("mine", ours=ours) == "mine"
    assert themes.resolve(None, ours=ours) == "vftui-dark"
    with pytest.raises(UserError, match=r"theme file .*broken\.toml (does not parse|is malformed)"):
        themes.resolve("broken", ours=ours)


async def test_every_shipped_theme_renders():
    for name in ("vftui-dark", "vftui-light", "vftui-contrast"):
        app = viewer_app(theme=name)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(lambda app=app: read_through(app), pilot=pilot)
            assert app.theme == name


def test_view_orders_groups_by_file_item_or_start_time(tmp_path):
    """With groups in flight a file is in finishing order; the view can put it back."""
    lines = FIXTURE.read_text().splitlines()
    shuffled = [lines[i] for i in (3, 0, 7, 1, 6, 2, 5, 4)]
    raw = [json.loads(line) for line in shuffled]
    for group, started in zip(raw, (5.0, 1.0, 2.0, 8.0, 3.0, 4.0, 7.0, 6.0), strict=True):
        group["vftui"]["started_at"] = started
    path = tmp_path / "finished-out-of-order.jsonl"
    path.write_text("".join(json.dumps(g) + "\n" for g in raw))

    def groups(order: str) -> list:
        rows = GroupFile(path, order)
        rows.read(lambda event: None, str(TOKENIZER_DIR))
        assert [r.index for r in rows] == list(range(1, 9))
        return [rows.group(r) for r in rows]

    assert [g.item for g in groups("file")] == [3, 0, 7, 1, 6, 2, 5, 4]
    assert [g.item for g in groups("item")] == list(range(8))
    assert [g.started_at for g in groups("time")] == sorted(g["vftui"]["started_at"] for g in raw)


async def test_a_big_file_opens_before_it_is_read_and_each_group_comes_from_disk(tmp_path):
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        for i in range(30_000):
            f.write(
                json.dumps(
                    {
                        "tokens": [[i % 500, 7]],
                        "masks": [[-100, 7]],
                        "scores": [i % 3 / 2],
                        "vftui": {"item": i, "turns": [1]},
                    }
                )
                + "\n"
            )
    app = viewer_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: app.model.groups_done > 0, pilot=pilot)
        assert app.result is None and "reading the file" in app.model.detail, (
            "shown while the pass goes on"
        )
        await until(lambda: read_through(app), timeout=120, pilot=pilot)
        assert (
            len(app.model.all_groups()) == 30_000
            and app.model.groups_done == app.model.groups_total == 30_000
        )
        assert app.model.run_metrics()["metrics/groups_total"] == 30_000
        await pilot.press("end")
        await until(
            lambda: "group 30000 ·" in str(app.query_one("#token-counts").render()), pilot=pilot
        )
        group = app.dashboard.selected_group()
        assert (group.index, group.item, group.tokens) == (30_000, 29_999, [[29_999 % 500, 7]])
        row = "".join(
            s.text for s in app.dashboard.table.render_line(app.dashboard.table.size.height - 1)
        )
        assert "30000 29999 " in row, f"the item column is as wide as its numbers: {row!r}"
        assert f"group {group.index} · rollout 1/1" in str(app.query_one("#token-counts").render())


async def test_wide_terminals_widen_the_side_column_and_log_lines_wrap_instead_of_being_cut():
    app = viewer_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: read_through(app), pilot=pilot)
        assert app.query_one("#right").outer_size.width >= 0.3 * 160 - 1
        message = "a long line from the collector that does not fit in the side column, told to its last word"
        app.inbox.put(LogRecord("INFO", "vftui", message))
        log = app.query_one("#log")
        await until(
            lambda: message.rsplit(" ", 1)[-1] in "".join(s.text for s in log.lines), pilot=pilot
        )
        shown = " ".join("".join(s.text for s in line).strip() for line in log.lines)
        assert message in " ".join(shown.split()), "every word shown, wrapped"
    async with viewer_app().run_test(size=(100, 30)) as pilot:
        assert pilot.app.query_one("#right").outer_size.width == 34


async def test_the_reader_jumps_to_the_completion_folds_the_prompt_and_steps_back():
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        body = app.query_one("#token-text")
        assert "assistant" in body.plain
        first_visible = "".join(s.text for s in body.render_line(0))
        assert "system" not in first_visible, (
            "opened at the model's words, not the top of the prompt"
        )
        await pilot.press("f")
        await pilot.pause()
        assert body.plain.startswith("… ") and "prompt pieces folded" in body.plain.splitlines()[0]
        assert "Sort names alphabetically" not in body.plain
        await pilot.press("f")
        await pilot.pause()
        assert "Sort names alphabetically" in body.plain
        await pilot.press("backspace")
        await pilot.pause()
        assert "rollout 4/4" in str(app.query_one("#token-counts").render()), (
            "back from the first: the last"
        )


async def open_charts(pilot) -> None:
    """The charts screen open and drawn (a loaded machine lays it out after the first tick: drawn at the
    next)."""
    await settle(pilot)
    await pilot.press("g")
    await until(lambda: pilot.app.screen.__class__.__name__ == "ChartsScreen", pilot=pilot)
    charts = pilot.app.screen.query("Chart")
    await until(lambda: all(c.border_title for c in charts if c.display), pilot=pilot, timeout=30)
    await pilot.pause()


def test_snapshot_charts_screen(snap_compare):
    assert snap_compare(viewer_app(), terminal_size=(120, 40), run_before=open_charts)


def test_snapshot_charts_screen_at_80x24(snap_compare):
    assert snap_compare(viewer_app(), terminal_size=(80, 24), run_before=open_charts)


BLOCKS = "▖▗▘▝▀▄▌▐▙▛▜▟▚▞█"  # quadrant blocks: the histogram's bars
AXES = {  # chart: its x axis's label, its y axis's
    "reward": ("group", "reward"),
    "functions": ("group", "value"),
    "histogram": ("reward", "rollouts"),
    "length": ("group", "tokens"),
    "rates": ("group", "%"),
}


async def test_every_chart_at_80x24_has_both_axes_labelled_and_ticked():
    """textual-plot's own margins (2 rows above, 3 below) left a chart this short no row to draw in
    and cut its labels: each chart keeps its lines, its axes' labels and two ticks or more each."""
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_charts(pilot)
        for name, (xlabel, ylabel) in AXES.items():
            inside = inside_lines(app, app.screen.query_one(f"#chart-{name}"))
            *plot, x_ticks, labels = inside
            assert labels.startswith(ylabel) and xlabel in labels[len(ylabel) :], (name, inside)
            assert len(re.findall(r"-?\d+(?:\.\d+)?", x_ticks)) >= 2, (name, inside)
            y_ticks = [row.split()[0] for row in plot if row.split()[0][-1].isdigit()]
            assert len(y_ticks) >= 2, (name, inside)
            drawn = [ch for row in plot for ch in row if "\u2800" < ch <= "\u28ff" or ch in BLOCKS]
            assert drawn, (name, inside)  # braille lines, the histogram's blocks


@pytest.mark.unit
async def test_a_line_on_the_y_axis_first_tick_is_drawn_inside_the_frame():
    """textual-plot draws its frame over the lines, and maps the y axis's first tick onto the frame:
    a rate that stayed at 0% was not on the chart at all."""

    class OneChart(App):
        CSS = "Chart { height: 10; }"

        def compose(self):
            yield plots.Chart(id="chart")

    app = OneChart()
    async with app.run_test(size=(60, 12)) as pilot:
        await pilot.pause()
        chart = app.query_one(plots.Chart)
        plots.lines(
            chart, "rates", "%", {"truncated": [0.0] * 20, "identical": [40.0] * 20}, "group"
        )
        await until(lambda: "group" in "\n".join(inside_lines(app, chart)), pilot=pilot)
        *plot, _, _ = inside_lines(app, chart)
        frame, above = plot[-1], plot[-2]
        assert set(frame.split(maxsplit=1)[1]) <= set("╋┳━"), plot  # "0 ╋━━┳━━╋": the frame whole
        assert above.split()[0] == "┃" and "⣀" in above, plot  # the 0% line, on the row above it


async def test_charts_draw_the_files_series_with_axes():
    app = viewer_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_charts(pilot)
        series = app.model.chart_series()
        assert len(series.mean) == 8 and len(series.length) == 8, (
            "every group of the file, from its reading pass"
        )
        chart = app.screen.query_one("#chart-reward")
        reward = "\n".join(inside_lines(app, chart))
        assert "mean reward" in chart.border_subtitle and "group" in reward and "reward" in reward
        assert not app.screen.query_one("#chart-rl").display, "rl's chart in rl only"
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "ChartsScreen"


def reward_chart(app) -> str:
    return "\n".join(inside_lines(app, app.screen.query_one("#chart-reward")))


async def test_a_resized_chart_is_drawn_anew_for_its_new_size():
    """A finished file's model never changes: its charts were drawn once, their ticks and points kept for the
    first size (and, under load, for a chart not yet laid out)."""
    fresh = viewer_app()
    async with fresh.run_test(size=(160, 48)) as pilot:
        await open_charts(pilot)
        expected = reward_chart(fresh)
    app = viewer_app()
    async with app.run_test(size=(80, 30)) as pilot:
        await open_charts(pilot)
        assert reward_chart(app) != expected, "drawn for its own size first"
        await pilot.resize_terminal(160, 48)
        await until(lambda: reward_chart(app) == expected, pilot=pilot, timeout=10)


async def test_a_viewed_file_sampled_at_several_temperatures_says_their_range(tmp_path):
    lines = FIXTURE.read_text().splitlines()
    cooled = tmp_path / "cooled.jsonl"
    groups = [
        {**json.loads(line), "generation_params": {"temperature": 0.3 if n > 3 else 1.0}}
        for n, line in enumerate(lines)
    ]
    cooled.write_text("".join(json.dumps(group) + "\n" for group in groups))
    app = viewer_app(cooled)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "T=0.30–1.00" in str(app.query_one("#status").render())


async def test_at_80x24_the_help_scrolls_to_its_last_key():
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        keys = app.screen.query_one("#help-keys")
        assert keys.max_scroll_y > 0, "more keys than rows"
        await pilot.press("end")
        await pilot.pause()
        assert keys.scroll_y == keys.max_scroll_y
        screen = "\n".join(screen_lines(app))
        assert "command palette" in screen, screen


async def test_the_log_rewraps_its_lines_when_its_panel_grows():
    app = viewer_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        long_lines = [
            LogRecord("WARNING", "test", f"a long line number {n} " + "word " * 12, 0.0)
            for n in range(5)
        ]
        app.model.apply(long_lines)
        app.tick()
        await idle(pilot)
        log = app.query_one("#log")
        narrow = len(log.lines)
        await pilot.resize_terminal(200, 30)
        await idle(pilot)
        assert 0 < len(log.lines) < narrow, "fewer, longer lines at the new width"
        assert sum("a long line number" in "".join(s.text for s in line) for line in log.lines) == 5


async def open_best_worst(pilot) -> None:
    await still(pilot)
    await pilot.press("b")
    await until(lambda: isinstance(pilot.app.screen, BestWorstScreen), pilot=pilot)
    await idle(pilot)


def test_snapshot_best_worst_screen(snap_compare):
    assert snap_compare(viewer_app(), terminal_size=(120, 40), run_before=open_best_worst)


async def test_b_shows_the_groups_best_and_worst_rollouts_side_by_side():
    app = viewer_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await open_best_worst(pilot)
        scores = app.dashboard.previewed.scores
        headers = {
            side: str(app.screen.query_one(f"#{side}-rollout #token-counts").render())
            for side in ("best", "worst")
        }
        assert (
            f"reward {max(scores):.3f}" in headers["best"]
            and f"reward {min(scores):.3f}" in headers["worst"]
        )
        texts = [
            app.screen.query_one(f"#{side}-rollout #token-text").plain for side in ("best", "worst")
        ]
        assert all("assistant" in t for t in texts) and texts[0] != texts[1]
        await pilot.press("f")
        await idle(pilot)
        assert all(
            app.screen.query_one(f"#{side}-rollout #token-text").plain.startswith("… ")
            for side in ("best", "worst")
        ), "f folds both prompts"
        await pilot.press("escape")
        assert not isinstance(app.screen, BestWorstScreen)


RUNS_HOME = Path(
    "/tmp/vftui-snapshot-runs"
)  # fixed, so the runs' paths and ids are the same on any machine


@pytest.fixture
def three_runs(monkeypatch) -> list[Path]:
    """Three finished runs of fixed paths, times and figures in the runs folder (the tests that use it
    run one at a time: conftest puts them in one xdist group, as each rebuilds the folder)."""
    shutil.rmtree(RUNS_HOME, ignore_errors=True)
    monkeypatch.setenv("XDG_DATA_HOME", str(RUNS_HOME))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    runs = [
        ("2026-12-01-sft", "sft", "vftui/alphabet-sort", 200, 200, 0.912),
        ("2026-12-02-eval", "eval", "vftui/alphabet-sort", 64, 0, 0.734),
        ("2026-12-03-stopped", "sft", "owner/reverse-text", 41, 100, 0.388),  # short of its steps
    ]
    yield [
        ended_run(
            RUNS_HOME / "vftui" / "runs" / name, env, mode, done, steps, reward, FIXED_CLOCK + day
        )
        for day, (name, mode, env, done, steps, reward) in enumerate(runs)
    ]
    time.tzset()


def test_snapshot_runs_screen(snap_compare, three_runs):
    """Three finished runs of fixed paths, times and figures, as the runs screen lists them."""
    assert snap_compare(RunsApp(), terminal_size=(140, 12))


@pytest.mark.parametrize("width", [80, 100])
async def test_the_runs_screen_keeps_reward_and_the_paths_end_on_a_narrow_terminal(
    three_runs, width
):
    app = RunsApp()
    async with app.run_test(size=(width, 12)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert all(len(line.rstrip()) <= width for line in lines)
        row = next(line for line in lines if "2026-12-03-stopped" in line)
        assert "0.388" in row and row.rstrip().endswith("2026-12-03-stopped/groups.jsonl"), row
        assert "REWARD" in lines[1] and "PATH" in lines[1]


async def test_the_runs_screen_names_one_key_for_attach_and_enter_attaches(three_runs):
    app = RunsApp()
    async with app.run_test(size=(140, 12)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        assert "enter attach" in lines[-1] and "a attach" not in "\n".join(lines), lines
        await pilot.press("down", "enter")
    assert app.return_value == ("attach", three_runs[1].resolve())


async def test_the_runs_filter_keeps_the_runs_that_match_and_says_what_it_cannot_read(three_runs):
    app = RunsApp()

    async def filter_by(*keys: str) -> None:
        """The box opened and ready before the keys: under load they could reach the list instead."""
        await pilot.press("slash")
        await until(lambda: isinstance(app.screen, PromptScreen), pilot=pilot)
        await pilot.press("ctrl+a", "ctrl+k", *keys, "enter")

    async with app.run_test(size=(140, 12)) as pilot:
        await filter_by(*"sft reward<0.5")
        await until(lambda: not isinstance(app.screen, PromptScreen), pilot=pilot)
        assert [line.out_path for line in app.lines] == [three_runs[2].resolve()]
        assert "1 of 3 runs match 'sft reward<0.5'" in screen_lines(app)[0]
        await filter_by(*"reward<<1")
        error = lambda: str(app.screen.query_one(".prompt-error").render())  # noqa: E731
        await until(lambda: app.screen.query(".prompt-error") and "cannot" in error(), pilot=pilot)
        assert "cannot read 'reward<<1'" in error()
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, PromptScreen), pilot=pilot)
        assert app.is_running and len(app.lines) == 1, "escape leaves the box, not the screen"
        await filter_by()
        await until(lambda: not isinstance(app.screen, PromptScreen), pilot=pilot)
        assert len(app.lines) == len(app.every) >= 2, "an empty filter shows every run it knows"


async def test_a_run_deleted_while_the_screen_is_open_leaves_the_list_and_names_are_shown_not_obeyed(
    three_runs,
):
    hostile = ended_run(
        RUNS_HOME / "vftui" / "runs" / "hostile",
        "x/\x1b]0;pwned\x07evil",
        "sft",
        1,
        2,
        0.5,
        FIXED_CLOCK + 5,
    )
    app = RunsApp()
    async with app.run_test(size=(140, 12)) as pilot:
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "\x1b" not in shown and "\x07" not in shown and "␛]0;pwned␇evil" in shown
        shutil.rmtree(hostile.parent)
        shutil.rmtree(three_runs[0].parent)
        app.refresh_runs()
        await pilot.pause()
        assert [line.out_path for line in app.lines] == [p.resolve() for p in three_runs[:0:-1]]


async def test_a_pager_setting_that_does_not_split_into_words_is_a_notice_not_a_crash(monkeypatch):
    monkeypatch.setenv("PAGER", "less '-R")
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await pilot.pause()
        assert [n.message for n in app._notifications] == [
            "$PAGER does not split into words (No closing quotation): fix it or unset it"
        ]
        assert app.is_running


async def test_the_number_column_is_as_wide_as_the_largest_number_shown_after_a_filter_and_an_order(
    tmp_path,
):
    """``/varied``, then ``o`` (hardest first): group 151 leads, group 1 ends the rows; 151 is shown whole."""
    base = json.loads(FIXTURE.read_text().splitlines()[3])
    path = tmp_path / "many.jsonl"
    lines = []
    for index in range(1, 161):
        scores = [0.0, 0.1, 0.2, 0.1] if index == 151 else [0.5, 0.6, 0.5, 0.6]
        lines.append(json.dumps({**base, "scores": [1.2, 0.9, 1.1, 1.0] if index == 1 else scores}))
    path.write_text("\n".join(lines) + "\n")
    app = viewer_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(lambda: read_through(app), pilot=pilot)
        await pilot.press("slash", *"varied", "enter")
        await until(lambda: app.model.filter_text == "varied", pilot=pilot)
        await pilot.press("o")
        await idle(pilot)
        rows = ["".join(s.text for s in app.dashboard.table.render_line(y)) for y in (1, 2)]
        assert rows[0].startswith("151 ") and rows[1].startswith("  2 "), rows


RUN_LINES = st.builds(
    RunLine,
    state=st.sampled_from(["running", "paused", "finished", "not answering"]),
    groups_done=st.integers(0, 10**6),
    groups_total=st.integers(0, 10**6),
    groups_per_s=st.floats(0, 1e3),
    out_path=st.text(
        st.characters(exclude_characters="\x00/", exclude_categories=["Cs"]),
        min_size=1,
        max_size=30,
    ).map(lambda t: Path("/runs") / t / "groups.jsonl"),
    created=st.floats(0, 4e9),
    env=st.text(max_size=20),
    mean_reward=st.none() | st.floats(-10, 10),
)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(st.lists(RUN_LINES, max_size=8), st.text(max_size=12))
def test_a_runs_filter_word_keeps_exactly_the_rows_that_hold_it(lines, word):
    word = re.sub(r"[\s<>=]", "", word).lower()  # one word, no comparison
    kept = [line for line in lines if run_filter(word)(line)]
    assert kept == [r for r in lines if any(word in cell.lower() for cell in cells(r))]
    assert [r for r in lines if run_filter("")(r)] == lines
    low = [r for r in lines if run_filter("reward<0.5")(r)]
    assert low == [r for r in lines if r.mean_reward is not None and r.mean_reward < 0.5]


@settings(max_examples=200, deadline=None)
@given(st.lists(RUN_LINES, max_size=8), st.integers(40, 300))
def test_the_runs_table_fits_the_width_it_is_given(lines, width):
    rows = [cells(line) for line in lines]
    shown, path_width = fit(rows, width)
    assert shown[-1] == COLUMNS.index("PATH") and COLUMNS.index("REWARD") in shown
    natural = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in shown[:-1]]
    if len(shown) > len(COLUMNS) - 5:  # columns left to drop: what is shown fits
        assert sum(n + 2 for n in natural) + path_width + 2 <= width


async def test_the_log_panel_keeps_no_more_lines_than_the_model_keeps_records():
    """A long run's drops and alerts are a log line each: the panel drops the oldest as the model does."""
    app = viewer_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for start in range(0, 3 * LOG_LINES, 100):
            app.model.apply(
                [LogRecord("WARNING", "test", f"drop {n}", 0.0) for n in range(start, start + 100)]
            )
            app.tick()
            await pilot.pause()
        log = app.query_one("#log")
        assert len(log.lines) <= LOG_LINES
        assert f"drop {3 * LOG_LINES - 1}" in "".join(s.text for s in log.lines[-1])
