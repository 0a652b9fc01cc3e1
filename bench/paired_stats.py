"""Seconds of ``vftui compare``'s tests of a change where items pair, at sizes big evals reach.

- McNemar's exact p (``paired.mcnemar_exact``) against the sum it replaced, a ``math.comb`` for each term
  (cubic in the items that flipped: 20,000 flips took 47 s), at flips split 49:51.
- The paired bootstrap's 10,000 resampled means (``paired._resampled``), as ``compare`` draws them (from
  ``CELLS_FROM`` items: a multinomial draw of cells of like values), against picking every resample's items
  one by one (``paired._picked_means``, what it did at any size: a million items took 232 s), for changes of
  a few levels (rewards of 0/0.25/.../1: exact cells) and skewed ones, every value its own. Picks are timed
  up to ``--picked-up-to`` items (their cost is linear in the items: 10x the items, 10x the seconds).

Each row: the seconds of each and their ratio, the best of ``--repeats``. The machine's load is printed
first: its neighbours swing a run by ±15%.

    python bench/paired_stats.py [--flips 2000,5000,10000] [--items 10000,100000,1000000] [--repeats 3]
    python bench/paired_stats.py --quick   # small sizes, one repeat: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

import numpy as np
from _machine import described

from vftui.figures import paired


def best_of(repeats: int, work: Callable[..., object], *args: object) -> float:
    """The fastest of ``repeats`` runs of ``work(*args)``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def comb_each(lost: int, gained: int) -> float:
    """McNemar's exact p as it was summed: a ``math.comb`` for each term of the smaller tail."""
    flipped = lost + gained
    tail = sum(math.comb(flipped, i) for i in range(min(lost, gained) + 1))
    return min(1.0, 2 * tail / 2**flipped)


def mcnemar_rows(flips: list[int], repeats: int) -> None:
    print("## McNemar's exact p, flips split 49:51")
    print(f"{'flipped':>10} {'comb each (s)':>14} {'now (s)':>10} {'ratio':>10} {'p':>10}")
    for flipped in flips:
        lost = flipped * 49 // 100
        gained = flipped - lost
        now = best_of(repeats, paired.mcnemar_exact, lost, gained)
        then = best_of(1, comb_each, lost, gained)
        p = paired.mcnemar_exact(lost, gained)
        assert math.isclose(p, comb_each(lost, gained), rel_tol=1e-9), "the same p"
        print(f"{flipped:>10,} {then:>14.3f} {now:>10.5f} {then / now:>9.0f}x {p:>10.3g}")


def changes(kind: str, count: int) -> list[float]:
    """``count`` per-item changes: of a few levels, or skewed with every value its own."""
    rng = random.Random(0)
    if kind == "levels":
        levels = [-1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0]
        return [rng.choice(levels) for _ in range(count)]
    return [rng.gammavariate(2, 1) - 2 for _ in range(count)]


def picked(values: list[float]) -> None:
    """The bootstrap's resampled means, every item picked one by one (as it was at any size)."""
    paired._picked_means(
        np.asarray(values, dtype=float), np.random.default_rng(paired.SEED), paired.RESAMPLES
    )


def bootstrap_rows(items: list[int], picked_up_to: int, repeats: int) -> None:
    print(f"## the paired bootstrap, {paired.RESAMPLES:,} resamples")
    print(f"{'items':>10} {'changes':>8} {'picks (s)':>10} {'now (s)':>10} {'ratio':>10}")
    for count in items:
        for kind in ("levels", "skewed"):
            values = changes(kind, count)
            now = best_of(repeats, paired._resampled, values, paired.SEED, paired.RESAMPLES)
            if count <= picked_up_to:
                then = best_of(1, picked, values)
                said, ratio = f"{then:>10.2f}", f"{then / now:>9.1f}x"
            else:
                said, ratio = f"{'-':>10}", f"{'-':>10}"
            print(f"{count:>10,} {kind:>8} {said} {now:>10.3f} {ratio}")


def numbers(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=numbers, default=[2_000, 5_000, 10_000])
    parser.add_argument("--items", type=numbers, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--picked-up-to", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.flips, args.items, args.picked_up_to, args.repeats = [2_000], [10_000], 10_000, 1
    print(described())
    mcnemar_rows(args.flips, args.repeats)
    bootstrap_rows(args.items, args.picked_up_to, args.repeats)


if __name__ == "__main__":
    main()
