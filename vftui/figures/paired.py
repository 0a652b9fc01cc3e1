"""Tests of a change where the items pair: McNemar's exact test of pass/fail, the paired bootstrap.

Items are the independent units (an item's rollouts share its difficulty), so both resample or count items,
never rollouts. McNemar's test is always the exact one (the two-sided binomial sum over the items that
flipped; past ``EXACT_FLIPS`` in floats from its largest term down, only as far as a term still counts): it
costs microseconds at any count an eval has, it is what the chi-square with continuity correction
approximates, and one test throughout means no jump in p at a cut such as b + c < 25. The bootstrap is the
percentile interval of the mean over ``RESAMPLES`` resamples of the items, drawn from ``SEED`` so the same
inputs give the same interval; the items are taken in the order of their keys, so swapping the sources
negates the interval exactly. From ``CELLS_FROM`` items a resample draws how many items it takes of each
cell of like values (one multinomial draw a resample: a cell's count, never an item's pick): the same
distribution of means for values that repeat (rewards of a few levels), within a small share of a standard
error otherwise (``_cells``); a million items took minutes one pick at a time. Its percentiles are
Hesterberg's expanded ones (the level whose normal quantile is sqrt(n/(n-1)) t(n-1)'s): the plain percentile
interval is too narrow for the dozen items a quick eval has (it covers 95% only as n grows). Even expanded,
it cannot reach past the largest change seen, so a change's interval is the wider of it and the paired t
interval, and none under ``PAIRED_MIN`` items (``paired_change``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vftui.figures.eval_stats import CONFIDENCE, Estimate, t_half_width, t_quantile

if TYPE_CHECKING:
    import numpy as np
    from numpy import ndarray

RESAMPLES = 10_000  # the tails hold ~1% each: 2000 left them a few dozen resamples, and noisy
SEED = 0
GATHERED = 1 << 20  # item picks drawn at once: a resample's picks, many resamples, in ~8 MB
EXACT_FLIPS = 1_000  # McNemar's sum in whole numbers up to this many flips: p to its last bit
CELLS_FROM = 10_000  # items from which resamples count cells of like values (below: picks, as ever)
CELLS_PER_SD = 64  # cells to a standard deviation of the changes (``_cells``)
PICKS_PER_CELL = 8  # a cell's binomial draw costs about as much as this many item picks
PAIRED_MIN = 6
"""Items in common a change's interval needs. Under it no test free of the changes' distribution reaches
95% (the sign-flip test's smallest p is 2/2^n: 0.0625 at 5 items), and the bootstrap ruled out 0 for 2
items that moved alike, by however little, half the time."""


def in_order(key: str) -> tuple[int, int, str, str]:
    """Items in the order of their keys, example ids as numbers (``9`` before ``15``), of any length."""
    if key.isascii() and key.isdigit():
        digits = key.lstrip("0")
        return 0, len(digits), digits, key
    return 1, 0, key, key


def item_passes(rewards: Sequence[float], threshold: float) -> bool:
    """An item passes when at least half its rollouts reach ``threshold`` (with one rollout: that one)."""
    return 2 * sum(r >= threshold for r in rewards) >= len(rewards)


def mcnemar_exact(lost: int, gained: int) -> float:
    """McNemar's exact two-sided p: of ``lost + gained`` items that flipped, the chance under no change
    (each flip either way at 1/2) of a split at least as uneven as ``lost`` against ``gained``."""
    flipped, fewer = lost + gained, min(lost, gained)
    if 2 * fewer + 1 >= flipped:
        return 1.0  # as even as the count allows: every split is at least as uneven
    if flipped <= EXACT_FLIPS:  # exact integers, one rounding: no underflow on the way
        return 2 * _binomial_tail(flipped, fewer) / 2**flipped
    return min(1.0, 2 * math.exp(_log_half_tail(flipped, fewer)))


def _binomial_tail(flipped: int, fewer: int) -> int:
    """C(flipped, 0) + ... + C(flipped, fewer), each binomial from the one before (a comb each was cubic)."""
    term = total = 1
    for i in range(1, fewer + 1):
        term = term * (flipped - i + 1) // i
        total += term
    return total


def _log_half_tail(flipped: int, fewer: int) -> float:
    """The log of P(X <= fewer), X ~ Binomial(flipped, 1/2), for ``fewer`` below half: its largest term from
    ``lgamma``, the rest as ratios to it, summed down until a term is below a float's last bit of the sum
    (each ratio is smaller than the one before: about sqrt(flipped) terms near the middle, few in a tail)."""
    largest = (
        math.lgamma(flipped + 1)
        - math.lgamma(fewer + 1)
        - math.lgamma(flipped - fewer + 1)
        - flipped * math.log(2)
    )
    total = term = 1.0
    for i in range(fewer, 0, -1):
        term *= i / (flipped - i + 1)
        total += term
        if term < total * 2.0**-60:
            break
    return largest + math.log(total)


@dataclass(frozen=True)
class Flips:
    """Each paired item passed or failed in A and in B, at ``threshold``; the keys of those that flipped."""

    threshold: float
    both: int  # passed in A and in B
    neither: int
    lost: list[str]  # passed in A, failed in B
    gained: list[str]  # failed in A, passed in B

    @property
    def p_value(self) -> float:
        return mcnemar_exact(len(self.lost), len(self.gained))


def flips(pairs: dict[str, tuple[Sequence[float], Sequence[float]]], threshold: float) -> Flips:
    """``pairs`` (an item's rewards in A and in B, by key) passed or failed at ``threshold``."""
    counts = {(True, True): 0, (False, False): 0}
    lost, gained = [], []
    for key in sorted(pairs, key=in_order):
        in_a, in_b = pairs[key]
        outcome = (item_passes(in_a, threshold), item_passes(in_b, threshold))
        if outcome == (True, False):
            lost.append(key)
        elif outcome == (False, True):
            gained.append(key)
        else:
            counts[outcome] += 1
    return Flips(threshold, counts[True, True], counts[False, False], lost, gained)


def paired_change(values: Sequence[float]) -> Estimate:
    """The mean of per-item changes with its 95% interval: none under ``PAIRED_MIN`` items, else the wider of
    the expanded bootstrap and the paired t interval (the bootstrap's stays inside the changes seen, too
    narrow for a few items that moved alike; t's assumes the changes normal, which the bootstrap does not)."""
    count = len(values)
    if count < PAIRED_MIN:
        return Estimate(math.fsum(values) / count if count else math.nan, None, None, count)
    mean, low, high = _resampled(values, SEED, RESAMPLES)
    half = t_half_width(values)
    return Estimate(mean, min(low, mean - half), max(high, mean + half), count)


def _resampled(values: Sequence[float], seed: int, resamples: int) -> tuple[float, float, float]:
    """The mean of two or more ``values`` and its expanded percentile interval."""
    import numpy as np  # only compare resamples: 10,000 resamples of thousands of items, in C

    count = len(values)
    data = np.asarray(values, dtype=float)
    mean = float(_means(data, np.arange(count)[None, :])[0])
    rng = np.random.default_rng(seed)
    cells = _cells(data) if count >= CELLS_FROM else None
    means = (
        _picked_means(data, rng, resamples)
        if cells is None
        else _counted_means(*cells, rng, resamples)
    )
    means.sort()
    below = round(expanded_tail(count) * (resamples - 1))  # as many resamples cut off each side
    return mean, float(means[below]), float(means[resamples - 1 - below])


def expanded_tail(count: int) -> float:
    """The share of resamples below a mean of ``count`` items' expanded 95% interval (under 2.5%)."""
    z = math.sqrt(count / (count - 1)) * t_quantile(0.5 + CONFIDENCE / 2, count - 1)
    return 1 - statistics.NormalDist().cdf(z)


def _picked_means(data: ndarray, rng: np.random.Generator, resamples: int) -> ndarray:
    """Each resample's mean, its items picked one by one (``GATHERED`` picks at a time)."""
    import numpy as np

    count = len(data)
    step = max(1, GATHERED // count)
    return np.concatenate(
        [
            _means(data, rng.integers(0, count, size=(min(step, resamples - done), count)))
            for done in range(0, resamples, step)
        ]
    )


def _cells(data: ndarray) -> tuple[ndarray, ndarray] | None:
    """The items as cells of like values: how many each holds and their mean; None where picking the items is
    less work (more than one cell to ``PICKS_PER_CELL`` items).

    A cell is the values that round to one multiple of the changes' sd / ``CELLS_PER_SD``. Drawing how many
    of each cell a resample takes, and counting each at its cell's mean, leaves out only how the items
    within a cell differ: nothing where values repeat exactly, else a term of mean 0 (a cell's values sum to
    its mean times its count) whose spread is under 1/``CELLS_PER_SD`` of the mean's standard error, against
    the ~3% by which 10,000 resamples' percentiles vary. Rounding is odd (half to even) and the cells are in
    the order of their first item, so negated changes make the same cells, their means negated."""
    import numpy as np

    spread = float(data.std())
    with np.errstate(over="ignore", invalid="ignore"):
        keys = np.rint(data * (CELLS_PER_SD / spread)) if spread > 0 else np.zeros_like(data)
    if not np.isfinite(keys).all():
        return None
    _, first, cell, sizes = np.unique(
        keys, return_index=True, return_inverse=True, return_counts=True
    )
    if len(sizes) * PICKS_PER_CELL > len(data):
        return None
    order = np.argsort(first, kind="stable")  # by their first item, not by value
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    sums = np.bincount(rank[cell.ravel()], weights=data, minlength=len(order))
    return sizes[order], sums / sizes[order]


def _counted_means(
    sizes: ndarray, centres: ndarray, rng: np.random.Generator, resamples: int
) -> ndarray:
    """Each resample's mean from how many items it takes of each cell (a multinomial draw, as picking them
    would give), counted at the cells' means."""
    import numpy as np

    count = int(sizes.sum())
    shares = sizes / count
    step = max(1, GATHERED // len(sizes))
    return np.concatenate(
        [
            (rng.multinomial(count, shares, size=min(step, resamples - done)) * centres).sum(axis=1)
            / count
            for done in range(0, resamples, step)
        ]
    )


def _means(data: ndarray, picks: ndarray) -> ndarray:
    """The mean of each row of ``picks`` (indices into ``data``), the observed one included: one way for
    both, so a resample of the items as they are is the observed mean to the last bit."""
    return data[picks].sum(axis=1) / picks.shape[1]
