"""rl: how VerifiersEnv talks to the Atropos trajectory API, which may be down, restarted or slow.

atroposlib's own calls retry three times, silently, then raise into the serve loop. This
mixin, placed before ``BaseEnv`` in ``VerifiersEnv``'s bases, wraps them: every call is
retried with backoff for as long as the run goes on and each failure is reported; a 4xx
answer fails the run with a clear sentence; a run-api that restarted and forgot our env is
registered with again, and sends wait until it knows us. It relies on the env's
``hooks``, ``retries.back_off`` (``group_retries``), ``groups_written`` and ``config``.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from atroposlib.envs.base import BaseEnv
from tenacity import stop_after_attempt

from vftui.collector.group_retries import GroupRetries
from vftui.errors import RunFailed
from vftui.events import TRAJECTORY_API, WAITING_FOR_TRAINER, ApiStatus, RunState, RunStatus
from vftui.group_format import META

logger = logging.getLogger(__name__)


class ApiNotReady(RuntimeError):
    """The trajectory API is up but has not (again) confirmed our env's registration."""


def once(method: Any, env: Any) -> Callable[..., Awaitable[Any]]:
    """A tenacity-wrapped BaseEnv method with a single attempt: we retry it ourselves, visibly."""
    return functools.partial(method.retry_with(stop=stop_after_attempt(1), reraise=True), env)


LAG_GROUPS = 8  # the recently sent groups the off-policy lag is over

if TYPE_CHECKING:  # what the mixin is placed before: its attributes are the env's (see above)
    from atroposlib.envs.base import BaseEnv as _Env
else:
    _Env = object


