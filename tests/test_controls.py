"""Controls drive a real run with no UI: pause, temperature, dump, stop."""

from __future__ import annotations

import asyncio
import threading
import time
from multiprocessing import Pipe
from pathlib import Path

import pytest

from tests.conftest import read_jsonl, sim_admin, until
from vftui.collector.controls import Controls
from vftui.collector.gate import GroupGate
from vftui.collector.run import prepare
from vftui.config import RunConfig
from vftui.errors import RunEnded, Unanswered
from vftui.events import (
    GroupCollected,
    GroupsDumped,
    Health,
    RunState,
    RunStatus,
    TemperatureChanged,
)
from vftui.live.wire import RemoteControls, serve_commands
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE
from vftui.run_files.files import RunFiles
from vftui.run_files.store import GroupWindow
from vftui.sim.server import BackgroundSimServer


def start(sim, tmp_path, **overrides):
    events: list = []
    config = RunConfig(
        base_url=sim.base_url, group_size=4, steps=500, out=tmp_path / "groups.jsonl", **overrides
    )
    run = prepare(config, events.append)
    task = asyncio.ensure_future(run.execute())
    return run, task, events


def idle_controls(groups_total: int, folder: Path) -> Controls:
    """The controls of a run that collects nothing: what they do by themselves."""
    ignore = [].append
    files = RunFiles(folder / "groups.jsonl")
    return Controls(GroupGate(groups_total, 0, ignore), 1.0, GroupWindow(8), files, ignore)


def states(events) -> list[RunState]:
    return [e.state for e in events if isinstance(e, RunStatus)]


async def test_pause_holds_the_group_count_and_resume_continues(slow_sim, tmp_path):
    run, task, events = start(slow_sim, tmp_path)
    controls = run.controls
    await until(lambda: run.gate.groups_done >= 2)
    seen = len(events)
    controls.pause()
    await until(lambda: states(events)[-1] is RunState.PAUSED)
    after = [e for e in events[seen:] if isinstance(e, RunStatus)]
    pausing = after[0]
    assert pausing.state is RunState.PAUSING, (
        "groups were in flight (ten of four at --concurrency 32)"
    )
    in_flight = int(pausing.detail.split()[1])
    assert in_flight > 1 and pausing.detail == f"finishing {in_flight} groups in flight"
    assert after[-2].detail == "finishing 1 group in flight", (
        "the status counts down to the last group"
    )
    held = run.gate.groups_done
    assert held == pausing.groups_done + in_flight, "every group in flight finished and was kept"
    requests_before = sim_admin(slow_sim, "/sim/requests")["total"]
    ticks = sum(isinstance(e, Health) for e in events)
    await until(
        lambda: sum(isinstance(e, Health) for e in events) >= ticks + 2
    )  # the run's own clock, twice
    assert run.gate.groups_done == held
    assert len(read_jsonl(tmp_path / "groups.jsonl")) == held
    assert sim_admin(slow_sim, "/sim/requests")["total"] == requests_before, (
        "no request while paused"
    )
    controls.resume()
    await until(lambda: run.gate.groups_done >= held + 2)
    assert RunState.RUNNING in states(events)[-3:]
    controls.stop()
    summary = await task
    assert summary.state is RunState.FINISHED and summary.groups_done < 500
    run.close()


