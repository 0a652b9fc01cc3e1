"""Inference engines' load, from their Prometheus ``/metrics`` (vLLM, SGLang): one line per engine.

A fleet's means hide one sick engine; each engine's running and waiting requests and KV-cache use
are kept apart (vLLM labels each engine's samples with ``engine``), so the one that is full stands out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from vftui.loopback import unproxied

# vLLM (both engine versions) and SGLang name the same gauges differently
GAUGES = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    "kv_cache": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
}
MAX_METRICS_BYTES = 4 * 1024**2  # a /metrics page is tens of KB; more is not one
TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Engine:
    url: str
    label: str  # the engine's label within its server ("0"), "" for a server of one
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None
    error: str = ""  # why the server could not be read


def by_engine(text: str) -> dict[str, dict[str, float]]:
    """The gauges of a Prometheus text page per engine label; a page that is not Prometheus text is a
    ValueError. A value that is not a finite non-negative number is left out."""
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for field, names in GAUGES.items():
            if family.name not in names:
                continue
            for sample in family.samples:
                if math.isfinite(sample.value) and sample.value >= 0:
                    label = sample.labels.get("engine", "")
                    gauges = found.setdefault(label, {})
                    join = max if field == "kv_cache" else float.__add__
                    gauges[field] = join(gauges.get(field, 0.0), float(sample.value))
    return found


def parse_metrics(text: str) -> dict[str, float]:
    """The gauges of a whole server: counts summed over its engines, KV-cache use the fullest's."""
    total: dict[str, float] = {}
    for gauges in by_engine(text).values():
        for field, value in gauges.items():
            if field == "kv_cache":
                total[field] = max(total.get(field, 0.0), value)
            else:
                total[field] = total.get(field, 0.0) + value
    return {k: v for k, v in total.items() if math.isfinite(v)}


def metrics_url(url: str) -> str:
    """``http://host:8000/v1`` or ``http://host:8000`` -> ``http://host:8000/metrics``."""
    url = url.rstrip("/")
    return url if url.endswith("/metrics") else f"{url.removesuffix('/v1')}/metrics"


def read(client: httpx.Client, url: str) -> list[Engine]:
    """Each engine of the server at ``url``; one ``Engine`` with ``error`` when it cannot be read."""
    try:
        with client.stream("GET", metrics_url(url)) as response:
            response.raise_for_status()
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_METRICS_BYTES:
                    return [Engine(url, "", error="its /metrics is over 4 MB: not a metrics page")]
    except httpx.HTTPStatusError as e:
        return [Engine(url, "", error=f"/metrics answered {e.response.status_code}")]
    except httpx.HTTPError as e:
        return [Engine(url, "", error=f"cannot reach it ({type(e).__name__})")]
    try:
        engines = by_engine(body.decode("utf-8", errors="replace"))
    except ValueError:
        return [Engine(url, "", error="its /metrics is not Prometheus text")]
    if not engines:
        return [Engine(url, "", error="its /metrics has no vLLM or SGLang gauges")]
    return [
        Engine(url, label, g.get("running"), g.get("waiting"), g.get("kv_cache"))
        for label, g in sorted(engines.items())
    ]


def read_all(urls: list[str]) -> list[Engine]:
    """Every engine of every server, asked once each (loopback never through a proxy)."""
    if not urls:
        return []
    with httpx.Client(timeout=TIMEOUT_S, **unproxied(*urls)) as client:
        return [engine for url in urls for engine in read(client, url)]