class TrajectoryApiLink(_Env):
    retries: GroupRetries  # the env's
    eval_runner: asyncio.Task | None  # atroposlib's, as are these: set by BaseEnv
    wandb_project: str | None
    wandb_group: str | None
    unsent = 0  # groups a stop cut off before the API took them (they stay in the jsonl)
    _sent_steps: collections.deque | None = (
        None  # the trainer step each recently sent group began at
    )
    _said_waiting = False
    _api_knows_us = False

    async def env_step_checks(self) -> None:
        """atroposlib's, with every crossing of a multiple of ``steps_per_eval`` starting an eval.

        atroposlib compares the old and new trainer steps modulo ``steps_per_eval``, so a trainer
        that moved by a multiple of it between two polls (12 -> 14 with evals every 2) skips that
        eval. Ours run with LIMIT_TRAIN, so starting one here needs no workers cancelled."""
        every, before = self.config.steps_per_eval, self.curr_step
        now = self.status_dict["current_step"]
        missed = every > 0 and now // every > before // every and before % every <= now % every
        if missed and (self.eval_runner is None or self.eval_runner.done()):
            self.eval_runner = asyncio.create_task(self.evaluate())
        await super().env_step_checks()

    async def setup_wandb(self) -> None:
        """As atroposlib's: the trainer's wandb project and group when it names them; the run's own
        otherwise. atroposlib's waits for a project while one is unset and does nothing once one is (ours
        always is), so an rl run with --wandb never started its wandb run."""
        if not self.config.use_wandb:
            return
        import wandb

        if wandb.run is not None:
            return
        info: dict[str, Any] = {}
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    f"{self.config.rollout_server_url}/wandb_info",
                    timeout=aiohttp.ClientTimeout(total=10),
                ) as r,
            ):
                info = await r.json() if r.status == 200 else {}
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            logger.info("no wandb project from the trajectory API (%s): using the run's", e)
        self.wandb_project = info.get("project") or self.wandb_project
        self.wandb_group = info.get("group") or self.wandb_group
        wandb.init(
            name=self.config.wandb_name or None,
            project=self.wandb_project,
            group=self.wandb_group,
            config=self.config.model_dump(),
        )

    async def _until_it_works(self, call: Callable[[], Awaitable[Any]], what: str) -> Any:
        """``call()`` retried with backoff for as long as the run goes on, each failure reported."""
        attempt = 0
        while True:
            try:
                return await call()
            except aiohttp.ClientResponseError as e:
                if 400 <= e.status < 500 and e.status not in (408, 429):
                    raise RunFailed(
                        f"the trajectory API refused {what}: HTTP {e.status} {e.message}"
                    ) from e
                problem = f"HTTP {e.status}"
            except Exception as e:  # noqa: BLE001 - unreachable, restarting or erroring: all retried
                problem = f"{type(e).__name__}: {e}"
            attempt += 1
            self._api_knows_us = (
                False  # it may have restarted and forgotten us: the status poll checks
            )
            if not await self.retries.back_off(
                min(attempt, 5), 0, f"{what}: {problem}", TRAJECTORY_API
            ):
                raise RunFailed(f"stopped while the trajectory API was unreachable ({what})")

    async def _register_env(self):
        data = await self._until_it_works(once(BaseEnv._register_env, self), "registering the env")
        registered = data.get("status") == "success"
        if not registered and not self._said_waiting:
            self._said_waiting = True
            url = self.config.rollout_server_url
            self.hooks.emit(
                RunStatus(
                    RunState.STARTING,
                    self.groups_written,
                    0,
                    # the trainer_wait alert says how to start one, if none comes within a minute
                    f"{WAITING_FOR_TRAINER} at {url} (--stall-timeout bounds the wait)",
                )
            )
        elif registered and self._said_waiting:
            self.hooks.emit(
                RunStatus(RunState.RUNNING, self.groups_written, 0, "a trainer registered")
            )
        self._api_knows_us = registered
        return data

    async def get_status(self):
        await self._until_it_works(self._status_or_register_again, "reading its status")
        step = self.trainer_step()
        queue = int(self.status_dict.get("queue_size", 0))
        offpolicy = (
            self.config.max_batches_offpolicy * self.derived_batch_size // self.config.group_size
            - queue
        )
        self.hooks.emit(
            ApiStatus(
                api_url=self.config.rollout_server_url,
                reachable=True,
                trainer_registered=True,  # our env registered, which only succeeds once a trainer has
                batch_size=int(self.config.batch_size),
                current_step=step,
                queue_size=queue,
                env_weight=float(self.status_dict.get("env_weight", 0.0)),
                env_id=getattr(self, "env_id", None),
                self_queue_size=int(self.status_dict.get("self_queue_size", 0)),
                workers=len(self.workers),
                workers_allowed=max(
                    0, min(self.max_num_workers, offpolicy)
                ),  # atroposlib's add_train_workers
                lag=step - min(self._sent_steps) if self._sent_steps else None,
            )
        )

    def trainer_step(self) -> int:
        """The trainer step as last polled (0 before any poll); each group records it as it begins, for the lag."""
        return int((getattr(self, "status_dict", None) or {}).get("current_step", 0))

    async def _status_or_register_again(self) -> None:
        """Our env's status; a run-api that restarted has forgotten us (it answers 500), so register again."""
        try:
            await once(BaseEnv.get_status, self)()
        except aiohttp.ClientResponseError as e:
            if e.status < 500:
                raise
            logger.warning(
                "the trajectory API does not know this env any more (restarted?); registering again"
            )
            self._said_waiting = False
            await self.register_env()
            await once(BaseEnv.get_status, self)()
        self._api_knows_us = True

    async def _send_scored_data_to_api(self, scored_data):
        async def send() -> None:
            # A group sent to a restarted run-api before its trainer and our env registered
            # again leaves it half set up (trainers can no longer register): wait instead.
            if not self._api_knows_us:
                raise ApiNotReady("waiting until the trajectory API knows this env again")
            await once(BaseEnv._send_scored_data_to_api, self)(scored_data)

        try:
            await self._until_it_works(send, "sending a group")
            if self._sent_steps is None:
                self._sent_steps = collections.deque(maxlen=LAG_GROUPS)
            self._sent_steps.extend(
                g.get(META, {}).get("trainer_step", 0)
                for g in (scored_data if isinstance(scored_data, list) else [scored_data])
            )
        except RunFailed:
            self.unsent += 1
            logger.warning("a group was not sent before the stop; it is kept in the run's jsonl")
            raise
