"""Pure statistics over groups, under the metric names the reference logs to wandb.

One implementation serves the collector's wandb windows, the run summary and the views,
so every place that shows ``metrics/mean_reward`` computes it the same way.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class GroupLike(Protocol):
    """What a group's figures are folded from (read-only: the events are frozen dataclasses)."""

    @property
    def scores(self) -> list[float]: ...
    @property
    def metrics(self) -> dict[str, list[float]]: ...
    @property
    def turns(self) -> list[int]: ...
    # written or sent; a scored group atroposlib dropped is counted too, as not kept
    @property
    def kept(self) -> bool: ...


TOO_HARD = "identical scores, all low (too hard)"
TOO_EASY = "identical scores, all high (too easy)"


MEAN_REWARD = (
    "metrics/mean_reward"  # the run's mean reward, as wandb, the summary and vftui runs name it
)


def identical_kind(score: float, seen: tuple[float, float] | None) -> str:
    """Why a group of equal scores teaches nothing: all low or all high.

    Low or high against the middle of the scores the run has seen so far; before it has
    seen a spread, a score of 0 or less is low.
    """
    low, high = seen if seen is not None else (score, score)
    if high > low:
        return TOO_HARD if score <= (low + high) / 2 else TOO_EASY
    return TOO_HARD if score <= 0 else TOO_EASY


def widen(seen: tuple[float, float] | None, scores: list[float]) -> tuple[float, float] | None:
    """The lowest and highest score seen, with ``scores`` added."""
    if not scores:
        return seen
    low, high = min(scores), max(scores)
    return (low, high) if seen is None else (min(seen[0], low), max(seen[1], high))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def population_std(values: Sequence[float]) -> float:
    """Population standard deviation; 0 for fewer than two values (as the reference)."""
    if len(values) < 2:
        return 0.0
    mu = mean(values)
    return (sum((v - mu) ** 2 for v in values) / len(values)) ** 0.5


def quantile(ordered: Sequence[float], q: float) -> float | None:
    """The value at quantile ``q`` of an already sorted list (None when empty), as every view shows p50/p95."""
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)


def alike(scores: Sequence[float]) -> bool | None:
    """Whether a group's scores are all equal; None for one rollout, which has nothing to compare: it is in
    no identical-score rate, neither identical nor varied (it read 100% on one screen and 0% on another)."""
    return len(set(scores)) == 1 if len(scores) > 1 else None


def is_identical(scores: Sequence[float]) -> bool:
    return alike(scores) is True


@dataclass
class Moments:
    """Count, sum and sum of squares: mean and population std of values added and removed."""

    count: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def add(self, value: float, sign: int = 1) -> None:
        self.count += sign
        self.total += sign * value
        self.total_sq += sign * value * value

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def std(self) -> float:
        if self.count < 2:
            return 0.0
        mu = self.mean
        return max(0.0, self.total_sq / self.count - mu * mu) ** 0.5


@dataclass
class Accumulator:
    """Running statistics for one window (or a whole run): ``add`` and ``remove`` groups.

    Constant memory and O(1) ``metrics``: a view reads the whole run's figures every frame,
    and a sliding window removes the group that falls out instead of recomputing.
    """

    rewards: Moments = field(default_factory=Moments)
    kept_rewards: Moments = field(default_factory=Moments)
    per_metric: dict[str, Moments] = field(default_factory=dict)
    turn_counts: Counter[int] = field(default_factory=Counter)
    groups_total: int = 0
    groups_compared: int = 0  # of two or more rollouts: those the identical-score rate is over
    groups_identical: int = 0

    def add(self, group: GroupLike, sign: int = 1) -> None:
        if not group.scores:
            return  # not scored (its reward functions failed): nothing to count
        for score in group.scores:
            self.rewards.add(float(score), sign)
            if group.kept:
                self.kept_rewards.add(float(score), sign)
        for name, values in group.metrics.items():
            moments = self.per_metric.setdefault(name, Moments())
            for value in values:
                if isinstance(
                    value, (int, float)
                ):  # not numbers.Real: an ABC check per value costs a big file
                    moments.add(float(value), sign)
        if sign > 0:
            self.turn_counts.update(group.turns)
        else:
            self.turn_counts.subtract(group.turns)
            self.turn_counts = +self.turn_counts  # drop turn counts no group has any more
        self.groups_total += sign
        self.groups_compared += sign * int(alike(group.scores) is not None)
        self.groups_identical += sign * int(is_identical(group.scores))

    def remove(self, group: GroupLike) -> None:
        self.add(group, sign=-1)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.rewards.count:
            out[MEAN_REWARD] = self.rewards.mean
            out["metrics/reward_std"] = self.rewards.std
        if self.kept_rewards.count:
            out["metrics/mean_reward_kept"] = (
                self.kept_rewards.mean
            )  # over the groups written or sent
        for name, moments in self.per_metric.items():
            if moments.count:
                out[f"metrics/{name}"] = moments.mean
        turns = sum(self.turn_counts.values())
        if turns:
            out["metrics/avg_num_turns"] = sum(t * n for t, n in self.turn_counts.items()) / turns
            out["metrics/max_num_turns"] = float(max(self.turn_counts))
        if self.groups_total:
            out["metrics/groups_total"] = float(self.groups_total)
        if self.groups_compared:
            out["metrics/groups_with_identical_scores"] = float(self.groups_identical)
            out["metrics/groups_compared"] = float(self.groups_compared)
            out["metrics/identical_score_rate"] = self.groups_identical / self.groups_compared
        return out


