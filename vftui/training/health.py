"""A training run's health in one word, and the named reasons, each with the figure that tripped it.

Down: the run stalled (no new step for several of its usual step times). Degraded: any other alert
(see ``figures.signals.TRAINING_SIGNALS`` for each threshold and what it measures). The waits (who
is the bottleneck) are said, never a degradation: one side always waits on the other.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from vftui.figures.signals import TRAINING_SIGNALS
from vftui.training.engines import Engine
from vftui.training.history import History
from vftui.training.logs import LogLine
from vftui.training.overview import names, wait_shares

HEALTHY, DEGRADED, DOWN = "Healthy", "Degraded", "Down"
NOTES = ("trainer_waits", "orchestrator_waits")  # said, not a degradation
FIGURE_OF = {  # the overview figure each alert is about
    "entropy_collapse": "entropy",
    "mismatch_spike": "mismatch kl",
    "grad_spike": "grad norm",
    "reward_falling": "reward",
    "reward_flat": "reward",
    "truncation_rising": "truncated",
    "rollout_errors": "errored",
    "trainer_waits": "wait for batch",
    "orchestrator_waits": "wait for policy",
}
MIN_STALL_S = 60.0
SPIKE_BEFORE = 20  # steps a spike is measured against
TREND_STEPS, FLAT_STEPS, RECENT_STEPS = 20, 30, 5
TINY = 1e-6  # a median below this makes no ratio


@dataclass(frozen=True)
class Alert:
    name: str
    value: float
    threshold: float
    sentence: str
    level: str  # DOWN, DEGRADED or "note"


@dataclass(frozen=True)
class Verdict:
    word: str
    alerts: list[Alert] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)  # every signal measured now
    finished: bool = False
    logs: list[LogLine] = field(default_factory=list)  # the serious lines, newest last


def signals(
    history: History,
    now: float,
    finished: bool,
    log_errors: int,
    engines: Sequence[Engine],
) -> dict[str, float]:
    """Each training signal's value now; a signal the run gives nothing to measure is absent."""
    found: dict[str, float] = {}
    named = names(history)
    usual = history.usual_step_s()
    if history.last_time is not None and usual and not finished:
        since = max(0.0, now - history.last_time)
        if since >= MIN_STALL_S:
            found["stalled"] = since / usual
    if (name := named["entropy"]) and (early := history.early(name)) and early > TINY:
        now_entropy = history.value(name)
        if now_entropy is not None:
            found["entropy_collapse"] = max(0.0, 1 - now_entropy / early)
    for signal, label in (("mismatch_spike", "mismatch kl"), ("grad_spike", "grad norm")):
        values = history.values(name, SPIKE_BEFORE + RECENT_STEPS) if (name := named[label]) else []
        if (spike := _spike(values)) is not None:
            found[signal] = spike
    if name := named["reward"]:
        found |= _reward(history.values(name, max(TREND_STEPS, FLAT_STEPS)))
    if (name := named["truncated"]) and (early := history.early(name)) is not None:
        recent = history.values(name, RECENT_STEPS)
        found["truncation_rising"] = max(0.0, statistics.fmean(recent) - early)
    if name := named["errored"]:
        found["rollout_errors"] = statistics.fmean(history.values(name, RECENT_STEPS))
    found["log_errors"] = float(log_errors)
    for who, share in wait_shares(history).items():
        found[f"{who}_waits"] = share
    return found | _engines(engines)


def _reward(values: list[float]) -> dict[str, float]:
    """reward_falling over the last ``TREND_STEPS``, reward_flat over the last ``FLAT_STEPS``."""
    found = {}
    trend = values[-TREND_STEPS:]
    if len(trend) >= TREND_STEPS:
        older, newer = trend[: len(trend) // 2], trend[len(trend) // 2 :]
        se = (
            statistics.variance(older) / len(older) + statistics.variance(newer) / len(newer)
        ) ** 0.5
        if se > TINY:
            found["reward_falling"] = max(
                0.0, (statistics.fmean(older) - statistics.fmean(newer)) / se
            )
    flat = values[-FLAT_STEPS:]
    if len(flat) >= FLAT_STEPS:
        found["reward_flat"] = max(flat) - min(flat)
    return found


def _engines(engines: Sequence[Engine]) -> dict[str, float]:
    found = {}
    read = [e for e in engines if not e.error]
    kv = [e.kv_cache for e in read if e.kv_cache is not None]
    if kv:
        found["kv_cache"] = max(kv)
    backlogs = [e.waiting / max(e.running or 0.0, 1.0) for e in read if e.waiting is not None]
    if backlogs:
        found["backlog"] = max(backlogs)
    return found


def _spike(values: list[float]) -> float | None:
    """The largest of the last ``RECENT_STEPS`` values over the median of the values before them."""
    before, recent = values[:-RECENT_STEPS], values[-RECENT_STEPS:]
    if len(before) < SPIKE_BEFORE // 2:
        return None
    median = statistics.median(before)
    return max(recent) / median if median > TINY else None


def judge(
    history: History,
    now: float,
    finished: bool = False,
    logs: Sequence[LogLine] = (),
    log_errors: int = 0,
    engines: Sequence[Engine] = (),
    thresholds: dict[str, float] | None = None,
) -> Verdict:
    measured = signals(history, now, finished, log_errors, engines)
    alerts = []
    for name, value in measured.items():
        signal = TRAINING_SIGNALS[name]
        threshold = (thresholds or {}).get(name, signal.threshold)
        if (value < threshold) if signal.below else (value > threshold):
            level = DOWN if name == "stalled" else "note" if name in NOTES else DEGRADED
            sentence = signal.reason.format(value=value, threshold=threshold)
            alerts.append(Alert(name, value, threshold, sentence, level))
    levels = {a.level for a in alerts}
    word = DOWN if DOWN in levels else DEGRADED if DEGRADED in levels else HEALTHY
    return Verdict(word, alerts, measured, finished, list(logs))
