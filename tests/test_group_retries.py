"""A group's rollouts tried again (``GroupRetries``), without an env or an endpoint: what each failed
attempt reports, when the tries run out, what is never retried, and a stop that ends them."""

from __future__ import annotations

import asyncio

import pytest

from vftui.collector import group_retries
from vftui.collector.envs.base import Rollout
from vftui.collector.gate import GroupGate
from vftui.collector.group_retries import GroupRetries
from vftui.errors import RunFailed
from vftui.events import EndpointTrouble

pytestmark = pytest.mark.unit


def rollout(error: str | None = None) -> Rollout:
    return Rollout([], 1.0, {}, 1, ["stop"], error=error)


class Scripted:
    """A mode's rollouts whose attempts answer in turn: a group's rollouts, or an exception raised."""

    logprobs = False

    def __init__(self, *answers: list[Rollout] | BaseException, during=lambda: None) -> None:
        self.answers = list(answers)
        self.during = during  # called inside each attempt (a stop pressed meanwhile)
        self.attempts = 0

    async def attempt(self, item, temperature):
        self.attempts += 1
        self.during()
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def time_limit_s(self):
        return None


@pytest.fixture(autouse=True)
def no_waits(monkeypatch):
    monkeypatch.setattr(group_retries, "backoff_seconds", lambda attempt: 0.0)


async def test_an_errored_or_short_group_is_tried_again_and_each_try_reported():
    events = []
    whole = [rollout(), rollout()]
    mode = Scripted([rollout("HTTP 502"), rollout()], [rollout()], whole)
    got = await GroupRetries(5, events.append, None).rollouts(mode, {}, 1.0, 2)
    assert got == whole
    assert events == [
        EndpointTrouble(1, 6, "HTTP 502", 0.0, "endpoint"),
        EndpointTrouble(2, 6, "1 of 2 rollouts returned", 0.0, "endpoint"),
    ]


async def test_the_last_try_failing_fails_the_run_with_its_error():
    events = []
    mode = Scripted(ValueError("boom"), ValueError("again"))
    with pytest.raises(RunFailed, match=r"failed 2 times in a row; last error: ValueError: again"):
        await GroupRetries(1, events.append, None).rollouts(mode, {}, 1.0, 1)
    assert [e.attempt for e in events] == [1]


async def test_what_the_rollouts_ran_on_being_gone_is_never_retried():
    events = []
    mode = Scripted(RunFailed("the env server exited"), [rollout()])
    with pytest.raises(RunFailed, match="the env server exited"):
        await GroupRetries(5, events.append, None).rollouts(mode, {}, 1.0, 1)
    assert (mode.attempts, events) == (1, [])


async def test_a_stop_during_a_failed_attempt_ends_the_retries_after_reporting_it(monkeypatch):
    monkeypatch.setattr(group_retries, "backoff_seconds", lambda attempt: 30.0)
    events = []
    gate = GroupGate(10, 0, events.append)
    gate.bind(asyncio.get_running_loop(), on_force_stop=lambda: None)

    def stop() -> None:
        with gate.lock:
            announce = gate.close()
        announce()

    mode = Scripted([rollout("HTTP 502")], [rollout()], during=stop)
    got = await asyncio.wait_for(
        GroupRetries(5, events.append, gate).rollouts(mode, {}, 1.0, 1), timeout=10
    )
    assert (got, mode.attempts) == (None, 1)
    assert EndpointTrouble(1, 6, "HTTP 502", 30.0, "endpoint") in events