RATE_GROUPS = 64  # the rate every view shows looks back over this many groups
RATE_MIN_SPAN_S = 2.0  # ...and over at least this much busy time: first groups end together
RATE_MARKS = 1024  # groups kept at most to cover that span at high rates
IDLE_GAPS = 5  # a gap between two groups' ends this many typical gaps long is idle time
IDLE_FLOOR_S = 2.0  # ...or this long, whichever is longer
CLOCK_SLACK_S = 1.0  # groups end out of order by less than this; more is the wall clock set back
RATE_DEFINITION = (
    f"groups per second over the last {RATE_GROUPS} groups and at least {RATE_MIN_SPAN_S:g} s, "
    "by when each ended (before that, every group since the first one started), idle time (a pause) "
    "left out; 0 while paused or idle"
)


class Throughput:
    """The run's rate, defined once for the dashboard, ``vftui runs``, the headless log and ``--json``.

    Counted from the groups' own end times rather than from when a view saw them, so a view
    that attached late, or drew less often, shows the same figure. A gap between two ends much
    longer than the typical one (a pause, a stall) is idle time: it counts as one typical gap, so
    the groups after a resume are not spread over the pause. Until the run has gone on longer than
    the window, every group since the start counts over the time since the first one started: its
    first groups, in flight together, end within moments of each other, and timed from the first
    end alone they read as a burst (or, with the old floor of ``RATE_MIN_SPAN_S``, a fast run read
    0.50, then 1.00 g/s). Without start times, that floor is the span.
    """

    def __init__(self) -> None:
        self._marks: deque[tuple[float, int]] = deque(maxlen=RATE_MARKS)
        self._latest = -math.inf
        self._whole_run = True  # every group since the start (or a clock set back) is in the marks
        self._first_start = math.inf  # when the earliest of those groups started, if they said

    def add(self, ended_at: float, tokens: int, started_at: float | None = None) -> None:
        """A group that ended at ``ended_at`` (wall time, comparable across processes), started at
        ``started_at`` if known; a wall clock set back starts the count again rather than make a span
        negative."""
        if ended_at < self._latest - CLOCK_SLACK_S:
            self._marks.clear()
            self._latest, self._whole_run = -math.inf, True
            self._first_start = math.inf
        if started_at is not None and math.isfinite(started_at) and started_at <= ended_at:
            self._first_start = min(self._first_start, started_at)
        if len(self._marks) == RATE_MARKS:
            self._whole_run = False
        self._marks.append((ended_at, tokens))
        self._latest = max(self._latest, ended_at)
        marks = self._marks
        while len(marks) > RATE_GROUPS + 1 and self._latest - marks[1][0] >= RATE_MIN_SPAN_S:
            marks.popleft()  # older than both the window and its span need
            self._whole_run = False

    def rates(self, now: float, collecting: bool) -> tuple[float, float]:
        """(groups/s, tokens/s): 0 unless ``collecting``, and 0 once no group has ended for a while (idle)."""
        if not collecting or not self._marks:
            return 0.0, 0.0
        marks = sorted(self._marks)
        if len(marks) == 1:
            lead = marks[0][0] - self._first_start
            if not self._whole_run or not 0 < lead < math.inf or now - marks[0][0] > IDLE_FLOOR_S:
                return 0.0, 0.0
            return 1 / lead, marks[0][1] / lead
        gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(marks)]
        recent = sorted(gaps[-RATE_GROUPS:])
        typical = recent[(len(recent) - 1) // 2]  # the lower median: idle gaps are the exception
        idle = max(IDLE_FLOOR_S, IDLE_GAPS * typical)
        if now - marks[-1][0] > idle:
            return 0.0, 0.0
        busy, groups, tokens = 0.0, 0, 0
        for gap, (_, mark_tokens) in zip(reversed(gaps), reversed(marks), strict=False):
            if groups >= RATE_GROUPS and busy >= RATE_MIN_SPAN_S:
                break
            busy += typical if gap > idle else gap
            groups, tokens = groups + 1, tokens + mark_tokens
        if not self._whole_run and busy > 0:
            return groups / busy, tokens / busy
        lead = marks[0][0] - self._first_start  # the first group's own time, from its start
        if groups == len(gaps) and 0 < lead + busy < math.inf:  # every group since the first start
            return (groups + 1) / (lead + busy), (tokens + marks[0][1]) / (lead + busy)
        span = max(busy, RATE_MIN_SPAN_S)
        return groups / span, tokens / span
