"""A training run's figures in the sections of prime-rl's own overview: progress, stability,
performance, inference. Names vary with agents and envs (``train/agg/effective/<agent>/reward/mean``):
each figure is looked up by the pattern prime-rl logs it under; what a run does not log is absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vftui.training.history import History

EVAL = re.compile(r"eval/[^/]+/(?:[^/]+/)*(?:avg|pass)@\d+")


@dataclass(frozen=True)
class Figure:
    label: str  # what the line says it is
    name: str  # the metric it is read from, as logged
    value: float
    step: int
    unit: str = ""  # "s", "%" (a share shown as a percentage) or ""


UNITS = {
    "truncated": "%",
    "errored": "%",
    "masked adv +": "%",
    "masked adv -": "%",
    "trainer step": "s",
    "orchestrator step": "s",
    "wait for batch": "s",
    "wait for policy": "s",
    "throughput": " tok/s",
    "mfu": "% mfu",
}


@dataclass
class Overview:
    step: int | None = None  # the trainer's newest step
    max_steps: int | None = None
    progress: list[Figure] = field(default_factory=list)
    stability: list[Figure] = field(default_factory=list)
    performance: list[Figure] = field(default_factory=list)
    waits: str = ""  # who waits on whom, in words
    other: list[str] = field(default_factory=list)  # every other name the run logs


def reward_name(history: History) -> str | None:
    return history.matching("train/agg/effective/", "/reward/mean") or history.matching(
        "train/", "/reward/mean"
    )


def names(history: History) -> dict[str, str | None]:
    """The metric each figure is read from in this run (None where the run does not log it)."""
    h = history
    return {
        "reward": reward_name(h),
        "seq len": h.first(
            "train/agg/effective/num_total_tokens/mean", "train/agg/all/num_total_tokens/mean"
        ),
        "truncated": h.matching("train/agg/effective/", "/is_truncated/mean")
        or h.matching("train/agg/all/", "/is_truncated/mean"),
        "errored": h.matching("train/agg/all/", "/has_error/mean"),
        "entropy": h.first("entropy/all/mean"),
        "mismatch kl": h.first("mismatch_kl/all/mean"),
        "mismatch kl max": h.first("mismatch_kl/all/max"),
        "kl/entropy": h.first("kl_ent_ratio/mean"),
        "grad norm": h.first("optim/grad_norm"),
        "masked adv +": h.first("masked_advantage_positive/mean"),
        "masked adv -": h.first("masked_advantage_negative/mean"),
        "trainer step": h.first("time/step (trainer)"),
        "orchestrator step": h.first("time/step (orchestrator)"),
        "wait for batch": h.first("time/wait_for_batch"),
        "wait for policy": h.first("time/wait_for_policy"),
        "off-policy": h.first("off_policy/mean", "dispatcher/off_policy/mean"),
        "off-policy max": h.first("off_policy/max", "dispatcher/off_policy/max"),
        "throughput": h.first("perf/throughput"),
        "mfu": h.first("perf/mfu"),
    }


SECTIONS = {
    "progress": ("reward", "seq len", "truncated", "errored"),
    "stability": (
        "entropy",
        "mismatch kl",
        "mismatch kl max",
        "kl/entropy",
        "grad norm",
        "masked adv +",
        "masked adv -",
    ),
    "performance": (
        "trainer step",
        "orchestrator step",
        "wait for batch",
        "wait for policy",
        "off-policy",
        "off-policy max",
        "throughput",
        "mfu",
    ),
}


def overview(history: History, max_steps: int | None) -> Overview:
    found = Overview(history.trainer_step(), max_steps)
    named = names(history)
    for section, labels in SECTIONS.items():
        lines = getattr(found, section)
        for label in labels:
            name = named[label]
            if name is not None and (latest := history.latest(name)) is not None:
                lines.append(Figure(label, name, latest[1], latest[0], UNITS.get(label, "")))
    for name in sorted(n for n in history.series if EVAL.fullmatch(n)):
        if (latest := history.latest(name)) is not None:
            found.progress.append(Figure(name.removeprefix("eval/"), name, latest[1], latest[0]))
    found.waits = waits(history)
    shown = {f.name for f in found.progress + found.stability + found.performance}
    found.other = [n for n in history.names() if n not in shown]
    return found


def waits(history: History) -> str:
    """Who waits on whom, from the two sides' step times and waits."""
    share = wait_shares(history)
    trainer, orchestrator = share.get("trainer"), share.get("orchestrator")
    if trainer is None and orchestrator is None:
        return ""
    if (trainer or 0) >= (orchestrator or 0):
        return f"the trainer waits on rollouts ({trainer:.0%} of its step): inference is the bottleneck"
    return f"the orchestrator waits on the trainer ({orchestrator:.0%} of its step): the trainer is the bottleneck"


def wait_shares(history: History) -> dict[str, float]:
    """The share of each side's latest step spent waiting on the other."""
    found = {}
    for who, wait in (("trainer", "time/wait_for_batch"), ("orchestrator", "time/wait_for_policy")):
        step, waited = history.value(f"time/step ({who})"), history.value(wait)
        if step and waited is not None and step > 0:
            found[who] = min(1.0, max(0.0, waited / step))
    return found
