"""The health signals' names, meanings and alert thresholds, and the ``--fail-on`` gates over them.

The settings (``config``) read gates and the collector (``collector.health``) computes the
signals: both import this, so each name and threshold is written once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Signal:
    threshold: float
    meaning: str
    reason: str  # the alert's line, formatted with value and threshold
    below: bool = False  # the alert is on under the threshold, not over it
    share: bool = False  # a share, from 0 to 1: a gate past either end never or always trips
    signed: bool = (
        False  # may be below 0 (a fall that was a rise); else a gate below 0 always trips
    )


SIGNALS: dict[str, Signal] = {
    "identical": Signal(
        0.5,
        "share of the window's scored groups whose rollouts all got the same score",
        "{value:.0%} of recent groups have identical scores (> {threshold:g}): "
        "nothing to learn from them",
        share=True,
    ),
    "truncated": Signal(
        0.2,
        "share of the window's rollouts cut at --max-tokens (finish reason length)",
        "{value:.0%} of recent rollouts were cut at --max-tokens (> {threshold:g})",
        share=True,
    ),
    "errors": Signal(
        0.1,
        "failed requests per request over the last minute, once it holds 10 requests",
        "{value:.0%} of the last minute's requests failed (> {threshold:g})",
        share=True,
    ),
    "stall": Signal(
        120.0,
        "seconds without a new group while the run is running (rl: and the trainer wants more)",
        "no group for {value:.0f} s (> {threshold:g} s): is the endpoint stuck?",
    ),
    "collapse": Signal(
        0.5,
        "how far the mean completion length fell, older half of the window to newer",
        "completions got {value:.0%} shorter across the window (> {threshold:g})",
        share=True,
    ),
    "runaway": Signal(
        0.9,
        "95th percentile completion length over the length cap, while lengths grow",
        "completions grow towards the cap: p95 at {value:.0%} of it (> {threshold:g})",
    ),
    "dominance": Signal(
        0.9,
        "share of the weighted reward that its largest reward function gives",
        "one reward function gives {value:.0%} of the reward (> {threshold:g})",
        share=True,
    ),
    "divergence": Signal(
        0.1,
        "how far a reward function fell while the total reward rose, older half to newer",
        "a reward function fell by {value:.2f} while the total rose (> {threshold:g})",
        signed=True,
    ),
    "saturation": Signal(
        0.98,
        "newer mean reward over the best group mean seen, while completions shrink",
        "reward at {value:.0%} of its best while completions shrink (> {threshold:g})",
        signed=True,
    ),
    "jump": Signal(
        4.0,
        "change of the mean reward, older half of the window to newer, in standard errors",
        "the mean reward moved by {value:.1f} standard errors at once (> {threshold:g})",
    ),
    "lag": Signal(
        4.0,
        "trainer steps since the oldest of the recently sent groups began (rl: off-policy lag)",
        "recently sent groups began {value:.0f} trainer steps ago (> {threshold:g}): they are off-policy",
    ),
    "trainer_stall": Signal(
        300.0,
        "seconds without a trainer step while groups wait in the queue (rl)",
        "the trainer took no step for {value:.0f} s with groups waiting (> {threshold:g} s)",
    ),
    "trainer_wait": Signal(
        60.0,
        "seconds the run has waited for a trainer to register with the trajectory API (rl)",
        "no trainer has registered with the trajectory API for {value:.0f} s (> {threshold:g} s): "
        "start yours, or vftui sim-trainer --api-url URL to try the plumbing",
    ),
    "backlog": Signal(
        1.0,
        "requests waiting per running request at the busiest inference server (rl, from /metrics)",
        "{value:.1f} requests wait for each one running at an inference server (> {threshold:g}): "
        "it is full",
    ),
}
# A prime-rl training run's health (``vftui watch RUN_DIR``, ``vftui status``): each figure from its
# metrics.jsonl, logs and inference servers (``training.health``); names as prime-rl logs them.
TRAINING_SIGNALS: dict[str, Signal] = {
    "stalled": Signal(
        5.0,
        "time since the run's newest metrics row, in its usual step times (at least 60 s)",
        "no new step for {value:.1f} usual step times (> {threshold:g}): is the run stuck?",
    ),
    "entropy_collapse": Signal(
        0.6,
        "how far entropy/all/mean fell below its median over the run's first 10 steps (a share)",
        "entropy fell {value:.0%} below its early level (> {threshold:g})",
    ),
    "mismatch_spike": Signal(
        5.0,
        "mismatch_kl/all/mean: the largest of the last 5 steps over its median of the 20 steps before",
        "mismatch_kl reached {value:.1f}x its recent median (> {threshold:g}x): sampler and trainer disagree",
    ),
    "grad_spike": Signal(
        5.0,
        "optim/grad_norm: the largest of the last 5 steps over its median of the 20 steps before",
        "grad norm reached {value:.1f}x its recent median (> {threshold:g}x): divergence may follow",
    ),
    "reward_falling": Signal(
        2.0,
        "how far the mean reward fell, older half of the last 20 steps to newer, in standard errors",
        "the reward fell by {value:.1f} standard errors over the last 20 steps (> {threshold:g})",
    ),
    "reward_flat": Signal(
        0.01,
        "the reward's range (max - min) over the last 30 steps",
        "the reward moved by only {value:.3g} over the last 30 steps (< {threshold:g}): nothing is learned",
        below=True,
    ),
    "truncation_rising": Signal(
        0.2,
        "the truncated share now (mean of 5 steps) less its early level",
        "truncation rose by {value:.0%} since the run began (> {threshold:g})",
    ),
    "rollout_errors": Signal(
        0.1,
        "the share of rollouts with an error (has_error, mean of the last 5 steps)",
        "{value:.0%} of recent rollouts errored (> {threshold:g})",
    ),
    "log_errors": Signal(
        0.0,
        "ERROR lines in the current attempt's logs",
        "{value:.0f} ERROR lines in the logs (> {threshold:g})",
    ),
    "trainer_waits": Signal(
        0.5,
        "the share of the trainer's step spent in time/wait_for_batch",
        "the trainer waits on rollouts {value:.0%} of its step (> {threshold:g}): inference is the bottleneck",
    ),
    "orchestrator_waits": Signal(
        0.5,
        "the share of the orchestrator's step spent in time/wait_for_policy",
        "the orchestrator waits on the trainer {value:.0%} of its step (> {threshold:g}): the trainer is "
        "the bottleneck",
    ),
    "kv_cache": Signal(
        0.95,
        "KV-cache use of the fullest inference engine (--inference-metrics)",
        "an engine's KV cache is {value:.0%} full (> {threshold:g}): requests get preempted",
    ),
    "backlog": SIGNALS["backlog"],
}
STALL_TIMEOUT = "stall-timeout"  # the gate --stall-timeout sets


EVAL_FIGURES = "reward, accuracy, pass@K"  # an eval's figures a gate can name, with < or > (eval mode, at its end)
_EVAL_FIGURE = re.compile(r"reward|accuracy|pass@[1-9][0-9]*")
_EVAL_SHARE = re.compile(
    r"accuracy|pass@[1-9][0-9]*"
)  # shares, from 0 to 1 (the reward is any number)


@dataclass(frozen=True)
class Gate:
    """``NAME>VALUE`` or (eval figures) ``NAME<VALUE``: passing it stops the run and exits 3."""

    name: str
    op: str
    threshold: float

    def passed(self, value: float) -> bool:
        return value < self.threshold if self.op == "<" else value > self.threshold

    @property
    def is_eval(self) -> bool:
        return _EVAL_FIGURE.fullmatch(self.name) is not None


def read_gates(text: str | None) -> list[Gate]:
    """``identical>0.8,pass@1<0.6`` as gates; a ValueError says what cannot be read."""
    gates: list[Gate] = []
    terms = [t.strip() for t in text.split(",")] if text and text.strip() else []
    if "" in terms:
        raise ValueError(f"cannot read '{text}': a gate is missing between its commas")
    for term in terms:
        match = re.fullmatch(r"\s*([^<>]+?)\s*([<>])\s*(.*)", term)
        name, op, value = match.groups() if match else ("", "", "")
        if not match or not ((name in SIGNALS and op == ">") or _EVAL_FIGURE.fullmatch(name)):
            raise ValueError(
                f"cannot read '{term}': write NAME>VALUE with NAME one of {', '.join(SIGNALS)}, "
                f"or (eval mode) NAME<VALUE or NAME>VALUE with NAME one of {EVAL_FIGURES}"
            )
        try:
            threshold = float(value)
        except ValueError:
            raise ValueError(f"cannot read '{term}': '{value.strip()}' is not a number") from None
        if not math.isfinite(threshold):
            raise ValueError(f"cannot read '{term}': the threshold must be a finite number")
        threshold += 0.0  # -0 is 0, and said so
        share = (name in SIGNALS and SIGNALS[name].share) or _EVAL_SHARE.fullmatch(name)
        within = 0 <= threshold < 1 if op == ">" else 0 < threshold <= 1
        if share and not within:
            raise ValueError(
                f"cannot read '{term}': {name} is a share from 0 to 1, so this gate would "
                f"{'never' if (threshold >= 1) == (op == '>') else 'always'} trip"
            )
        if name in SIGNALS and not SIGNALS[name].signed and threshold < 0:
            raise ValueError(
                f"cannot read '{term}': {name} is never below 0, so this gate would always trip"
            )
        if any(g.name == name and g.op == op for g in gates):
            raise ValueError(f"cannot read '{text}': it names {name}{op} twice")
        gates.append(Gate(name, op, threshold))
    return gates


def parse_gates(text: str | None) -> dict[str, float]:
    """The health gates of ``text``: ``identical>0.8,truncated>0.3`` as ``{"identical": 0.8, "truncated": 0.3}``."""
    return {gate.name: gate.threshold for gate in read_gates(text) if not gate.is_eval}


def eval_gates(text: str | None) -> list[Gate]:
    """The gates of ``text`` over an eval's figures, checked at its end."""
    return [gate for gate in read_gates(text) if gate.is_eval]


@dataclass(frozen=True)
class Tripped:
    """A gate that stopped the run."""

    name: str
    value: float
    threshold: float
    missing: str = "group"  # what a --stall-timeout waited for: a group, or (rl) a trainer step
    op: str = ">"
    unmeasured: str = ""  # why an eval's figure has no value: a gate never passes on nothing

    @property
    def sentence(self) -> str:
        if self.name == STALL_TIMEOUT:
            return f"--stall-timeout {self.threshold:g}: no {self.missing} for {self.value:.0f} s"
        tripped = f"gate {self.name}{self.op}{self.threshold:g} tripped"
        if self.unmeasured:
            return f"{tripped}: {self.unmeasured}, so {self.name} has no value"
        return f"{tripped}: {self.name} is {self.value:.4g}"