async def test_temperature_change_reaches_the_endpoint_and_the_groups(slow_sim, tmp_path):
    run, task, events = start(slow_sim, tmp_path)
    controls = run.controls
    await until(lambda: run.gate.groups_done >= 1)
    changed_at = time.time()
    assert controls.set_temperature(0.3) == 0.3
    await until(
        lambda: (
            sum(1 for e in events if isinstance(e, GroupCollected) and e.temperature == 0.3) >= 3
        )
    )
    controls.stop()
    await task
    run.close()
    temperatures = [r["temperature"] for r in sim_admin(slow_sim, "/sim/requests")["requests"]]
    assert temperatures[0] == 1.0 and 0.3 in temperatures
    groups = [e for e in events if isinstance(e, GroupCollected)]
    assert groups[0].temperature == 1.0
    # groups in flight at the change keep their temperature; every group started after it has the new one
    assert all(g.temperature == (0.3 if g.started_at > changed_at else 1.0) for g in groups)
    lines = read_jsonl(tmp_path / "groups.jsonl")
    assert [g["generation_params"]["temperature"] for g in lines] == [g.temperature for g in groups]
    assert any(isinstance(e, TemperatureChanged) and e.temperature == 0.3 for e in events)
    with pytest.raises(ValueError):
        controls.set_temperature(2.5)
    with pytest.raises(RunEnded):  # the run has stopped: no group would use it
        controls.nudge_temperature(+5)


@pytest.mark.unit
def test_a_nudge_is_clamped_to_the_temperature_range(tmp_path):
    controls = idle_controls(1, tmp_path)
    assert controls.nudge_temperature(+5) == MAX_TEMPERATURE
    assert controls.nudge_temperature(-5) == MIN_TEMPERATURE


@pytest.mark.unit
async def test_a_pause_from_another_thread_holds_the_gate_and_a_second_stop_forces_it(tmp_path):
    """The user's controls and the collector's gate meet under one lock: the group in flight finishes,
    no other starts until the resume; a stop closes the gate, the second one cancels the flight."""
    events: list = []
    forced = threading.Event()
    gate = GroupGate(10, 0, events.append)
    controls = Controls(gate, 1.0, GroupWindow(4), tmp_path, events.append)
    gate.bind(asyncio.get_running_loop(), on_force_stop=forced.set)
    assert await gate.claim_group()
    await asyncio.to_thread(controls.pause)
    held = asyncio.ensure_future(gate.claim_group())
    await asyncio.sleep(0.1)
    gate.group_finished(written=True)
    await asyncio.sleep(0.1)
    assert not held.done() and gate.groups_done == 1 and gate.in_flight == 0
    await asyncio.to_thread(controls.resume)
    assert await asyncio.wait_for(held, 5) and gate.in_flight == 1
    await asyncio.to_thread(controls.stop)
    assert not await gate.claim_group() and not forced.is_set()
    await asyncio.to_thread(controls.stop)
    assert forced.is_set()
    assert [(e.state, e.detail) for e in events if isinstance(e, RunStatus)] == [
        (RunState.PAUSING, "finishing 1 group in flight"),
        (RunState.PAUSED, ""),
        (RunState.RUNNING, ""),
        (RunState.STOPPING, "finishing 1 group in flight"),
    ]


async def test_dump_writes_exactly_the_window(slow_sim, tmp_path):
    run, task, events = start(slow_sim, tmp_path, window=3)
    controls = run.controls
    await until(lambda: run.gate.groups_done >= 5)
    controls.pause()
    await until(lambda: states(events)[-1] is RunState.PAUSED)
    path = controls.dump()
    again = controls.dump(path)
    last_item = read_jsonl(path)[-1]["vftui"]["item"]
    chosen = controls.dump(where=f"item={last_item}")  # what the dashboard's filter shows
    with pytest.raises(ValueError, match="cannot read"):
        controls.dump(where="reward>>1")
    controls.stop()
    await task
    run.close()
    written = read_jsonl(tmp_path / "groups.jsonl")
    assert read_jsonl(path) == written[-3:]
    assert again != path and read_jsonl(again) == written[-3:], "a dump never overwrites"
    assert read_jsonl(chosen) == [g for g in written[-3:] if g["vftui"]["item"] == last_item]
    dumps = [e for e in events if isinstance(e, GroupsDumped)]
    assert [(e.groups, e.of, e.where) for e in dumps] == [
        (3, 3, ""),
        (3, 3, ""),
        (len(read_jsonl(chosen)), 3, f"item={last_item}"),
    ]


