"""A run that has ended is not steered: its controls refuse pause, temperature and stop with a sentence (in the
process, over the dashboard's pipe and over the run's socket alike), and the dashboard's q closes at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import collector_process, start_cli, until, wait_until
from tests.test_collector_process import _toasts
from vftui.collector.controls import Controls
from vftui.collector.gate import GroupGate
from vftui.collector.run import prepare
from vftui.config import RunConfig
from vftui.errors import RunEnded
from vftui.events import RunState, RunStatus
from vftui.live.client import AttachedRun, control
from vftui.run_controls import RunControls
from vftui.run_files.files import RunFiles
from vftui.run_files.store import GroupWindow
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import AttachedTo, StartedRun
from vftui.ui.inbox import Inbox
from vftui.ui.screens.prompt import PromptScreen

STEERING = {
    "pause": lambda c: c.toggle_pause(),
    "set temperature": lambda c: c.set_temperature(0.5),
    "nudge temperature": lambda c: c.nudge_temperature(0.1),
    "stop": lambda c: c.stop(),
}


STEPS = st.lists(st.sampled_from([*STEERING, "resume"]), max_size=12)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    before=STEPS,
    after=STEPS,
    state=st.sampled_from([RunState.FINISHED, RunState.FAILED]),
    done=st.integers(0, 3),
)
def test_controls_steer_a_run_until_it_ends_and_then_refuse_saying_how_it_ended(
    before, after, state, done
):
    events: list = []
    gate = GroupGate(3, 0, events.append)
    controls = Controls(gate, 1.0, GroupWindow(4), RunFiles(Path("unused.jsonl")), events.append)
    steer = {**STEERING, "resume": lambda c: c.resume()}
    for name in before:
        steer[name](controls)  # never refused while the run goes on
    gate.groups_done = done
    controls.end(state)
    ended = "failed" if state is RunState.FAILED else "finished" if done >= 3 else "stopped"
    said = len(events)
    for name in after:
        with pytest.raises(RunEnded, match=f"^the run has {ended}, so "):
            steer[name](controls)
    assert len(events) == said, "a refused call changes nothing and says nothing to the views"


def refuses_every_steer(controls: RunControls) -> None:
    for what, steer in [*STEERING.items(), ("stop again", STEERING["stop"])]:
        with pytest.raises(RunEnded, match="the run has finished"):
            steer(controls)
            pytest.fail(f"{what} was taken")


async def test_the_controls_of_a_finished_run_refuse_to_steer_it(sim, tmp_path):
    events: list = []
    run = prepare(
        RunConfig(base_url=sim.base_url, group_size=2, steps=2, out=tmp_path / "g.jsonl"),
        events.append,
    )
    try:
        summary = await run.execute()
        ended = len(events)
        refuses_every_steer(run.controls)
    finally:
        run.close()
    assert summary.state is RunState.FINISHED and run.controls.temperature == 1.0
    assert not [e for e in events[ended:] if isinstance(e, RunStatus)], (
        "the run's state did not change"
    )


def test_a_finished_run_refuses_its_dashboards_pipe_and_its_socket_alike(sim, tmp_path):
    out = tmp_path / "g.jsonl"
    run = collector_process(
        RunConfig(base_url=sim.base_url, group_size=2, steps=2, out=out), Inbox().put
    ).start()
    try:
        assert run.wait_summary().state is RunState.FINISHED
        refuses_every_steer(
            run.controls
        )  # the dashboard's pipe: the child lives on until the dashboard closes
        for steer in [
            *STEERING.values(),
            STEERING["stop"],
        ]:  # what an attached dashboard or `vftui runs` sends
            with pytest.raises(RunEnded, match="the run has finished"):
                control(RunFiles(out).socket, steer)
    finally:
        run.close()


async def test_keys_on_a_finished_run_say_why_they_do_nothing_and_q_quits_at_once(sim, tmp_path):
    config = RunConfig(base_url=sim.base_url, group_size=2, steps=2, out=tmp_path / "g.jsonl")
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    app = VftuiApp(StartedRun(inbox, run), window=config.window)
    try:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot=pilot, predicate=lambda: app.result is not None)
            await until(pilot=pilot, predicate=lambda: app.model.state is RunState.FINISHED)
            for key in ("space", "plus", "minus"):
                await pilot.press(key)
            await until(
                pilot=pilot, predicate=lambda: "the run has finished" in _toasts(app), timeout=5
            )
            await pilot.pause(0.3)
            assert app.model.state is RunState.FINISHED and app.model.temperature == 1.0
            await pilot.press("q")
            await until(pilot=pilot, predicate=lambda: not app.is_running, timeout=5)
    finally:
        run.close()
    assert app.return_value is not None and app.return_value.state is RunState.FINISHED


async def test_t_on_a_finished_run_says_why_and_opens_no_prompt(sim, tmp_path):
    config = RunConfig(base_url=sim.base_url, group_size=2, steps=2, out=tmp_path / "g.jsonl")
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    app = VftuiApp(StartedRun(inbox, run), window=config.window)
    try:
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot=pilot, predicate=lambda: app.model.state is RunState.FINISHED)
            await pilot.press("t")
            await until(
                pilot=pilot, predicate=lambda: "no group will be sampled" in _toasts(app), timeout=5
            )
            assert not isinstance(app.screen, PromptScreen), (
                "no temperature to type for a run that has ended"
            )
            await pilot.press("q")
    finally:
        run.close()


async def test_keys_on_an_attached_run_whose_process_ended_say_so_and_keep_its_temperature(
    sim, tmp_path
):
    out = tmp_path / "g.jsonl"
    process = start_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "40",
            "--group-size",
            "2",
            "--concurrency",
            "2",
            "--sim-latency",
            "0.05",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    try:
        wait_until(
            lambda: RunFiles(out).socket.exists() and out.exists() and out.stat().st_size,
            "the run began",
        )
        inbox = Inbox()
        attached = AttachedRun(RunFiles(out).socket, inbox.put).start()
        app = VftuiApp(AttachedTo(inbox, attached))
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await until(pilot=pilot, predicate=lambda: app.model.temperature == 1.0)
            assert process.wait(timeout=120) == 0
            await until(pilot=pilot, predicate=lambda: app.model.summary is not None)
            for key in ("space", "plus", "t"):
                await pilot.press(key)
            await until(
                pilot=pilot, predicate=lambda: "process has ended" in _toasts(app), timeout=5
            )
            assert not isinstance(app.screen, PromptScreen)
            assert app.model.temperature == 1.0, "the temperature it ran at, never an unknown one"
            await pilot.press("q")
        attached.close()
    finally:
        process.kill()
