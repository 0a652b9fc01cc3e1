"""The real Textual app over a real run in its collector process, driven by Pilot: keys must have effects."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import collector_process, read_jsonl, screen_lines, sim_admin, until
from vftui.config import RunConfig
from vftui.events import RunState
from vftui.live.process import CollectorProcess
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox
from vftui.ui.screens.confirm import ConfirmScreen
from vftui.ui.screens.prompt import PromptScreen
from vftui.ui.widgets.token_preview import TokenPreview, TokenText


@pytest.fixture
def make_app(paced_sim, tmp_path):
    """A dashboard over a real collector process; the process is closed even when a test fails
    (its app's worker waits on it, and the test's event loop would wait on the worker)."""
    runs: list[CollectorProcess] = []

    def make(**overrides) -> VftuiApp:
        settings = {
            "base_url": paced_sim.base_url,
            "group_size": 4,
            "concurrency": 8,
            "steps": 400,
            "out": tmp_path / "groups.jsonl",
            **overrides,
        }
        config = RunConfig(**{k: v for k, v in settings.items() if v is not None})
        inbox = Inbox()
        run = collector_process(config, inbox.put).start()
        runs.append(run)
        return VftuiApp(StartedRun(inbox, run), window=config.window)

    yield make
    for run in runs:
        run.close()


async def quit_app(pilot, app) -> None:
    await pilot.press("q")
    await until(
        pilot=pilot,
        predicate=lambda: (
            not app.is_running
            or app.screen.__class__.__name__ == "ConfirmScreen"
            or app.result is not None
        ),
    )
    if app.is_running and app.screen.__class__.__name__ == "ConfirmScreen":
        await pilot.press("y")
    await until(pilot=pilot, predicate=lambda: app.result is not None, timeout=60)


async def test_pause_key_holds_the_count_and_resumes(make_app, paced_sim, tmp_path):
    app = make_app()
    async with app.run_test(size=(200, 30)) as pilot:  # wide: every traffic figure and the path
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 2)
        await until(
            pilot=pilot, predicate=lambda: "req/s" in str(app.query_one("#status").render())
        )
        status = str(app.query_one("#status").render())
        assert re.search(
            r"in flight \d+/8 in \d+ groups? · [\d.]+ req/s · p50 [\d.]+ s p95 [\d.]+ s", status
        ), status
        await pilot.press("space")
        await until(pilot=pilot, predicate=lambda: app.model.state is RunState.PAUSED)
        assert "paused" in str(app.query_one("#status").render())
        said = [r.message for r in app.model.logs if r.message.startswith("run pausing")]
        assert said and re.fullmatch(r"run pausing: finishing \d+ groups? in flight", said[0]), said
        held = app.model.groups_done
        await pilot.pause(1.0)
        assert app.model.groups_done == held == len(read_jsonl(tmp_path / "groups.jsonl"))
        await pilot.press("p")
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= held + 2)
        await quit_app(pilot, app)


async def test_plus_key_reaches_the_endpoint_and_the_groups(make_app, paced_sim, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 1)
        await pilot.press("plus")
        assert "T=1.10" in str(app.query_one("#status").render()), "shown at once"
        changed_at = app.model.groups_done
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= changed_at + 3)
        await pilot.press("minus", "minus")
        assert app.controls.temperature == pytest.approx(0.9)

        def said() -> list[str]:  # each change a line of the log (the keys' own display hid them)
            return [r.message for r in app.model.logs if r.message.startswith("temperature")]

        await until(pilot=pilot, predicate=lambda: len(said()) == 3)
        assert [line.split()[2] for line in said()] == ["1.1", "1", "0.9"], said()
        await quit_app(pilot, app)
    requests = sim_admin(paced_sim, "/sim/requests")["requests"]
    assert 1.1 in [r["temperature"] for r in requests]
    temps = [g["generation_params"]["temperature"] for g in read_jsonl(tmp_path / "groups.jsonl")]
    assert temps[0] == 1.0 and 1.1 in temps
    first = temps.index(1.1)
    assert set(temps[:first]) == {1.0} and temps[-1] == pytest.approx(0.9), temps


async def test_dump_key_writes_exactly_the_window(make_app, paced_sim, tmp_path):
    app = make_app(window=4)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 6)
        await pilot.press("space")
        await until(pilot=pilot, predicate=lambda: app.model.state is RunState.PAUSED)
        await pilot.press("d")
        await until(
            pilot=pilot, predicate=lambda: any("dumped" in r.message for r in app.model.logs)
        )
        said = next(r.message for r in app.model.logs if "dumped" in r.message)
        window = [g["vftui"]["item"] for g in read_jsonl(tmp_path / "groups.jsonl")[-4:]]
        where = f"item={window[-1]}"  # what the filter shows is what d writes
        await pilot.press("slash", *where, "enter", "d")
        await until(
            pilot=pilot, predicate=lambda: any("that 'item=" in r.message for r in app.model.logs)
        )
        filtered_said = next(r.message for r in app.model.logs if "that 'item=" in r.message)
        await quit_app(pilot, app)
    dump, chosen = sorted(tmp_path.glob("dump-*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    assert said == f"dumped 4 groups to {dump}"
    assert read_jsonl(tmp_path / "groups.jsonl")[-4:] == read_jsonl(dump)
    assert read_jsonl(chosen) == [g for g in read_jsonl(dump) if g["vftui"]["item"] == window[-1]]
    n = window.count(window[-1])
    assert filtered_said == (
        f"dumped the {n} of 4 groups in memory that '{where}' shows to {chosen}"
    )


async def test_quit_leaves_a_complete_jsonl_and_a_checkpoint(make_app, paced_sim, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 3)
        await pilot.press("q")
        await until(
            pilot=pilot, predicate=lambda: app.screen.__class__.__name__ == "ConfirmScreen"
        )  # asks first
        await pilot.press("y")
        await until(pilot=pilot, predicate=lambda: app.result is not None)
    summary = app.return_value
    assert summary is not None and summary.state is RunState.FINISHED
    data = (tmp_path / "groups.jsonl").read_bytes()
    assert data.endswith(b"\n")
    lines = read_jsonl(tmp_path / "groups.jsonl")
    checkpoint = json.loads((tmp_path / "groups.checkpoint.json").read_text())
    assert checkpoint["groups"] == len(lines) == summary.groups_done
    assert sorted(g["vftui"]["item"] for g in lines) == list(range(len(lines))), (
        "the groups in flight were finished"
    )
    assert checkpoint["iter"] == checkpoint["done_below"] == len(lines)


async def test_ctrl_c_again_while_the_quit_question_is_up_stops_the_run(
    make_app, paced_sim, tmp_path
):
    """Ctrl-C, Ctrl-C: the second answers the question as y would, where it asked the same question again."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 2)
        await pilot.press("ctrl+c")
        await until(pilot=pilot, predicate=lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("ctrl+c")
        await until(pilot=pilot, predicate=lambda: app.result is not None, timeout=60)
        assert len(app.screen_stack) == 1, "no question left asked"
    summary = app.return_value
    assert summary is not None and summary.groups_done < summary.groups_total, (
        "stopped, not run to its end"
    )
    assert summary.groups_done == len(read_jsonl(tmp_path / "groups.jsonl"))


async def test_token_preview_counts_equal_the_masks(make_app, paced_sim, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 2)
        await pilot.press("space")
        await until(pilot=pilot, predicate=lambda: app.model.state is RunState.PAUSED)
        await until(pilot=pilot, predicate=lambda: app.dashboard.decoder.available)
        await pilot.press("k", "enter")
        counts = app.query_one(TokenPreview).query_one("#token-counts")
        await until(pilot=pilot, predicate=lambda: "rollout 2/" in str(counts.render()))
        group = app.dashboard.selected_group()
        header = str(counts.render())
        trained = int(re.search(r"trained (\d+)", header).group(1))
        masked = int(re.search(r"masked (\d+)", header).group(1))
        assert f"rollout 2/{len(group.tokens)}" in header
        assert trained == sum(m != -100 for m in group.masks[1])
        assert masked == sum(m == -100 for m in group.masks[1])
        body = app.query_one(TokenText).plain
        assert "<|im_start|>assistant" in body, "decoded with the run's tokenizer"
        await quit_app(pilot, app)


async def test_an_eval_shows_its_figures_narrowing_and_orders_its_items(make_app):
    app = make_app(
        mode="eval", num_examples=60, rollouts_per_example=4, group_size=None, concurrency=16
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            pilot=pilot,
            predicate=lambda: (report := app.model.eval_report) is not None and report.items >= 5,
        )
        assert not app.model.eval_report.final, (
            "a report a second while it runs, not only at the end"
        )
        early, early_items = app.model.eval_report.figures["reward"], app.model.eval_report.items
        assert app.dashboard.has_class("-eval") and "pass@4" in "\n".join(screen_lines(app))
        assert str(app.query_one("#status").render()).startswith("eval ")
        await until(
            pilot=pilot,
            predicate=lambda: app.model.eval_report is not None and app.model.eval_report.final,
            timeout=120,
        )
        final = app.model.eval_report
        assert final.items == final.items_total == 60
        # recomputed as examples come (whether it narrows between two samples is chance: five alike
        # items have a narrower interval than sixty varied ones)
        interval = (final.figures["reward"]["ci_low"], final.figures["reward"]["ci_high"])
        assert early_items < final.items and interval != (early["ci_low"], early["ci_high"])
        await pilot.press("o", "o")  # by the worst rollout
        shown = list(app.model.visible_groups())
        assert [min(g.scores) for g in shown] == sorted(min(g.scores) for g in shown)
        assert "worst rollout" in app.query_one("#rewards").border_title
        await quit_app(pilot, app)


async def test_the_palettes_quit_asks_and_stops_gracefully_as_q_does(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 2)
        await app.run_action("quit")  # what the command palette's Quit calls
        await until(pilot=pilot, predicate=lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")
        await until(pilot=pilot, predicate=lambda: app.result is not None, timeout=60)
    assert app.model.summary is not None and app.model.summary.groups_done == len(
        read_jsonl(tmp_path / "groups.jsonl")
    )


async def test_a_picked_group_stays_in_the_preview_after_it_leaves_the_window(make_app):
    app = make_app(window=8)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 4)
        await pilot.press("home")
        picked = app.dashboard.previewed
        assert picked is not None and app.dashboard.table.previewed == picked.index
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= picked.index + 12)
        assert picked.index not in [g.index for g in app.model.visible_groups()], (
            "it left the window"
        )
        assert app.dashboard.previewed is picked, "no key was pressed: the preview kept it"
        await pilot.press("end")
        await until(pilot=pilot, predicate=lambda: app.dashboard.previewed is not picked)
        await quit_app(pilot, app)


