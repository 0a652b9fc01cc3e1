"""Runs side by side: each source's figures with 95% intervals, and each later source against the
first, paired by item where both have it with the same prompt (the per-item change, its mean and
interval).

Pairing matters: items differ far more in difficulty than two checkpoints differ in skill, so the
paired interval of a change is much narrower than the two sources' own intervals suggest. Paired, every
change's interval is the items' (``paired.paired_change``) and pass/fail gets McNemar's test; with no item
in common, Welch's t interval of the two sources' item values. The same key with another prompt (a
run of the train split against an eval of the eval split) is no pair; where most keys in common are
such, or they leave fewer pairs than an interval needs, the sources are compared unpaired.

``--fail-if-worse`` judges the later source over the first's items: each it did not score (an error,
or an item it does not hold) counts as a failure (``Judged``), never passed over.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from vftui.defaults import PASS_THRESHOLD
from vftui.figures.eval_stats import (
    Estimate,
    ItemResult,
    difference,
    estimate,
    k_values,
    pass_at,
    pass_at_k,
)
from vftui.figures.paired import PAIRED_MIN, Flips, flips, in_order, paired_change
from vftui.run_files.results import MIXED, Item, Source
from vftui.stats import is_identical

BINS = 10
PAIRED, UNPAIRED = "paired bootstrap", "Welch's t"  # how a change's intervals are made
# why a change is unpaired: no key in common; most keys in common hold other prompts; too few pairs left
NONE_SHARED, PROMPTS_DIFFER, TOO_FEW = "no item in common", "prompts differ", "too few pairs"


@dataclass(frozen=True)
class Summary:
    """One source's figures; every interval is over its items."""

    source: Source
    threshold: float  # pass@1's
    rollouts: int  # the fewest rollouts an item has
    reward: Estimate
    pass1: Estimate
    functions: dict[str, Estimate]
    truncated: float  # share of rollouts cut at the length limit
    identical: (
        float | None
    )  # share of items of two or more rollouts that all scored the same; None: no such item
    completion_chars: float  # mean characters the model wrote in a rollout


@dataclass(frozen=True)
class ItemChange:
    key: str
    before: float
    after: float

    @property
    def change(self) -> float:
        return self.after - self.before


@dataclass(frozen=True)
class Pairing:
    """How two sources' items lined up by key: a pair is one key with one prompt in both (or with a prompt
    one source does not record: matched by id alone); one key with two prompts is two examples, no pair."""

    by_prompt: int  # keys in both with the same prompt
    by_id: int  # keys in both where a source records no prompt
    different: int  # keys in both with different prompts: not pairs
    only_first: int  # keys the first source holds and the later does not
    only_later: int
    unpaired: str | None  # why the change is unpaired (``NONE_SHARED``, ...); None: it is paired

    @property
    def pairs(self) -> int:
        return self.by_prompt + self.by_id

    @property
    def shared(self) -> int:
        """Keys in both sources, whatever their prompts."""
        return self.pairs + self.different


@dataclass(frozen=True)
class Judged:
    """The change ``--fail-if-worse`` judges: the reward's, with each first-source item the later source did
    not score counted as a failure at ``floor`` (paired: the first's items it does not hold, its errors
    among them; unpaired: its errors). ``reward`` is the change's own where it missed none."""

    reward: Estimate
    unscored: int  # the items counted as failures
    floor: float  # the reward each counts at: 0, or the lowest either source holds if that is lower
    errors: int  # the examples the later source failed to score, whichever items they are


@dataclass(frozen=True)
class Change:
    """A later source against the first: the change of each figure, paired over ``paired`` common items."""

    paired: int
    reward: Estimate
    functions: dict[str, Estimate]
    items: list[ItemChange]  # the common items, worst change first
    passes: dict[str, Estimate]  # pass@k's change, for each k every compared item has rollouts for
    flips: Flips | None  # paired: the items that passed, failed and flipped at the threshold
    pairing: Pairing
    judged: Judged

    @property
    def test(self) -> str:
        return PAIRED if self.paired else UNPAIRED


def measure(sources: list[Source], threshold: float | None) -> tuple[list[Summary], list[Change]]:
    """Each source's figures, and each later source's change against the first."""
    # pass@1 at the threshold asked for, else the one each eval recorded, else vf-eval's default
    summaries = [
        summarize(s, threshold if threshold is not None else s.threshold or PASS_THRESHOLD)
        for s in sources
    ]
    # a change's pass/fail at A's threshold: one threshold for both sides of it
    return summaries, [compare(sources[0], s, summaries[0].threshold) for s in sources[1:]]