ANSWER_AFTER_S = 60.0
"""The endpoint's latency: a stop that waits for the group in flight waits this long."""


async def test_second_stop_cancels_the_group_in_flight(tmp_path):
    """The bound tells a stop that cancels the group from one that waits for its answer (a minute): far above
    what a loaded machine adds to a cancel, so load never fails it."""
    server = BackgroundSimServer(seed=0, latency_s=ANSWER_AFTER_S).start()
    try:
        run, task, _events = start(server, tmp_path)
        await until(lambda: sim_admin(server, "/sim/requests")["total"] >= 1)
        started = time.monotonic()
        run.controls.stop()
        run.controls.stop()
        summary = await task
        took = time.monotonic() - started
        assert took < ANSWER_AFTER_S / 2, f"the in-flight group was waited for ({took:.0f} s)"
        assert summary.groups_done == 0
        run.close()
    finally:
        server.stop()


@pytest.mark.serial  # the peak in flight needs the groups to overlap, which a loaded machine can prevent
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--concurrency", "2"], 2),
        (["--concurrency", "12"], 12),  # two groups of six at once
        ([], 32),  # the default: 32 requests, across the six groups
    ],
    ids=["2", "12", "default"],
)
def test_concurrency_caps_requests_in_flight_across_groups(tmp_path, extra, expected):
    from tests.conftest import run_cli

    server = BackgroundSimServer(seed=0, latency_s=0.3).start()
    try:
        args = [
            "run",
            "--no-ui",
            "--steps",
            "6",
            "--group-size",
            "6",
            "--base-url",
            server.base_url,
            "--out",
            str(tmp_path / "groups.jsonl"),
        ]
        assert run_cli([*args, *extra], tmp_path).returncode == 0
        assert sim_admin(server, "/sim/requests")["max_in_flight"] == expected
    finally:
        server.stop()


async def test_a_pause_pressed_while_the_run_starts_holds_and_says_paused(slow_sim, tmp_path):
    events: list = []
    run = prepare(
        RunConfig(
            base_url=slow_sim.base_url, group_size=4, steps=50, out=tmp_path / "groups.jsonl"
        ),
        events.append,
    )
    run.controls.pause()  # as a key pressed while the dashboard said "starting"
    task = asyncio.ensure_future(run.execute())
    await until(lambda: RunState.STARTING in states(events[1:]))
    await asyncio.sleep(1.0)
    assert states(events)[-1] is RunState.PAUSED, states(events)
    assert RunState.RUNNING not in states(events) and run.gate.groups_done == 0
    run.controls.resume()
    await until(lambda: run.gate.groups_done >= 2)
    run.controls.stop()
    assert (await task).state is RunState.FINISHED
    run.close()


def test_a_key_the_run_answers_late_says_so_and_is_still_carried_out(tmp_path):
    """A busy collector (still loading, or stuck): the key says it was not answered, never seems to do nothing."""
    dashboard_end, collector_end = Pipe()
    controls = idle_controls(4, tmp_path)
    remote = RemoteControls(dashboard_end, temperature=1.0, reply_timeout_s=0.2)

    answering = threading.Event()

    def busy_then_serving() -> None:
        answering.wait(timeout=60)  # busy until both calls have gone unanswered
        serve_commands(collector_end, controls)

    collector = threading.Thread(target=busy_then_serving, daemon=True)
    collector.start()
    with pytest.raises(
        Unanswered, match=r"did not answer within 0\.2 s; it may still pause or resume"
    ):
        remote.toggle_pause()
    with pytest.raises(Unanswered, match="it may still change the temperature"):
        remote.set_temperature(0.5)
    answering.set()
    assert remote.temperature == 0.5 and controls.paused, (
        "both were carried out once the run answered"
    )
    dashboard_end.close()
    collector.join(timeout=10)
    assert not collector.is_alive()
