"""Run health: the signals people babysitting RL and SFT collection get burned by.

Folded from the run's own events over a window of recent groups: truncation and
completion length (collapse, runaway to the cap), drops by reason and the reward over the
groups a trainer can learn from, failed requests, stalls, and cheap reward-hacking flags
(one reward function dominating, the total rising while a function falls, a saturated
reward with shrinking completions, a sudden jump). Each signal is a number; an alert is
that number over its threshold, a yellow flag with a one-line reason, not a verdict. A
``--fail-on`` gate is the same number over the user's threshold, and stops the run.

Pure Python: the run feeds it (``observe``) and asks it once a second (``check``).
"""

from __future__ import annotations

import collections
import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import assert_never

from vftui import events as ev
from vftui import stats
from vftui.figures.signals import SIGNALS, STALL_TIMEOUT, Tripped
from vftui.group_format import trained_tokens

MIN_GROUPS = 8  # a window's figures start to mean something
MIN_REQUESTS = 10  # ...and its share of failed requests: one early failure is not 100% failing
TREND_GROUPS = 32  # trends (older half against newer) need halves this big, or the whole window: no flapping at start
ERROR_WINDOW_S = 60.0
SATURATED_TREND = 0.8  # completions this much shorter than before, with the reward at its best
GROWING_TREND = 1.05  # completions this much longer than before: growing, for "runaway"
CLEARS_BELOW = (
    0.9  # an alert clears under this share of its threshold, so a value near it does not flicker
)


@dataclass(frozen=True)
class Sample:
    """What the window keeps of one scored group."""

    mean: float
    identical: bool | None  # None: one rollout, nothing to compare
    varied_kept: bool
    finish: tuple[str | None, ...]
    completion: tuple[int, ...]
    per_function: tuple[tuple[str, float], ...]
    drop: str | None