def summarize(source: Source, threshold: float) -> Summary:
    items = list(source.items.values())
    rollouts = [r for item in items for r in item.rewards]
    names = sorted({name for item in items for name in item.functions})
    results = [ItemResult(0, tuple(item.rewards)) for item in items]
    multi = [item for item in items if len(item.rewards) > 1]
    return Summary(
        source=source,
        threshold=threshold,
        rollouts=min((len(item.rewards) for item in items), default=0),
        reward=estimate([item.mean for item in items]),
        pass1=pass_at(results, 1, threshold),
        functions={
            name: estimate(
                [
                    statistics.fmean(item.functions[name])
                    for item in items
                    if item.functions.get(name)
                ]
            )
            for name in names
        },
        truncated=_share([t for item in items for t in item.truncated]),
        identical=_share([is_identical(item.rewards) for item in multi]) if multi else None,
        completion_chars=statistics.fmean([c for item in items for c in item.completion_chars])
        if rollouts
        else 0.0,
    )


def same_prompt(a: Item, b: Item) -> bool | None:
    """Whether two items hold the same prompt; None where one's source records none (matched by id alone)."""
    if a.prompt is None or b.prompt is None:
        return None
    return a.prompt == b.prompt != MIXED


def pair(first: Source, later: Source) -> tuple[list[str], Pairing]:
    """The keys that pair, in order (none when the change is unpaired), and how the items lined up."""
    keys, by_id, different = [], 0, 0
    for key, item in first.items.items():
        if (other := later.items.get(key)) is None:
            continue
        same = same_prompt(item, other)
        if same is False:
            different += 1
            continue
        keys.append(key)
        by_id += same is None
    only_first = sum(key not in later.items for key in first.items)
    only_later = sum(key not in first.items for key in later.items)
    why = _unpaired(len(keys), different)
    pairing = Pairing(len(keys) - by_id, by_id, different, only_first, only_later, why)
    return ([] if why else sorted(keys, key=in_order)), pairing


def _unpaired(pairs: int, different: int) -> str | None:
    """Why items that share keys cannot be paired: none do; most shared keys hold other prompts (another
    split's examples); or, prompts differing, fewer pairs are left than a paired interval needs."""
    if not pairs:
        return PROMPTS_DIFFER if different else NONE_SHARED
    if different > pairs:
        return PROMPTS_DIFFER
    if different and pairs < PAIRED_MIN:
        return TOO_FEW
    return None


def compare(first: Source, later: Source, threshold: float = PASS_THRESHOLD) -> Change:
    """``later`` against ``first``: paired by item where they share items of the same prompt, else as
    independent samples."""
    common, pairing = pair(first, later)
    changes = sorted(
        (ItemChange(key, first.items[key].mean, later.items[key].mean) for key in common),
        key=lambda c: (c.change, c.key),
    )
    names = sorted(
        {n for item in first.items.values() for n in item.functions}
        & {n for item in later.items.values() for n in item.functions}
    )
    floor = _floor(first, later)
    if not common:
        ks = k_values(min(len(i.rewards) for s in (first, later) for i in s.items.values()))
        reward = difference(_item_means(first), _item_means(later))
        return Change(
            0,
            reward,
            {name: difference(_means(first, name), _means(later, name)) for name in names},
            [],
            {
                f"pass@{k}": difference(
                    _pass_at(first, k, threshold), _pass_at(later, k, threshold)
                )
                for k in ks
            },
            None,
            pairing,
            Judged(reward, 0, floor, later.errors),  # the gate judges no unpaired change
        )
    pairs = [(first.items[k], later.items[k]) for k in common]
    ks = k_values(min(len(item.rewards) for pair in pairs for item in pair))
    functions = {
        name: paired_change(
            [
                _mean(b.functions[name]) - _mean(a.functions[name])
                for a, b in pairs
                if a.functions.get(name) and b.functions.get(name)
            ]
        )
        for name in names
    }
    passes = {
        f"pass@{k}": paired_change(
            [_item_pass_at(b, k, threshold) - _item_pass_at(a, k, threshold) for a, b in pairs]
        )
        for k in ks
    }
    moved_by = [b.mean - a.mean for a, b in pairs]
    reward = paired_change(moved_by)
    return Change(
        len(common),
        reward,
        functions,
        changes,
        passes,
        flips(
            {k: (a.rewards, b.rewards) for k, (a, b) in zip(common, pairs, strict=True)}, threshold
        ),
        pairing,
        _judged_paired(first, later, moved_by, reward, floor),
    )


