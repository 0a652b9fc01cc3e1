"""The numbers of an evaluation: pass@k without bias, means with 95% intervals, per-item spreads.

An eval rolls each item k times. Items are the independent units (an item's rollouts share
its difficulty), so every interval is over item-level values: the mean reward is the mean
of item means, with a Student t interval over them; pass@k is the mean over items of the
unbiased estimator 1 - C(n-c, k)/C(n, k) (n rollouts, c of them passing), and it and the
accuracy are proportions, with a Wilson score interval over the items (``proportion``): a t
interval collapses to ``± 0`` when every item passes or every one fails, Wilson's does not.
No interval from a single item. Pure Python, no view or collector.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vftui.events import EvalReport

CONFIDENCE = 0.95
Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)  # 1.96


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k rollouts drawn from n (c of them passing) passes.

    Unbiased where "c of k passed" is not: computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which
    stays exact for large n (the binomials themselves overflow floats).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_all_k(n: int, c: int, k: int) -> float:
    """pass^k (vf-eval's ``pass_all_k``): the chance that all of k rollouts drawn from n pass, C(c, k)/C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Estimate:
    """A mean and its 95% interval (None when there are too few values to say)."""

    mean: float
    low: float | None
    high: float | None
    count: int

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    def as_dict(self) -> dict[str, float | int | None]:
        """For events and files: a mean of no values is None (no figure), never NaN."""
        return {
            "mean": self.mean if self.count else None,
            "ci_low": self.low,
            "ci_high": self.high,
            "n": self.count,
        }


def estimate(values: Sequence[float], bounds: tuple[float, float] | None = None) -> Estimate:
    """The mean of ``values`` with a Student t interval (clipped to ``bounds`` when given)."""
    count = len(values)
    if count == 0:
        return Estimate(math.nan, None, None, 0)
    mean = statistics.fmean(values)
    if count < 2:
        return Estimate(mean, None, None, count)
    half = t_half_width(values)
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return Estimate(mean, low, high, count)


def t_half_width(values: Sequence[float]) -> float:
    """Half the width of the 95% Student t interval of the mean of two or more values."""
    count = len(values)
    return t_quantile(0.5 + CONFIDENCE / 2, count - 1) * statistics.stdev(values) / math.sqrt(count)


def wilson(p: float, trials: float) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` seen over ``trials`` trials: every q with
    (p - q)^2 <= Z^2 q(1 - q) / trials. Never empty, never a point, inside [0, 1]."""
    z2 = Z * Z
    scale = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / scale
    half = Z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion(values: Sequence[float]) -> Estimate:
    """The mean of per-item proportions in [0, 1], with Wilson's interval over the items; none from one.

    The items are the trials: an item's rollouts share its difficulty, so they are not trials of their
    own (counting them put 8 items that all passed at pass@4 >= 0.89, where over the items it is >= 0.68,
    and such intervals held the true figure 71-90% of the time). An item's proportion varies no more than
    a 0/1 outcome of the same mean does, so Wilson's interval over the items holds its 95%.
    """
    count = len(values)
    if count == 0:
        return Estimate(math.nan, None, None, 0)
    p = min(1.0, max(0.0, statistics.fmean(values)))
    if count < 2:
        return Estimate(p, None, None, count)
    low, high = wilson(p, count)
    return Estimate(p, min(low, p), max(high, p), count)


def difference(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """mean(b) - mean(a) of two independent samples, with Welch's t interval."""
    if len(a) < 2 or len(b) < 2:
        return Estimate(
            statistics.fmean(b) - statistics.fmean(a) if a and b else math.nan,
            None,
            None,
            min(len(a), len(b)),
        )
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    mean = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0:
        return Estimate(mean, mean, mean, min(len(a), len(b)))
    share_a, share_b = va / (va + vb), vb / (va + vb)  # Welch-Satterthwaite's df, free of scale
    df = 1 / (
        share_a**2 / (len(a) - 1) + share_b**2 / (len(b) - 1)
    )  # fractional, as the textbook's
    half = t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(va + vb)
    return Estimate(mean, mean - half, mean + half, min(len(a), len(b)))


@dataclass(frozen=True)
class ItemResult:
    """One item's rollouts: their rewards and what they say about the item."""

    item: int
    rewards: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rewards)

    @property
    def low(self) -> float:
        return min(self.rewards)

    @property
    def high(self) -> float:
        return max(self.rewards)

    @property
    def std(self) -> float:
        """Population std of the item's rewards: its flakiness (0 for one rollout)."""
        return statistics.pstdev(self.rewards) if len(self.rewards) > 1 else 0.0

    def passed(self, threshold: float) -> int:
        return sum(r >= threshold for r in self.rewards)


def pass_at(items: Sequence[ItemResult], k: int, threshold: float) -> Estimate:
    """pass@k over items that have at least k rollouts."""
    counted = [i for i in items if len(i.rewards) >= k]
    values = [pass_at_k(len(i.rewards), i.passed(threshold), k) for i in counted]
    return proportion(values)


def k_values(rollouts: int) -> list[int]:
    """The k of pass@k reported for ``rollouts`` per item: powers of two up to it, and it (as vf-eval, plus n)."""
    ks = [1 << i for i in range(rollouts.bit_length()) if 1 << i <= rollouts]
    return ks if ks[-1] == rollouts else [*ks, rollouts]


class EvalTally:
    """An eval's items as they come, and its figures at any moment: each an ``Estimate`` over items.

    ``reward`` (= avg@k, the mean of item means), ``pass@k`` for each k of ``k_values``,
    ``accuracy`` (Atropos's: the share of rollouts with reward > 0, item-averaged), and per
    reward function its mean.
    """

    def __init__(self, rollouts: int, threshold: float) -> None:
        self.rollouts, self.threshold = rollouts, threshold
        self.items: dict[int, ItemResult] = {}
        self.functions: dict[str, dict[int, float]] = {}
        self.errors: dict[
            int, str
        ] = {}  # items whose group failed to score, with why: done, in no figure

    def add(
        self, item: int, rewards: Sequence[float], metrics: Mapping[str, Sequence[float]]
    ) -> None:
        self.errors.pop(item, None)  # collected again, and scored this time
        self.items[item] = ItemResult(item, tuple(rewards))
        for name, values in metrics.items():
            if values:
                self.functions.setdefault(name, {})[item] = statistics.fmean(values)

    def fail(self, item: int, reason: str) -> None:
        """An item whose group failed to score: an error of the eval, never replaced by another item."""
        if item not in self.items:
            self.errors[item] = reason

    def figures(self) -> dict[str, Estimate]:
        items = list(self.items.values())
        figures = {"reward": estimate([i.mean for i in items])}
        for k in k_values(self.rollouts):
            figures[f"pass@{k}"] = pass_at(items, k, self.threshold)
        figures["accuracy"] = proportion(
            [sum(r > 0 for r in i.rewards) / len(i.rewards) for i in items]
        )
        return figures

    def function_figures(self) -> dict[str, Estimate]:
        return {name: estimate(list(values.values())) for name, values in self.functions.items()}

    def report(self, items_total: int, final: bool = False) -> EvalReport:
        """The figures as the event every view shows."""
        return EvalReport(
            items=len(self.items),
            items_total=items_total,
            rollouts_per_item=self.rollouts,
            threshold=self.threshold,
            figures={name: e.as_dict() for name, e in self.figures().items()},
            functions={name: e.as_dict() for name, e in self.function_figures().items()},
            final=final,
            errors=len(self.errors),
        )


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError("t_quantile needs 0 < p < 1 and df >= 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def t_cdf(t: float, df: float) -> float:
    """Student's t CDF through the regularized incomplete beta function."""
    x = df / (df + t * t)
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), by its continued fraction (Lentz's method)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side only
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return front * result / a
