"""The one rate every view shows (``stats.Throughput``): right after a pause, in a run's first
second, and whatever the end times."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftui.stats import IDLE_FLOOR_S, IDLE_GAPS, RATE_MIN_SPAN_S, Throughput

pytestmark = pytest.mark.unit


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(0.05, 200.0),
    before=st.integers(2, 300),
    after=st.integers(1, 80),
    pause=st.floats(1.05, 1e5),
)
def test_a_pause_inside_the_window_leaves_the_rate_as_it_was(rate, before, after, pause):
    """Groups every 1/rate s, a pause (any length an idle gap is), then more: still ``rate``."""
    gap = 1 / rate
    idle = max(IDLE_FLOOR_S, IDLE_GAPS * gap) * pause
    # beyond the first seconds' floor: made so, not filtered (at high rates most draws fell short)
    before = max(before, math.floor(3 * RATE_MIN_SPAN_S / gap) + 1 - after)
    meter, end = Throughput(), 1000.0
    for _ in range(before):
        end += gap
        meter.add(end, 10)
    end += idle  # paused: no group in flight
    for _ in range(after):
        end += gap
        meter.add(end, 10)
    groups_s, tokens_s = meter.rates(end + gap / 2, collecting=True)
    assert groups_s == pytest.approx(rate, rel=0.05) and tokens_s == pytest.approx(
        10 * rate, rel=0.05
    )


def test_the_rate_right_after_a_resume_is_the_rate_before_the_pause():
    """The issue's case: 5 groups/s, 30 s paused, one group since the resume (it read 0.72)."""
    meter, end = Throughput(), 0.0
    for _ in range(63):
        end += 0.2
        meter.add(end, 100)
    end += 30.0
    meter.add(end + 0.2, 100)
    assert meter.rates(end + 0.3, collecting=True)[0] == pytest.approx(5.0, rel=0.05)


@settings(max_examples=200, deadline=None)
@given(
    groups=st.integers(2, 64),
    within=st.floats(0.0, 0.5),
    start=st.floats(0.0, 2e9),
)
def test_a_runs_first_groups_ending_together_never_read_as_a_burst(groups, within, start):
    """The first groups end within moments of each other (it read 58 g/s): the span is at least its floor."""
    meter = Throughput()
    for i in range(groups):
        meter.add(start + within * i / groups, 10)
    groups_s, _ = meter.rates(start + within, collecting=True)
    assert groups_s <= groups / RATE_MIN_SPAN_S + 1e-9


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1e12, 1e12), st.integers(0, 10**9)), max_size=300),
    st.floats(-1e12, 1e12),
)
def test_any_end_times_give_a_finite_rate_never_negative(marks, now):
    meter = Throughput()
    for end, tokens in marks:
        meter.add(end, tokens)
    for value in meter.rates(now, collecting=True):
        assert math.isfinite(value) and value >= 0


@settings(max_examples=200, deadline=None)
@given(
    groups=st.integers(1, 64),
    took=st.floats(0.05, 600.0),
    within=st.floats(0.0, 0.01),
    start=st.floats(0.0, 2e9),
)
def test_groups_in_flight_together_count_over_the_time_since_they_started(
    groups, took, within, start
):
    """``groups`` started together and ended together after ``took`` s: the rate is groups/took, not a
    burst (timed from the first end alone) nor groups over a floor."""
    meter = Throughput()
    for i in range(groups):
        meter.add(start + took + within * i / groups, 10, start)
    last = start + took + within * (groups - 1) / groups
    groups_s, tokens_s = meter.rates(last, collecting=True)
    assert groups_s == pytest.approx(groups / (last - start), rel=1e-6)
    assert tokens_s == pytest.approx(10 * groups / (last - start), rel=1e-6)


def test_a_fast_runs_first_groups_read_its_rate_not_a_ramp():
    """Four groups in 0.3 s (the simulation) read 0.00, 0.50, 1.00, 1.50 g/s under the floor: now about
    13 g/s from the second group on."""
    meter, read = Throughput(), []
    for i in range(4):
        meter.add(0.075 * (i + 1), 1, 0.075 * i)
        read.append(meter.rates(0.075 * (i + 1), collecting=True)[0])
    assert read == pytest.approx([1 / 0.075] * 4, rel=1e-6)
