"""rl: each inference server as the run sees it, every few seconds.

atroposlib already knows much of it: its health check (``server_healthy``) and the time and
attempts of each request it made (``request_timings``, ``attempts_list``, which its wandb
step empties, so they are read as they grow). Where the server serves Prometheus
``/metrics`` (vLLM and SGLang do), its running and waiting requests and KV-cache use come
from there; a server without it is asked once.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from vftui import stats
from vftui.events import ServerStatus
from vftui.loopback import unproxied
from vftui.training.engines import parse_metrics

MAX_METRICS_BYTES = 4 * 1024**2  # a /metrics page is tens of KB; more is not one
LATENCY_WINDOW = 200  # the recent requests the latency percentiles are over
METRICS_TIMEOUT_S = 2.0
EVERY_S = 2.0


async def watch_servers(servers: Sequence[Any], emit: Callable[[ServerStatus], None]) -> None:
    """Every few seconds, each server's status, until cancelled."""
    watches = [ServerWatch(server) for server in servers]
    settings = unproxied(*(watch.url for watch in watches))  # loopback never through a proxy
    async with httpx.AsyncClient(timeout=METRICS_TIMEOUT_S, **settings) as client:
        while True:
            await asyncio.sleep(EVERY_S)
            for watch in watches:
                emit(await watch.status(client))


class ServerWatch:
    """Folds one server's request timings as atroposlib appends them; asks its /metrics."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.url = server.config.base_url
        self._read = 0  # of server.request_timings
        self._latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_WINDOW)
        self.requests = 0
        self.retries = 0
        self._metrics_note = (
            ""  # set once the server has no /metrics to read: it is not asked again
        )

    def _fold_timings(self) -> None:
        timings, attempts = self.server.request_timings, self.server.attempts_list
        if len(timings) < self._read:  # atroposlib's wandb step emptied them
            self._read = 0
        new = timings[self._read :]
        self.requests += len(new)
        self.retries += sum(max(0, a - 1) for a in attempts[self._read : self._read + len(new)])
        self._latencies.extend(new)
        self._read = len(timings)

    async def _metrics(self, client: httpx.AsyncClient) -> dict[str, float]:
        if self._metrics_note:
            return {}
        url = f"{self.url.rstrip('/').removesuffix('/v1')}/metrics"
        try:
            async with client.stream("GET", url) as response:
                if response.status_code == 404:
                    self._metrics_note = "no /metrics"
                    return {}
                response.raise_for_status()
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_METRICS_BYTES:
                        self._metrics_note = "/metrics too large"
                        return {}
        except httpx.HTTPError:
            return {}  # asked again next time: a server that is down now may be up then
        try:
            found = parse_metrics(body.decode("utf-8", errors="replace"))
        except ValueError:
            self._metrics_note = "/metrics is not Prometheus text"
            return {}
        if not found:
            self._metrics_note = "/metrics has no vLLM or SGLang gauges"
        return found

    async def status(self, client: httpx.AsyncClient) -> ServerStatus:
        self._fold_timings()
        found = await self._metrics(client)
        latencies = sorted(self._latencies)
        return ServerStatus(
            url=self.url,
            healthy=bool(getattr(self.server, "server_healthy", True)),
            requests=self.requests,
            retries=self.retries,
            latency_p50_s=stats.quantile(latencies, 0.5),
            latency_p95_s=stats.quantile(latencies, 0.95),
            running=found.get("running"),
            waiting=found.get("waiting"),
            kv_cache=found.get("kv_cache"),
            metrics_note=self._metrics_note,
        )
