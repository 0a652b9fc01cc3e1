"""The run's one subscriber list (``collector.bus``) and its one fold of the groups (``figures.run_tally``):
each subscriber hears every event in the stated order, keys scrubbed once; the run's summary, an attaching
dashboard and ``vftui runs`` read the same figures."""

from __future__ import annotations

import dataclasses
import itertools
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftui import events as ev
from vftui import stats
from vftui.collector.bus import ORDER, Bus
from vftui.figures.run_tally import RunTally
from vftui.live.server import Replay
from vftui.ui.model import DashboardModel

KEY = "sk-abcdefghijklmnopqrstuvwxyz0123"


def group(index: int, scores: list[float], ended: float = 0.0) -> ev.GroupCollected:
    n = len(scores)
    return ev.GroupCollected(
        index=index,
        item=index,
        example_id=index,
        scores=scores,
        metrics={"f": scores},
        turns=[1] * n,
        tokens=[[1, 2]] * n,
        masks=[[-100, 2]] * n,
        messages=[[]] * n,
        finish_reasons=["length" if s == 0.5 else "stop" for s in scores],  # cut at the cap
        temperature=1.0,
        started_at=ended,
        elapsed_s=0.0,
    )


def drop(index: int, reason: str = stats.TOO_EASY) -> ev.GroupDropped:
    return ev.GroupDropped(index, reason, [1.0, 1.0], {"f": [1.0, 1.0]}, [1, 1])


@pytest.mark.unit
@settings(max_examples=100, deadline=None)
@given(st.permutations(ORDER))
def test_subscribers_hear_each_event_in_the_stated_order_whenever_they_joined(joined):
    bus, heard = Bus(), []
    for place in joined:
        bus.subscribe(place, lambda event, place=place: heard.append(place))
    bus.emit(ev.TemperatureChanged(0.5))
    assert heard == list(ORDER)


@pytest.mark.unit
def test_the_key_is_scrubbed_once_for_all_but_a_groups_training_data():
    bus, heard = Bus(), []
    bus.key = KEY
    for place in ("drops", "view"):
        bus.subscribe(place, heard.append)
    kept = dataclasses.replace(group(1, [0.0, 1.0]), messages=[[{"role": "user", "content": KEY}]])
    bus.emit(ev.LogRecord("WARNING", "vftui", f"refused with key {KEY}"))
    bus.emit(kept)
    log, logged_again, collected, collected_again = heard
    assert log is logged_again and KEY not in log.message
    assert collected is kept and collected_again is kept


@pytest.mark.unit
def test_a_place_is_taken_once_and_only_a_named_one():
    bus = Bus()
    bus.subscribe("view", print)
    with pytest.raises(ValueError):
        bus.subscribe("view", print)
    with pytest.raises(ValueError):
        bus.subscribe("elsewhere", print)


@pytest.mark.unit
def test_a_subscriber_that_emits_is_heard_by_all_before_the_event_that_caused_it_goes_on():
    """A drop the drop log cannot write is said (a LogRecord) to everyone before the drop itself reaches them."""
    bus, view = Bus(), []

    def failing_drop_log(event: ev.Event) -> None:
        if isinstance(event, ev.GroupDropped):
            bus.emit(ev.LogRecord("WARNING", "vftui", "could not record a dropped group"))

    bus.subscribe("view", view.append)
    bus.subscribe("drops", failing_drop_log)
    bus.emit(drop(1))
    assert [type(e) for e in view] == [ev.LogRecord, ev.GroupDropped]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=4),
            st.sampled_from([stats.TOO_EASY, stats.TOO_HARD]),
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=30),
)
def test_the_tally_is_the_fold_of_every_group_the_resumed_ones_included(groups, resumed):
    events = [
        group(i, g) if isinstance(g, list) else drop(i, g) for i, g in enumerate(groups, start=1)
    ]
    before, live = events[:resumed], events[resumed:]
    tally, expected = RunTally(), stats.Accumulator()
    tally.history(
        [e for e in before if isinstance(e, ev.GroupCollected)],
        [e for e in before if isinstance(e, ev.GroupDropped)],
    )
    for event in live:
        tally.add(event)
    for event in [
        *(e for e in before if isinstance(e, ev.GroupCollected)),
        *(e for e in before if isinstance(e, ev.GroupDropped)),
        *live,
    ]:
        expected.add(event)
    reasons = [e.reason for e in events if isinstance(e, ev.GroupDropped)]
    finishes = [f for e in events if isinstance(e, ev.GroupCollected) for f in e.finish_reasons]
    assert tally.metrics() == expected.metrics()
    assert tally.truncated() == (finishes.count("length"), len(finishes))
    assert tally.dropped() == {r: reasons.count(r) for r in set(reasons)}
    assert tally.so_far().totals.metrics() == expected.metrics()
    assert tally.so_far().dropped == tally.dropped()


@pytest.mark.unit
def test_an_attached_dashboard_counts_a_resumed_runs_drops_as_its_summary_does():
    """Before the one tally the replay counted the drops of this process only, while its totals (copied from
    the run's) held the resumed ones too: a resumed run's dashboard showed fewer drops than its summary."""
    tally = RunTally()
    tally.history([group(1, [0.0, 1.0])], [drop(2)])
    replay = Replay(4, tally)
    replay.add(drop(3, stats.TOO_HARD))
    attached = DashboardModel()
    attached.apply(replay.events())
    assert attached.dropped == tally.dropped() == {stats.TOO_EASY: 1, stats.TOO_HARD: 1}
    assert attached.run_metrics() == tally.metrics()


@pytest.mark.unit
def test_a_dashboard_attaching_while_groups_arrive_counts_each_once():
    """The socket folds the tally with its replay under one lock: a replay taken between two groups and
    the groups after it, folded, give the run's own figures."""
    tally = RunTally()
    replay, lock = Replay(4, tally), threading.Lock()
    groups = [group(i, [float(i % 3 == 0), 1.0], ended=float(i)) for i in range(1, 301)]
    snapshots: list[tuple[list[ev.Event], int]] = []

    def publish() -> None:
        for event in groups:
            with lock:
                replay.add(event)

    def attach() -> None:
        for _ in itertools.repeat(None, 50):
            with lock:
                snapshots.append(
                    (replay.events(), max((g.index for g in replay.groups), default=0))
                )

    threads = [threading.Thread(target=publish), threading.Thread(target=attach)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for events, last in snapshots:
        attached = DashboardModel()
        attached.apply([*events, *groups[last:]])
        assert attached.run_metrics() == tally.metrics()
