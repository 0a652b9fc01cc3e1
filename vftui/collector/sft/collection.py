"""sft (Atropos ``process``): groups from any OpenAI-compatible endpoint, saved as jsonl, many in flight.

Every request goes through one adaptive limit (``traffic``), which also makes the figures
the views show once a second; the groups go through atroposlib's own per-group steps in
``pool``, as many at once as the limit keeps busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from vftui.collector.envs.base import Environment
from vftui.collector.sft.pool import collect_in_flight, groups_with_spares
from vftui.collector.sft.rollouts import SftRollouts
from vftui.collector.sft.traffic import AdaptiveLimit, LimitedTransport, TrafficStats
from vftui.config import RunConfig
from vftui.events import Event, Mode
from vftui.run_files.shards import share_of

if TYPE_CHECKING:
    from vftui.collector.gate import GroupGate
    from vftui.collector.verifiers_env import VerifiersEnv

STATS_EVERY_S = 1.0


class SftCollection:
    mode = Mode.SFT
    fail = None  # a group's RunFailed raises out of the pool and ends the run
    item_range: int | None = None

    def __init__(
        self,
        config: RunConfig,
        emit: Callable[[Event], None],
        on_rate_limit: Callable[[int, float], None],
    ):
        self.config = config
        self._emit = emit
        self.limit = AdaptiveLimit(config.concurrency)
        self.traffic = TrafficStats()
        transport = LimitedTransport(
            self.limit,
            self.traffic,
            timeout_s=config.timeout,
            max_body_bytes=config.max_response_mb * 1024**2,
            on_cut=on_rate_limit,
        )
        self._http = httpx.AsyncClient(transport=transport, timeout=config.timeout)
        self.rollouts = SftRollouts(
            self._http, max_concurrent=min(config.concurrency, config.group_size)
        )
        self._task: asyncio.Task | None = None

    def check(self, environment: Environment) -> None:
        share_of(
            self.config.own_shard, self.config.steps, "groups of --steps"
        )  # any environment the tokenizer renders

    def groups_total(self, environment: Environment) -> int:
        return self.config.own_shard.share(self.config.steps)  # --steps counts over all the shards

    def observe(self, event: Event) -> None:
        return None  # the run's own totals and health are enough

    def start(self, step: Callable[[str], None], base_urls: tuple[str, ...], api_key: str) -> None:
        return None  # the endpoint is all it needs, and its model list was read

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        # atroposlib's process manager counts the groups; every scored group is kept, as its process command does
        return {
            "total_steps": groups_left,
            "ensure_scores_are_not_same": False,
            "wandb_name": self.config.wandb_name,
        }

    def server_settings(self) -> dict[str, Any]:
        return {"server_type": "openai", "health_check": False}

    def configure(self, env: VerifiersEnv) -> None:
        """As atroposlib's ``process`` command sets the env up."""
        env.process_mode = True
        env.n_groups_to_process = env.config.total_steps
        env.group_size_to_process = self.config.group_size

    def tokens_written(self, count: int) -> None:
        self.traffic.tokens(count)

    async def collect(self, env: VerifiersEnv, gate: GroupGate) -> None:
        """Groups in flight as the request limit allows, the traffic figures once a second."""
        group_size = self.config.group_size
        self._task = asyncio.ensure_future(
            collect_in_flight(env, lambda: groups_with_spares(self.limit.size, group_size))
        )
        ticker = asyncio.ensure_future(self._report_traffic(gate))
        try:
            await self._task
        finally:
            ticker.cancel()
            self._emit(self.traffic.snapshot(self.limit, gate.in_flight))
            await self._http.aclose()

    async def _report_traffic(self, gate: GroupGate) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self._emit(self.traffic.snapshot(self.limit, gate.in_flight))

    async def finish(self, env: VerifiersEnv) -> None:
        return None  # its files are the jsonl and the checkpoint, written as it goes

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        return None
