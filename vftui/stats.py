"""Pure statistics over groups, under the metric names the reference logs to wandb.

One implementation serves the collector's wandb windows, the run summary and the views,
so every place that shows ``metrics/mean_reward`` computes it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from numbers import Real
from typing import Protocol


class GroupLike(Protocol):
    scores: list[float]
    metrics: dict[str, list[float]]
    turns: list[int]


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def population_std(values: list[float]) -> float:
    """Population standard deviation; 0 for fewer than two values (as the reference)."""
    if len(values) < 2:
        return 0.0
    mu = mean(values)
    return (sum((v - mu) ** 2 for v in values) / len(values)) ** 0.5


def is_identical(scores: list[float]) -> bool:
    return len(set(scores)) <= 1


@dataclass
class Accumulator:
    """Running sums for one window (or the whole run); ``add`` a group, read ``metrics``."""

    rewards: list[float] = field(default_factory=list)
    per_metric: dict[str, list[float]] = field(default_factory=dict)
    turns: list[int] = field(default_factory=list)
    groups_total: int = 0
    groups_identical: int = 0

    def add(self, group: GroupLike) -> None:
        self.rewards.extend(group.scores)
        for name, values in group.metrics.items():
            numeric = [float(v) for v in values if isinstance(v, Real)]
            self.per_metric.setdefault(name, []).extend(numeric)
        self.turns.extend(group.turns)
        self.groups_total += 1
        self.groups_identical += int(is_identical(group.scores))

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.rewards:
            out["metrics/mean_reward"] = mean(self.rewards)
            out["metrics/reward_std"] = population_std(self.rewards)
        for name, values in self.per_metric.items():
            if values:
                out[f"metrics/{name}"] = mean(values)
        if self.turns:
            out["metrics/avg_num_turns"] = mean([float(t) for t in self.turns])
            out["metrics/max_num_turns"] = float(max(self.turns))
        if self.groups_total:
            out["metrics/groups_with_identical_scores"] = float(self.groups_identical)
            out["metrics/groups_total"] = float(self.groups_total)
            out["metrics/identical_score_rate"] = self.groups_identical / self.groups_total
        return out


def metrics_of(groups: Iterable[GroupLike]) -> dict[str, float]:
    acc = Accumulator()
    for group in groups:
        acc.add(group)
    return acc.metrics()
