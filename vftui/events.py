"""The contract between the collector and the views: plain dataclasses, no behaviour.

The collector (``vftui.collector``) emits these; the views (headless, Textual) consume
them. Neither side imports the other, so each event carries everything a view needs.
What a view may do back is ``run_controls``; how a group line is saved, ``group_format``.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vftui.group_format import trained_tokens
from vftui.stats import Accumulator, is_identical, mean


class Mode(enum.StrEnum):
    """What a run collects: groups for SFT from any chat endpoint (Atropos ``process``),
    token-level groups with logprobs for a trainer (Atropos ``serve``), or an evaluation of a
    model on the environment's eval split (Atropos ``evaluate``)."""

    SFT = "sft"
    RL = "rl"
    EVAL = "eval"


class RunState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def collecting(self) -> bool:
        """Groups are being made (or finished off): the only states with a rate."""
        return self in (RunState.RUNNING, RunState.PAUSING, RunState.STOPPING)


@dataclass(frozen=True)
class RunStarted:
    """What is being run; sent once, before the first group (a viewed file's, as it was recorded)."""

    mode: Mode
    env: str
    model: str
    endpoint: str
    simulated: bool
    out_path: str
    groups_total: int
    groups_done: int
    group_size: int
    temperature: float
    reward_functions: list[str]
    tokenizer: str = ""
    started_at: float = (
        0.0  # wall clock, when known: a dashboard attaching later counts its clock from it
    )
    max_tokens: int | None = (
        None  # a rollout's completion cap (per turn times turns): the charts mark it
    )


@dataclass(frozen=True)
class GroupCollected:
    """One scored group, after it was written to the run's jsonl."""

    index: int
    item: int
    example_id: Any
    scores: list[float]
    metrics: dict[str, list[float]]
    turns: list[int]
    tokens: list[Sequence[int]]  # lists, or machine arrays once compacted
    masks: list[Sequence[int]]
    messages: list[list[dict[str, Any]]]
    finish_reasons: list[str | None]
    temperature: float
    started_at: float
    elapsed_s: float
    logprobs: list[Sequence[float]] | None = None

    kept = True  # see GroupDropped

    @property
    def identical(self) -> bool:
        return is_identical(self.scores)

    @property
    def completion_length(self) -> float:
        """Its rollouts' mean count of the tokens a trainer learns from: the table's length."""
        return mean([float(trained_tokens(m)) for m in self.masks])

    def compacted(self) -> GroupCollected:
        """The group with its token ids, masks and logprobs as machine arrays.

        A view keeps hundreds of groups and a pipe carries every one: a 2k-token rollout
        is 8 KB this way instead of ~70 KB of Python ints.
        """
        if all(isinstance(t, array) for t in self.tokens):
            return self
        return dataclasses.replace(
            self,
            tokens=[array("i", t) for t in self.tokens],
            masks=[array("i", m) for m in self.masks],
            logprobs=[array("f", lp) for lp in self.logprobs] if self.logprobs else None,
        )


@dataclass(frozen=True)
class RunSoFar:
    """For a dashboard attaching to a run in progress: the figures of every group so far.

    It comes after the replayed groups (only the last window of them), so the run's
    figures count every group once, as they would have had the dashboard watched throughout.
    """

    totals: Accumulator
    dropped: dict[str, int]


@dataclass(frozen=True)
class MetricsWindow:
    """The metrics of one logging window, under the names the reference logs to wandb."""

    step: int
    metrics: dict[str, float]


@dataclass(frozen=True)
class FileProgress:
    """``vftui view``'s background pass over a file: how far it is, and its figures so far.

    The groups themselves stay in the file (the view reads a row's figures from the pass's
    index and a selected group's tokens from disk), so a file of any size is one event a tick.
    """

    groups: int
    bytes_read: int
    bytes_total: int
    totals: Accumulator  # every group read so far, for the panels
    reward_history: list[float]
    identical_history: list[float]
    done: bool = False


@dataclass(frozen=True)
class RunStatus:
    state: RunState
    groups_done: int
    groups_total: int
    detail: str = ""


TRAJECTORY_API = "trajectory API"
WAITING_FOR_TRAINER = (
    "waiting for a trainer to register"  # a starting rl run's detail until one has
)
"""``EndpointTrouble.service`` of the Atropos trajectory API (rl mode)."""


@dataclass(frozen=True)
class EndpointTrouble:
    """A failed attempt; the collector retries after ``retry_in_s``.

    ``service`` is what failed: the model ``endpoint`` or the ``trajectory API``;
    ``max_attempts`` 0 means it is retried for as long as the run goes on.
    """

    attempt: int
    max_attempts: int
    error: str
    retry_in_s: float
    service: str = "endpoint"


@dataclass(frozen=True)
class RequestStats:
    """The model endpoint's traffic (sft), sent about once a second while collecting.

    ``limit`` is how many requests may be in flight now: ``ceiling`` (``--concurrency``)
    until the endpoint rate-limits, then lower until it stops. Rates and latencies cover
    the last few seconds; the totals cover the run.
    """

    in_flight: int
    limit: int
    ceiling: int
    groups_in_flight: int
    requests_per_s: float
    tokens_per_s: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    rate_limited: bool
    requests_total: int = 0
    rate_limited_total: int = 0
    failed_total: int = 0


@dataclass(frozen=True)
class GroupDropped:
    """A scored group atroposlib would not send (all scores equal, too long, malformed).

    It carries its scores and metrics: the identical-score rate and the mean reward count
    every scored group, as the reference does, not only those sent.
    """

    item: int
    reason: str
    scores: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    turns: list[int] = field(default_factory=list)

    kept = False


