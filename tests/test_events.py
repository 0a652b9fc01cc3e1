"""Every kind of event reaches every consumer: the dashboard's model, an attaching dashboard's replay,
the headless lines, ``--json`` and the health monitor. Each consumer names every kind (it ends in
``assert_never``), so a new event that one of them forgets fails here, not silently on screen."""

from __future__ import annotations

import io
import json
import math
import typing

import pytest

from vftui import events as ev
from vftui import stats
from vftui.collector.health import HealthMonitor
from vftui.commands.headless import HeadlessView
from vftui.figures.run_tally import RunTally
from vftui.live.server import Replay
from vftui.text import wording
from vftui.text.json_lines import to_json_line
from vftui.ui.model import DashboardModel

pytestmark = pytest.mark.unit

GROUP = ev.GroupCollected(
    index=1,
    item=0,
    example_id=0,
    scores=[0.0, 1.0],
    metrics={"f": [0.0, 1.0]},
    turns=[1, 2],
    tokens=[[1, 2], [3]],
    masks=[[-100, 2], [3]],
    messages=[[], []],
    finish_reasons=["stop", "length"],
    temperature=1.0,
    started_at=1.0,
    elapsed_s=0.5,
)
SAMPLES: list[ev.Event] = [
    ev.RunStarted(
        ev.Mode.SFT, "env", "model", "simulated", True, "/tmp/groups.jsonl", 10, 0, 2, 1.0, ["f"]
    ),
    GROUP,
    ev.MetricsWindow(1, {"metrics/mean_reward": 0.5}),
    ev.FileProgress(1, 10, 100, stats.Accumulator(), [0.5], [0.0]),
    ev.RunSoFar(stats.Accumulator(), {"too hard": 1}),
    ev.RunStatus(ev.RunState.RUNNING, 1, 10),
    ev.EndpointTrouble(1, 6, "refused", 0.5),
    ev.RequestStats(2, 32, 32, 1, 3.0, 40.0, 0.1, 0.2, False),
    ev.GroupDropped(1, "all scores equal", [1.0, 1.0], {"f": [1.0, 1.0]}, [1, 1]),
    ev.ApiStatus(
        "http://127.0.0.1:8000", True, envs=(ev.EnvShare("/tmp/g.jsonl", 0, 1.0, 2, 1, 3, 0),)
    ),
    ev.ServerStatus("http://127.0.0.1:9000/v1", True, 3, 0, 0.1, 0.2),
    ev.Health(8, {"stop": 8}, 10.0, 12.0, {}, 0.5, 0.5, 0.1, 0.2, 40.0, {"identical": 0.1}, []),
    ev.Alert("truncated", 0.5, 0.2, True, "half the rollouts were cut"),
    ev.EvalReport(
        3,
        10,
        2,
        0.5,
        {"reward": {"mean": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n": 3}},
        {"format_ok": {"mean": math.nan, "ci_low": None, "ci_high": None, "n": 0}},
        final=True,
        step=4,
    ),
    ev.TemperatureChanged(0.7),
    ev.GroupsDumped("/tmp/dump.jsonl", 2, 5, "reward>0.5"),
    ev.LogRecord("WARNING", "vftui", "a line"),
    ev.RunSummary(
        ev.RunState.FINISHED, 10, 10, "/tmp/groups.jsonl", 1.5, {"metrics/mean_reward": 0.5}
    ),
]


def test_the_samples_cover_every_kind_of_event():
    assert {type(e) for e in SAMPLES} == set(typing.get_args(ev.Event))


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_every_consumer_takes_every_kind_of_event(event):
    model = DashboardModel()
    model.apply([event])
    replay = Replay(4, RunTally())
    replay.add(event)
    assert all(isinstance(e, typing.get_args(ev.Event)) for e in replay.events())
    view = HeadlessView(json_events=True, err=io.StringIO(), out=io.StringIO())
    view(event)
    assert json.loads(view.out.getvalue())["event"] == type(event).__name__
    assert json.loads(to_json_line(event))["event"] == type(event).__name__
    HealthMonitor(4, 100, {"f": 1.0}).observe(event)


def test_an_attaching_dashboard_sees_what_one_watching_from_the_start_saw():
    """The replay of every sample, folded, gives the model the same run figures and state."""
    watched, attached, replay = DashboardModel(), DashboardModel(), Replay(4, RunTally())
    for event in SAMPLES:
        if isinstance(event, (ev.FileProgress, ev.RunSoFar)):
            continue  # a file's and a replay's own
        watched.apply([event])
        replay.add(event)
    attached.apply(replay.events())
    assert attached.run_metrics() == watched.run_metrics()
    assert (attached.state, attached.groups_done, attached.temperature) == (
        watched.state,
        watched.groups_done,
        watched.temperature,
    )
    assert (
        attached.alerts.keys() == watched.alerts.keys()
        and attached.servers.keys() == watched.servers.keys()
    )


def test_a_kind_of_event_nobody_named_is_an_error_not_silence():
    class Unheard:
        pass

    with pytest.raises(AssertionError):
        DashboardModel()._apply(Unheard())
    with pytest.raises(AssertionError):
        Replay(4, RunTally()).add(Unheard())
    with pytest.raises(AssertionError):
        HeadlessView(json_events=False, err=io.StringIO()).line_for(Unheard())
    with pytest.raises(AssertionError):
        HealthMonitor(4, 100, {}).observe(Unheard())


def test_a_retry_says_its_attempt_out_of_the_limit_or_alone_when_there_is_none():
    endpoint = wording.trouble(ev.EndpointTrouble(3, 6, "refused", 1.25))
    api = wording.trouble(ev.EndpointTrouble(3, 0, "refused", 2.0, ev.TRAJECTORY_API))
    assert endpoint == "endpoint error (attempt 3/6): refused; retrying in 1.2 s"
    assert api == "trajectory API error (attempt 3): refused; retrying in 2.0 s"
