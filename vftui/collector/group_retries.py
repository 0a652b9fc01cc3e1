"""A group's rollouts tried again, with back-off, until they come back whole or the tries run out.

The env holds one (``VerifiersEnv.retries``); its ``back_off`` is also how the trajectory link
waits between calls (``rl.trajectory_link``), so every failed attempt is reported the same way
(an ``EndpointTrouble`` event) and a stop cuts every wait short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from vftui.collector.backoff import backoff_seconds
from vftui.collector.endpoint import auth_errors
from vftui.collector.envs.base import Rollout
from vftui.collector.gate import GroupGate
from vftui.collector.modes import Rollouts
from vftui.errors import RunFailed
from vftui.events import EndpointTrouble, Event

# the env's lines keep the logger name they always had: LogRecord events carry it
logger = logging.getLogger("vftui.collector.verifiers_env")


class GroupRetries:
    def __init__(
        self, max_retries: int, emit: Callable[[Event], None], gate: GroupGate | None
    ) -> None:
        self.attempts = max_retries + 1
        self._emit = emit
        self._gate = gate

    async def rollouts(
        self, rollouts: Rollouts, item: dict[str, Any], temperature: float, group_size: int
    ) -> list[Rollout] | None:
        """One group's rollouts, retried with backoff; None when a stop cut the retries."""
        time_limit = rollouts.time_limit_s()
        attempts = self.attempts
        for attempt in range(1, attempts + 1):
            try:
                got = await asyncio.wait_for(rollouts.attempt(item, temperature), time_limit)
                errors = [r.error for r in got if r.error]
                if not errors and len(got) == group_size:
                    return got
                problem = errors[0] if errors else f"{len(got)} of {group_size} rollouts returned"
            except auth_errors() as e:
                raise RunFailed(
                    f"the endpoint rejected the request ({type(e).__name__}): check the API key"
                ) from e
            except RunFailed:  # what the rollouts ran on is gone (an env server): no retry helps
                raise
            except TimeoutError:
                problem = (
                    f"the group timed out after {time_limit:g} s (is the inference server up?)"
                )
            except Exception as e:  # noqa: BLE001 - any endpoint failure is retried, then reported
                problem = f"{type(e).__name__}: {e}"
            if attempt == attempts:
                raise RunFailed(
                    f"the endpoint failed {attempts} times in a row; last error: {problem}"
                )
            if not await self.back_off(attempt, attempts, problem, "endpoint"):
                return None
        return None

    async def back_off(self, attempt: int, attempts: int, problem: str, service: str) -> bool:
        """Report a failed attempt and wait before the next; False when a stop cut the wait."""
        delay = backoff_seconds(attempt)
        self._emit(EndpointTrouble(attempt, attempts, problem, round(delay, 2), service))
        logger.info(
            "%s attempt %d/%d failed: %s", service, attempt, attempts, problem
        )  # the event is the warning
        if self._gate is None:
            await asyncio.sleep(delay)
            return True
        await self._gate.sleep(delay)
        return not self._gate.stopping
