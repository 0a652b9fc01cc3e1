"""Many groups in flight behind one adaptive request limit: what sft and eval both collect with.

Every request goes through the limit (``traffic``), which also makes the figures the views
show once a second; the groups go through atroposlib's own per-group steps in ``pool``, as
many at once as the limit keeps busy. ``InFlight`` is the part of the ``Collection`` the two
modes share (atroposlib's process command's settings, the rollouts, the collection); each adds
its own items, total and end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from vftui.collector.modes import Collection, ModeContext, ProcessDriver, Sampling, ServeDriver
from vftui.collector.sft.pool import collect_in_flight, groups_with_spares
from vftui.collector.sft.rollouts import SftRollouts
from vftui.collector.sft.traffic import AdaptiveLimit, LimitedTransport, TrafficStats
from vftui.config import RunConfig
from vftui.events import Event

STATS_EVERY_S = 1.0
PROCESS_SERVER = {"server_type": "openai", "health_check": False}
"""The server settings of atroposlib's process command: any OpenAI-compatible endpoint."""


class InFlight(Collection):
    def __init__(
        self,
        config: RunConfig,
        emit: Callable[[Event], None],
        on_rate_limit: Callable[[int, float], None],
    ) -> None:
        self.config = config
        self._emit = emit
        self._group_size = config.group_size
        self._max_concurrent = min(config.concurrency, config.group_size)
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
        self._task: asyncio.Task | None = None

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        """atroposlib's process command's: it counts the groups; every scored group is kept."""
        return {
            "total_steps": groups_left,
            "ensure_scores_are_not_same": False,
            "wandb_name": self.config.wandb_name,
        }

    def server_settings(self) -> dict[str, Any]:
        return dict(PROCESS_SERVER)

    def rollouts(self, sampling: Sampling, driver: ServeDriver) -> SftRollouts:
        """Every request of every group through the one limited client."""
        return SftRollouts(sampling, self._http, max_concurrent=self._max_concurrent)

    def tokens_written(self, count: int) -> None:
        self.traffic.tokens(count)

    async def collect(self, context: ModeContext, driver: ProcessDriver) -> None:
        """Groups in flight as the request limit allows, the traffic figures once a second."""
        self._task = asyncio.ensure_future(
            collect_in_flight(
                driver, lambda: groups_with_spares(self.limit.size, self._group_size), context.files
            )
        )
        ticker = asyncio.ensure_future(self._report_traffic(context))
        try:
            await self._task
        finally:
            ticker.cancel()
            self._emit(self.traffic.snapshot(self.limit, context.gate.in_flight))
            await self._http.aclose()

    async def _report_traffic(self, context: ModeContext) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self._emit(self.traffic.snapshot(self.limit, context.gate.in_flight))

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