def _judged_paired(
    first: Source, later: Source, moved_by: list[float], reward: Estimate, floor: float
) -> Judged:
    """The paired change with each of the first's items the later does not hold (its errors among them, and
    an item of the same id but another prompt: another example) as a pair that fell to ``floor``: a source
    that scored 6 of 30 is judged over 30, not 6."""
    missed = [
        floor - item.mean
        for key, item in first.items.items()
        if key not in later.items or same_prompt(item, later.items[key]) is False
    ]
    judged = paired_change(moved_by + missed) if missed else reward
    return Judged(judged, len(missed), floor, later.errors)


def histograms(summaries: list[Summary]) -> tuple[float, float, list[list[int]]]:
    """Each source's rollout rewards counted in the same ``BINS`` bins over their common range."""
    rewards = [[r for item in s.source.items.values() for r in item.rewards] for s in summaries]
    everything = [r for values in rewards for r in values]
    low, high = (min(everything), max(everything)) if everything else (0.0, 1.0)
    width = (high - low) / BINS or 1.0
    counts = []
    for values in rewards:
        bins = [0] * BINS
        for r in values:
            bins[min(BINS - 1, int((r - low) / width))] += 1
        counts.append(bins)
    return low, high, counts


def moved(items: list[ItemChange], shown: int) -> tuple[list[ItemChange], list[ItemChange]]:
    """Of ``items`` (worst change first), the ``shown`` worst drops and the ``shown`` biggest gains, biggest
    first: an unchanged item is no news, and a list of drops alone would hide what got better."""
    drops = [c for c in items if c.change < 0][:shown]
    gains = sorted((c for c in items if c.change > 0), key=lambda c: (-c.change, c.key))[:shown]
    return drops, gains


def widest_pair(first: list[float], later: list[float]) -> tuple[int, int]:
    """The rollout of an item in each source whose rewards differ most: for a drop, the first source's best
    against the later one's worst; for a gain, the other way round (the first such rollout of each)."""

    def best(rewards: list[float]) -> int:
        return max(range(len(rewards)), key=rewards.__getitem__)

    def worst(rewards: list[float]) -> int:
        return min(range(len(rewards)), key=rewards.__getitem__)

    drop = (best(first), worst(later))
    gain = (worst(first), best(later))
    return drop if first[drop[0]] - later[drop[1]] >= later[gain[1]] - first[gain[0]] else gain


def worse_beyond(change: Change, margin: float) -> bool:
    """True when the later source is worse than the first by more than ``margin``, beyond the interval of
    the change the gate judges (the items it did not score counted as failures)."""
    high = change.judged.reward.high
    return high is not None and high < -margin


def _floor(first: Source, later: Source) -> float:
    """The reward an item the later source did not score counts at: a failure, 0 on the usual scale, lower
    where either source holds a lower reward (a failure is never better than a scored answer)."""
    return min(0.0, *(min(i.rewards) for s in (first, later) for i in s.items.values()))


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def _mean(values: list[float] | None) -> float:
    return statistics.fmean(values) if values else 0.0


def _item_means(source: Source) -> list[float]:
    return [item.mean for item in source.items.values()]


def _item_pass_at(item: Item, k: int, threshold: float) -> float:
    return pass_at_k(len(item.rewards), sum(r >= threshold for r in item.rewards), k)


def _pass_at(source: Source, k: int, threshold: float) -> list[float]:
    return [_item_pass_at(item, k, threshold) for item in source.items.values()]


def _means(source: Source, name: str) -> list[float]:
    return [
        statistics.fmean(item.functions[name])
        for item in source.items.values()
        if item.functions.get(name)
    ]


@dataclass(frozen=True)
class SourceSeries:
    """A source's figures per item, in the order its items were written (a run's groups, an eval's rows):
    what the compare charts overlay, one line a source."""

    reward: list[float]  # the item's mean reward
    length: list[float]  # its mean completion length, in characters (every source has them)
    identical: list[float]  # 1 where its rollouts scored alike (nothing to learn), else 0
    truncated: list[float]  # the share of its rollouts cut off at the length limit
    by_step: list[tuple[int, float]]  # a training run's mean reward per trainer step; else empty


def source_series(source: Source) -> SourceSeries:
    items = [item for item in source.items.values() if item.rewards]
    steps: dict[int, list[float]] = {}
    for step, mean in source.step_means:
        steps.setdefault(step, []).append(mean)
    return SourceSeries(
        reward=[_mean(item.rewards) for item in items],
        length=[_mean([float(c) for c in item.completion_chars]) for item in items],
        identical=[float(len(item.rewards) > 1 and len(set(item.rewards)) == 1) for item in items],
        truncated=[_share(item.truncated) for item in items],
        by_step=[(step, _mean(means)) for step, means in sorted(steps.items())],
    )