@dataclass(frozen=True)
class EnvShare:
    """A run of ours sending to the trajectory API ``vftui watch`` reads, as that run sees it."""

    run: str  # its jsonl
    env_id: int | None
    weight: float  # its share of each batch
    queued: int | None  # its groups waiting in the queue
    workers: int | None
    workers_allowed: int | None
    lag: int | None


@dataclass(frozen=True)
class ApiStatus:
    """One poll of the trajectory API: by an rl run (our env's view) or by ``vftui watch``.

    ``current_step`` counts the batches trainers pulled; ``queue_size`` is in groups;
    ``env_weight`` and ``env_id`` are our env's (None when watching from outside).
    """

    api_url: str
    reachable: bool
    trainer_registered: bool = False
    batch_size: int = -1
    current_step: int = 0
    queue_size: int = 0
    env_weight: float | None = None
    env_id: int | None = None
    error: str = ""
    polled_at: float = field(default_factory=time.time)
    self_queue_size: int | None = None  # our env's own groups waiting in the queue
    workers: int | None = None  # our groups being collected now
    workers_allowed: int | None = (
        None  # how many atroposlib allows now: fewer while the queue is full (backpressure)
    )
    lag: int | None = (
        None  # trainer steps since the oldest of our recently sent groups began (off-policy lag)
    )
    envs: tuple[EnvShare, ...] = ()  # our live runs that send to it (``vftui watch``)


@dataclass(frozen=True)
class ServerStatus:
    """rl: one inference server every few seconds (see ``collector.rl.server_watch``).

    ``running``, ``waiting`` and ``kv_cache`` (a fraction) come from the server's Prometheus
    ``/metrics`` and are None where it has none (``metrics_note`` says why).
    """

    url: str
    healthy: bool  # atroposlib's own health check
    requests: int  # finished since the run started
    retries: int  # attempts beyond each request's first
    latency_p50_s: float | None
    latency_p95_s: float | None
    running: float | None = None
    waiting: float | None = None
    kv_cache: float | None = None
    metrics_note: str = ""


@dataclass(frozen=True)
class Health:
    """The run's health over its recent window, about once a second (see ``collector.health``).

    ``signals`` holds each signal's value now (the names ``--fail-on`` takes); ``active``
    the alerts that are on.
    """

    groups: int
    finish_reasons: dict[str, int]
    completion_mean: float
    completion_p95: float
    dropped: dict[str, int]
    reward_all: float | None
    reward_trainable: (
        float | None
    )  # over the groups a trainer learns from: kept, scores not all equal
    latency_p50_s: float | None
    latency_p95_s: float | None
    tokens_per_s: float | None
    signals: dict[str, float]
    active: list[str]
    thresholds: dict[str, float] = field(
        default_factory=dict
    )  # each signal's alert threshold in this run


Figure = dict[
    str, float | int | None
]  # a mean over items with its 95% interval: mean, ci_low, ci_high, n


@dataclass(frozen=True)
class EvalReport:
    """An eval's figures over the items done so far: once a second, and at its end (``final``).

    ``figures`` holds ``reward`` (the mean of item means, = avg@k), ``pass@1`` ... ``pass@k``
    (unbiased, rollouts passing at ``reward >= threshold``) and ``accuracy`` (Atropos's: the share
    of rollouts with reward > 0); ``functions`` each reward function's mean (``eval_stats``).
    In rl mode with ``--eval-every``, each eval's figures come once, ``final``, with its ``step``.
    """

    items: int
    items_total: int
    rollouts_per_item: int
    threshold: float
    figures: dict[str, Figure]
    functions: dict[str, Figure]
    final: bool = False
    step: int | None = None  # an eval during rl: the trainer step it evaluated
    errors: int = 0  # examples done whose group failed to score (a reward raised, or was no number): not in the figures


@dataclass(frozen=True)
class Alert:
    """A health signal went over its threshold (``active``) or came back: a yellow flag, not a verdict."""

    name: str
    value: float
    threshold: float
    active: bool
    reason: str


@dataclass(frozen=True)
class TemperatureChanged:
    temperature: float


@dataclass(frozen=True)
class GroupsDumped:
    path: str
    groups: int
    of: int  # the groups the window held: more than ``groups`` when a filter chose
    where: str = ""  # the filter that chose them, as typed


@dataclass(frozen=True)
class LogRecord:
    level: str
    logger: str
    message: str
    created: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunSummary:
    """The last event of a run: totals over every group, and where the data is."""

    state: RunState
    groups_done: int
    groups_total: int
    out_path: str
    elapsed_s: float
    metrics: dict[str, float]
    error: str = ""
    dropped: dict[str, int] = field(default_factory=dict)  # scored groups not sent, by reason
    gate: str = ""  # the --fail-on gate (or stall-timeout) that stopped the run, if one did
    gates_held: str = ""  # a finished run's --fail-on gates, each with its last value
    truncated: tuple[int, int] = (0, 0)  # of the rollouts kept: cut at the token cap, and in all


Event = (
    RunStarted
    | GroupCollected
    | MetricsWindow
    | FileProgress
    | RunSoFar
    | RunStatus
    | EndpointTrouble
    | RequestStats
    | GroupDropped
    | ApiStatus
    | ServerStatus
    | Health
    | EvalReport
    | Alert
    | TemperatureChanged
    | GroupsDumped
    | LogRecord
    | RunSummary
)