async def test_at_80_columns_the_footer_keeps_health_and_help(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 1)
        await pilot.pause()
        footer = screen_lines(app)[-1]
        for shown in ("quit", "pause", "dump", "filter", "health", "help"):
            assert shown in footer, footer
        await quit_app(pilot, app)


async def test_at_80x24_the_log_has_rows_and_a_panel_says_what_does_not_fit(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 1)
        await pilot.pause()
        assert app.query_one("#log").content_size.height >= 3, (
            "the turns gave their rows to the log"
        )
        panel = app.query_one("#functions")
        panel.styles.height = (
            4  # room for the header and two rows: reward and two functions do not fit
        )
        await pilot.pause()
        panel.show(app.model)
        await pilot.pause()
        rows, _ = panel.figures
        assert len(rows) == 2 and rows[-1][0] == "… 2 more (g charts them)", rows
        await quit_app(pilot, app)


async def test_a_quit_question_the_run_outlived_closes_and_its_keys_reach_no_screen_below(make_app):
    """q, the run finishes under the question, then / and q: / opened the filter under the dialog and q
    raised ScreenStackError, "the dashboard closed before the run ended" (it had ended)."""
    app = make_app(steps=12)
    async with app.run_test(size=(100, 30)) as pilot:
        # asked before any group ends: six at once (all in flight) once ended before q came, under load
        await until(pilot=pilot, predicate=lambda: app.model.run_started is not None)
        await pilot.press("q")
        await until(pilot=pilot, predicate=lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot=pilot, predicate=lambda: app.result is not None, timeout=60)
        await until(pilot=pilot, predicate=lambda: not isinstance(app.screen, ConfirmScreen))
        assert len(app.screen_stack) == 1, "the question closed, nothing left over it"
        await until(  # said on the dashboard, once the question has gone
            pilot=pilot,
            predicate=lambda: (
                "the run ended while you were asked: q closes the dashboard"
                in [n.message for n in app._notifications]
            ),
        )
        await pilot.press("slash")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("escape", "q")
    assert app.return_value is not None and app.return_value.state is RunState.FINISHED


async def test_keys_under_a_quit_question_go_to_the_question_alone(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 1)
        await pilot.press("q")
        await until(pilot=pilot, predicate=lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("slash", "g", "h", "question_mark")
        assert app.screen_stack[1:] == [app._quit_question], "no screen opened under or over it"
        await pilot.press("y", "q")  # q before the answered question has gone: no second dismissal
        await until(pilot=pilot, predicate=lambda: app.result is not None, timeout=60)