class HealthMonitor:
    """Thread-safe: the run's events arrive from its loop and from the controls' threads."""

    def __init__(
        self,
        window: int,
        length_cap: int,
        weights: dict[str, float],
        thresholds: dict[str, float] | None = None,
        gates: dict[str, float] | None = None,
        stall_timeout: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._window: collections.deque[Sample] = collections.deque(maxlen=window)
        self._length_cap = length_cap
        self._weights = weights
        self.thresholds = {name: s.threshold for name, s in SIGNALS.items()} | (thresholds or {})
        self.gates = dict(gates or {})
        self._stall_timeout = stall_timeout
        self._running_since: float | None = None
        self._trainer_wait_since: float | None = (
            None  # rl: since the run began to wait for a trainer
        )
        self._last_group = self._clock()
        self._best_mean = -math.inf
        self._requests: collections.deque[tuple[float, int, int]] = collections.deque()
        self._latest: ev.RequestStats | None = None
        self._api: ev.ApiStatus | None = None
        self._step_since = self._clock()
        self._servers: dict[str, ev.ServerStatus] = {}
        self._active: dict[str, ev.Alert] = {}

    # -- folding --------------------------------------------------------------------------

    def observe(self, event: ev.Event) -> None:  # noqa: C901 - one case per kind of event
        with self._lock:
            match event:
                case ev.GroupCollected():
                    self._add(event)
                case ev.GroupDropped() if event.scores:
                    self._add(event)
                case ev.RequestStats():
                    self._latest = event
                    self._requests.append((self._clock(), event.requests_total, event.failed_total))
                case ev.ApiStatus(reachable=True):
                    if self._api is None or event.current_step != self._api.current_step:
                        self._step_since = self._clock()
                    if (
                        event.workers_allowed == 0
                    ):  # the trainer has enough: not collecting is not a stall
                        self._last_group = self._clock()
                    self._api = event
                case ev.ServerStatus():  # rl: a retry is a failed attempt, as in sft's request figures
                    self._servers[event.url] = event
                    retries = sum(s.retries for s in self._servers.values())
                    attempts = sum(s.requests for s in self._servers.values()) + retries
                    self._requests.append((self._clock(), attempts, retries))
                case ev.RunStatus(state=ev.RunState.STARTING, detail=detail) if detail.startswith(
                    ev.WAITING_FOR_TRAINER
                ):
                    self._trainer_wait_since = self._trainer_wait_since or self._clock()
                    self._running_since = None  # no group while no trainer wants one is no stall
                case ev.RunStatus(state=ev.RunState.RUNNING):
                    self._trainer_wait_since = None
                    if self._running_since is None:
                        self._running_since = self._last_group = (
                            self._clock()
                        )  # a resume restarts the stall clock
                case ev.RunStatus():
                    self._running_since = None
                case ev.GroupDropped() | ev.ApiStatus():
                    pass  # a group that failed before it was scored; an API that cannot be read says nothing
                case (
                    ev.RunStarted()
                    | ev.MetricsWindow()
                    | ev.FileProgress()
                    | ev.RunSoFar()
                    | ev.EndpointTrouble()
                    | ev.Health()
                    | ev.EvalReport()
                    | ev.Alert()
                    | ev.TemperatureChanged()
                    | ev.GroupsDumped()
                    | ev.LogRecord()
                    | ev.RunSummary()
                ):
                    pass  # errors count through the request figures; the rest are not about health
                case _:
                    assert_never(event)

    def _add(self, group: ev.GroupCollected | ev.GroupDropped) -> None:
        self._last_group = self._clock()
        mean = stats.mean(group.scores)
        self._best_mean = max(self._best_mean, mean)
        drop: str | None
        completion: tuple[int, ...]
        finish: tuple[str | None, ...]
        if isinstance(group, ev.GroupCollected):
            drop, completion = None, tuple(map(trained_tokens, group.masks))
            finish = tuple(group.finish_reasons)
        else:
            drop, completion, finish = group.reason, (), ()
        per_function = tuple(
            (name, stats.mean(values)) for name, values in group.metrics.items() if values
        )
        identical = stats.alike(group.scores)
        self._window.append(
            Sample(
                mean,
                identical,
                drop is None and identical is False,
                finish,
                completion,
                per_function,
                drop,
            )
        )

    # -- once a second --------------------------------------------------------------------

    def check(self) -> tuple[ev.Health, list[ev.Alert], Tripped | None]:
        """The figures now, the alerts that started or cleared since the last check, a gate that tripped."""
        with self._lock:
            now = self._clock()
            samples = list(self._window)
            values = self._signals(samples, now)
            changes = self._alerts(values)
            health = self._figures(samples, values)
            tripped = self._tripped(values)
        return health, changes, tripped

    def _of_the_moment(self, now: float) -> dict[str, float]:
        """The signals a clock or the servers give: waits, the API's lag, backlogs, errors (the window's
        own need enough groups)."""
        values: dict[str, float] = {}
        if self._running_since is not None:
            values["stall"] = now - self._last_group
        if self._trainer_wait_since is not None:
            values["trainer_wait"] = now - self._trainer_wait_since
        api = self._api
        if api is not None:
            if api.lag is not None:
                values["lag"] = float(api.lag)
            values["trainer_stall"] = now - self._step_since if api.queue_size > 0 else 0.0
        backlogs = [
            (s.waiting or 0.0) / max(1.0, s.running or 0.0)
            for s in self._servers.values()
            if s.waiting is not None
        ]
        if backlogs:
            values["backlog"] = max(backlogs)
        failed = self._failed_per_request(now)
        if failed is not None:
            values["errors"] = failed
        return values

    def _signals(self, samples: list[Sample], now: float) -> dict[str, float]:
        values = self._of_the_moment(now)
        if len(samples) < MIN_GROUPS:
            return values
        values.update(_identical_share(samples))
        finishes = [f for s in samples for f in s.finish]
        if finishes:
            values["truncated"] = finishes.count("length") / len(finishes)
        weighted = self._weighted_shares(samples)
        if len(weighted) > 1:
            values["dominance"] = max(weighted.values())
        if len(samples) < min(TREND_GROUPS, self._window.maxlen or TREND_GROUPS):
            return values
        older, newer = samples[: len(samples) // 2], samples[len(samples) // 2 :]
        lengths = [[c for s in half for c in s.completion] for half in (older, newer)]
        trend = (
            statistics.fmean(lengths[1]) / statistics.fmean(lengths[0])
            if all(lengths) and statistics.fmean(lengths[0]) > 0
            else None
        )
        if trend is not None:
            values["collapse"] = max(0.0, 1.0 - trend)
            everything = sorted(lengths[0] + lengths[1])
            p95 = stats.quantile(everything, 0.95) or 0.0
            values["runaway"] = (
                p95 / self._length_cap if trend > GROWING_TREND and self._length_cap > 0 else 0.0
            )
        rewards = [[s.mean for s in half] for half in (older, newer)]
        values["jump"] = _jump(*rewards)
        rising = statistics.fmean(rewards[1]) > statistics.fmean(rewards[0])
        means = [(_mean_of(older, name), _mean_of(newer, name)) for name in self._weights]
        falls = [then - now for then, now in means if then is not None and now is not None]
        values["divergence"] = max(falls, default=0.0) if rising else 0.0
        if trend is not None and self._best_mean > 0:
            saturated = statistics.fmean(rewards[1]) / self._best_mean
            values["saturation"] = saturated if trend < SATURATED_TREND else 0.0
        return values

    def _failed_per_request(self, now: float) -> float | None:
        while self._requests and now - self._requests[0][0] > ERROR_WINDOW_S:
            self._requests.popleft()
        if len(self._requests) < 2:
            return None
        (_, requests_then, failed_then), (_, requests_now, failed_now) = (
            self._requests[0],
            self._requests[-1],
        )
        asked = requests_now - requests_then
        return (failed_now - failed_then) / asked if asked >= MIN_REQUESTS else None

    def _weighted_shares(self, samples: list[Sample]) -> dict[str, float]:
        """Each reward function's share of the window's weighted reward (positive parts only)."""
        parts = {
            name: max(0.0, weight * (_mean_of(samples, name) or 0.0))
            for name, weight in self._weights.items()
        }
        total = sum(parts.values())
        return {name: part / total for name, part in parts.items()} if total > 0 else {}

    def _alerts(self, values: dict[str, float]) -> list[ev.Alert]:
        changes = []
        for name, threshold in self.thresholds.items():
            value = values.get(name)
            was_active = name in self._active
            active = value is not None and value > (
                threshold * CLEARS_BELOW if was_active else threshold
            )
            if active and not was_active and value is not None:  # active: there is a value
                alert = ev.Alert(
                    name,
                    round(value, 4),
                    threshold,
                    True,
                    SIGNALS[name].reason.format(value=value, threshold=threshold),
                )
                self._active[name] = alert
                changes.append(alert)
            elif not active and was_active:
                del self._active[name]
                changes.append(
                    ev.Alert(
                        name, round(value or 0.0, 4), threshold, False, f"{name} back to normal"
                    )
                )
        return changes

    def _figures(self, samples: list[Sample], values: dict[str, float]) -> ev.Health:
        finishes = collections.Counter(str(f) for s in samples for f in s.finish)
        lengths = sorted(c for s in samples for c in s.completion)
        trainable = [s.mean for s in samples if s.varied_kept]
        latest = self._latest or self._slowest_server()
        return ev.Health(
            groups=len(samples),
            finish_reasons=dict(finishes),
            completion_mean=round(statistics.fmean(lengths), 1) if lengths else 0.0,
            completion_p95=float(stats.quantile(lengths, 0.95) or 0.0),
            dropped=dict(collections.Counter(s.drop for s in samples if s.drop)),
            reward_all=round(statistics.fmean(s.mean for s in samples), 4) if samples else None,
            reward_trainable=round(statistics.fmean(trainable), 4) if trainable else None,
            latency_p50_s=latest.latency_p50_s if latest else None,
            latency_p95_s=latest.latency_p95_s if latest else None,
            tokens_per_s=latest.tokens_per_s if isinstance(latest, ev.RequestStats) else None,
            signals={name: round(value, 4) for name, value in values.items()},
            active=sorted(self._active),
            thresholds={name: t for name, t in self.thresholds.items() if math.isfinite(t)},
        )

    def _slowest_server(self) -> ev.ServerStatus | None:
        """rl: the inference server with the slowest requests (sft has its own request figures)."""
        timed = [s for s in self._servers.values() if s.latency_p95_s is not None]
        return max(timed, key=lambda s: s.latency_p95_s or 0.0, default=None)

    def _tripped(self, values: dict[str, float]) -> Tripped | None:
        for name, threshold in self.gates.items():
            value = values.get(name)
            if value is not None and value > threshold:
                return Tripped(name, value, threshold)
        stall, trainer_stall = values.get("stall", 0.0), values.get("trainer_stall", 0.0)
        trainer_wait = values.get("trainer_wait", 0.0)
        if self._stall_timeout is not None and trainer_wait > self._stall_timeout:
            return Tripped(
                STALL_TIMEOUT,
                trainer_wait,
                self._stall_timeout,
                "trainer registered with the trajectory API",
            )
        if self._stall_timeout is not None and max(stall, trainer_stall) > self._stall_timeout:
            if trainer_stall > stall:
                return Tripped(
                    STALL_TIMEOUT,
                    trainer_stall,
                    self._stall_timeout,
                    "trainer step with groups waiting",
                )
            return Tripped(STALL_TIMEOUT, stall, self._stall_timeout)
        return None

    def wandb_metrics(self, health: ev.Health) -> dict[str, float]:
        """The figures under ``health/`` names, for the run's wandb log."""
        out = {f"health/{name}": value for name, value in health.signals.items()}
        out["health/completion_mean"] = health.completion_mean
        out["health/completion_p95"] = health.completion_p95
        out["health/active_alerts"] = float(len(health.active))
        if health.reward_trainable is not None:
            out["health/reward_trainable"] = health.reward_trainable
        for reason, count in health.dropped.items():
            out[f"health/dropped/{reason}"] = float(count)
        return out


def _mean_of(samples: list[Sample], name: str) -> float | None:
    values = [value for s in samples for function, value in s.per_function if function == name]
    return statistics.fmean(values) if values else None


def _jump(older: list[float], newer: list[float]) -> float:
    """|newer mean - older mean| in standard errors of the difference (0 when either half is flat)."""
    if len(older) < 2 or len(newer) < 2:
        return 0.0
    error = math.sqrt(
        statistics.variance(older) / len(older) + statistics.variance(newer) / len(newer)
    )
    return abs(statistics.fmean(newer) - statistics.fmean(older)) / error if error > 0 else 0.0


def _identical_share(samples: list[Sample]) -> dict[str, float]:
    """``identical``: the share of the window's groups of two or more rollouts that scored alike; no figure
    under ``MIN_GROUPS`` of them (groups of one rollout have nothing to compare)."""
    compared = [s.identical for s in samples if s.identical is not None]
    return {"identical": sum(compared) / len(compared)} if len(compared) >= MIN_GROUPS else {}
