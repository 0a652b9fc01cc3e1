"""The header's second line while a run collects: its path beside the request figures."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RATE_LIMITED_TRAFFIC
from vftui.events import Mode, RunStarted, RunState, RunStatus
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.status_bar import render_status, shorten_path

pytestmark = pytest.mark.unit
RUN = "20261204-231500-alphabet-sort"
PATH = f"/home/someone/.local/share/vftui/runs/{RUN}/groups.jsonl"


def collecting(path: str = PATH) -> DashboardModel:
    model = DashboardModel(clock=lambda: 0.0)
    started = RunStarted(
        Mode.SFT,
        "vftui/alphabet-sort",
        "m",
        "http://127.0.0.1:1/v1",
        True,
        path,
        300,
        0,
        8,
        1.0,
        [],
    )
    traffic = dataclasses.replace(
        RATE_LIMITED_TRAFFIC,
        ceiling=64,
        tokens_per_s=41_700,
        rate_limited=False,
        rate_limited_total=0,
    )
    model.apply([started, RunStatus(RunState.RUNNING, 120, 300), traffic])
    return model


@pytest.mark.parametrize("width", [100, 120, 160])
def test_the_request_figures_leave_the_path_its_run_folder(width):
    line = render_status(collecting(), width).plain.splitlines()[1]
    assert len(line) <= width and "in flight 12/64" in line, line
    assert f"/{RUN}/" in line, line


def test_a_wide_header_shows_every_request_figure_and_the_whole_path():
    line = render_status(collecting(), 240).plain.splitlines()[1]
    assert "p50 0.52 s p95 0.57 s · 41,700 tok/s" in line and PATH in line


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.text(min_size=1, max_size=300))
def test_any_width_and_path_stays_on_one_line_within_the_width(width, path):
    lines = render_status(collecting(path), width).plain.split("\n")
    assert len(lines) == 2 and len(shorten_path(path, width)) <= max(width, 1)


def test_a_path_cut_keeps_the_run_folder_whole_where_it_fits():
    assert shorten_path(PATH, 60) == "…" + PATH[-59:]
    assert shorten_path(PATH, 40) == f"…/{RUN}/…"
    assert shorten_path(PATH, 20) == "…" + PATH[-19:], "no room for the run folder: the path's end"
