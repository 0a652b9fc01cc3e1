"""Small things the dashboard says: a pause taken while the run starts, temperature changes in its log,
an attached run's mark."""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Iterator

import httpx
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import screen_lines, serve_app, until
from tests.test_dashboard import make_app, quit_app  # noqa: F401 - the fixture
from vftui.events import EvalReport, Mode, RunStarted, RunState, RunStatus, TemperatureChanged
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.eval_panel import render_eval
from vftui.ui.widgets.status_bar import render_status


@pytest.fixture
def held_endpoint(slow_sim) -> Iterator[tuple[str, threading.Event]]:
    """An endpoint whose model list (asked while the run is prepared) waits until the event is set, then is the
    simulated endpoint's: the run is still starting for as long as the test needs."""
    release = threading.Event()

    async def models(request: web.Request) -> web.Response:
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 8)
        return web.json_response(httpx.get(f"{slow_sim.base_url}/models", timeout=10).json())

    app = web.Application()
    app.router.add_get("/v1/models", models)
    with serve_app(app) as base_url:
        yield base_url, release
        release.set()


async def test_a_pause_while_the_run_starts_is_shown_at_once(make_app, held_endpoint):  # noqa: F811
    base_url, release = held_endpoint
    app = make_app(base_url=base_url)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.model.state is RunState.STARTING
        await pilot.press("space")
        release.set()  # the pause was taken while the run started; now let it finish starting
        status = str(app.query_one("#status").render()).splitlines()[1]
        assert status.startswith("paused"), status
        said = [r.message for r in app.model.logs]
        assert any(m.startswith("paused before the first group") for m in said), said
        await until(pilot=pilot, predicate=lambda: app.model.state is RunState.PAUSED)
        await pilot.pause(1.0)
        assert app.model.groups_done == 0, "no group started"
        await quit_app(pilot, app)


@pytest.mark.unit
def test_the_steps_of_a_start_keep_saying_the_pause_taken():
    """A start's steps come as RunStatus(STARTING, step) after the key: each would read "starting"."""
    model = DashboardModel(clock=lambda: 0.0)
    model.pause_asked = True
    model.apply([RunStatus(RunState.STARTING, 0, 0, "loading the tokenizer")])
    assert render_status(model).plain.splitlines()[1].startswith("paused before the first group")
    model.apply([RunStatus(RunState.PAUSED, 0, 9)])
    assert not model.pause_asked and render_status(model).plain.splitlines()[1].startswith("paused")


@pytest.mark.unit
def test_a_temperature_change_is_a_line_of_the_log_and_an_attached_run_is_marked():
    model = DashboardModel(clock=lambda: 0.0)
    started = RunStarted(
        Mode.SFT, "e", "m", "http://127.0.0.1:1/v1", False, "g.jsonl", 9, 0, 2, 1.0, []
    )
    model.apply([started, RunStatus(RunState.RUNNING, 0, 9), TemperatureChanged(1.1)])
    assert [r.message for r in model.logs][-1] == "temperature -> 1.1 (from the next group)"
    assert "ATTACHED" not in render_status(model).plain
    model.attached = True
    assert "ATTACHED" in render_status(model).plain.splitlines()[0]
    for width in (1, 20, 400):
        assert len(render_status(model, width).plain.splitlines()) == 2


async def test_the_eval_panels_tracks_take_the_width_it_has_at_160_columns(make_app):  # noqa: F811
    app = make_app(
        mode="eval", num_examples=40, rollouts_per_example=2, group_size=None, concurrency=16
    )
    async with app.run_test(size=(160, 40)) as pilot:
        await until(
            pilot=pilot,
            predicate=lambda: (report := app.model.eval_report) is not None and report.items >= 3,
        )
        await pilot.pause(0.3)
        (row,) = [line for line in screen_lines(app) if "│ pass@1 " in line]
        track = re.search(r"[─━●]+", row.split("│ pass@1 ")[1].split("│")[0])
        assert track is not None and len(track.group()) >= 20, row
        await quit_app(pilot, app)


BAD = [math.nan, math.inf, -math.inf, 1e308, -1e308, 0.0, 1.0, None]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(BAD), st.sampled_from(BAD), st.sampled_from(BAD)), max_size=6
    ),
    st.integers(0, 500),
)
def test_the_eval_panel_draws_any_figures_at_any_width(figures, width):
    report = EvalReport(
        items=3,
        items_total=10,
        rollouts_per_item=2,
        threshold=0.5,
        figures={
            f"pass@{i}": {"mean": m, "ci_low": lo, "ci_high": hi, "n": 3}
            for i, (m, lo, hi) in enumerate(figures)
        },
        functions={},
    )
    lines = render_eval(report, width).plain.splitlines()
    assert len(lines) == 1 + len(figures)
