"""The whole run as series for the charts: a point per group (reward, spread, length, identical,
truncated, each function), and in rl a point per API or server poll (lag, queue, KV cache).

Compact arrays, so a long run costs a few bytes a group; ``thinned`` averages them down to
what a chart of a given width can show.
"""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import dataclass, field

from vftui import stats
from vftui.events import ApiStatus, GroupCollected, ServerStatus
from vftui.group_format import trained_tokens


def _floats() -> array:
    return array("d")


@dataclass
class Series:
    mean: array = field(default_factory=_floats)
    std: array = field(default_factory=_floats)
    length: array = field(default_factory=_floats)  # mean completion tokens of the group's rollouts
    identical: array = field(default_factory=_floats)  # per scored group of two or more rollouts
    truncated: array = field(
        default_factory=_floats
    )  # share of the group's rollouts cut at the cap
    functions: dict[str, array] = field(default_factory=dict)
    lag: array = field(default_factory=_floats)  # rl: per API poll
    queue: array = field(default_factory=_floats)
    kv_cache: array = field(default_factory=_floats)  # rl: the fullest server's, per server poll

    def add_group(self, group: GroupCollected) -> None:
        self.mean.append(stats.mean(group.scores))
        self.std.append(stats.population_std(group.scores))
        lengths = list(map(trained_tokens, group.masks))
        self.length.append(statistics.fmean(lengths) if lengths else 0.0)
        reasons = group.finish_reasons or []
        self.truncated.append(
            sum(r == "length" for r in reasons) / len(reasons) if reasons else 0.0
        )
        for name, values in group.metrics.items():
            if values:
                self.functions.setdefault(name, _floats()).append(statistics.fmean(values))

    def add_scored(self, scores: list[float]) -> None:
        """A scored group, kept or left out: rl leaves identical groups out, and a rate over the kept ones
        alone read 0% beside the health screen's 26%. One rollout is in no rate."""
        if (alike := stats.alike(scores)) is not None:
            self.identical.append(float(alike))

    def add_api(self, status: ApiStatus) -> None:
        if status.reachable:
            self.queue.append(float(status.queue_size))
            if status.lag is not None:
                self.lag.append(float(status.lag))

    def add_server(self, status: ServerStatus) -> None:
        if status.kv_cache is not None:
            self.kv_cache.append(100.0 * status.kv_cache)


def thinned(values: array | list[float], points: int) -> tuple[list[float], list[float]]:
    """(x, y) with at most ``points`` points: consecutive values averaged, x at each bucket's middle (1-based)."""
    count = len(values)
    if count <= points:
        return [float(i + 1) for i in range(count)], list(values)
    size = count / points
    xs, ys = [], []
    for b in range(points):
        start, end = int(b * size), max(int(b * size) + 1, int((b + 1) * size))
        bucket = values[start:end]
        xs.append((start + end + 1) / 2)
        ys.append(sum(bucket) / len(bucket))
    return xs, ys


def rolling(values: array | list[float], width: int) -> list[float]:
    """The mean of the last ``width`` values at each point: a rate that does not flicker."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


NICE_STEPS = (1.0, 2.0, 2.5, 5.0)  # times a power of ten: the steps an axis is read by


def nice_ticks(low: float, high: float, most: int) -> list[float]:
    """At most ``most`` (3 or more: a range across 0 may need 3) evenly spaced round ticks (1, 2, 2.5 or 5
    times a power of ten) spanning ``low`` to ``high``: the first at or below ``low``, the last at or above
    ``high``. A flat line (``low == high``) gets a span around it: its ticks would all read the same."""
    if not (math.isfinite(low) and math.isfinite(high)) or high < low:
        return [low] if math.isfinite(low) else []
    if high == low:
        pad = abs(low) / 2 or 1.0
        low, high = low - pad, high + pad
    if not math.isfinite(high - low):  # past float's range: the ends alone
        return [low, high] if math.isfinite(low) and math.isfinite(high) else [low]
    most = max(3, most)
    smallest = math.floor(math.log10((high - low) / most))
    for power in range(
        smallest, smallest + 3
    ):  # at the last, a step over the span: 3 ticks at most
        for nice in NICE_STEPS:
            step = nice * 10.0**power
            first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
            if last - first + 1 <= most:
                return [round(n * step, 6 - power) for n in range(first, last + 1)]
    return [low, high]


def tick_label(value: float) -> str:
    """A tick as people write it: ``0.25``, ``1200``, ``1.2e+06``."""
    return f"{value:.10g}" if abs(value) < 1e6 else f"{value:.3g}"


def histogram(values: list[float], bins: int) -> tuple[list[float], list[int]]:
    """Each of ``bins`` equal bins' middle and count over ``values``' range (one bin where they are equal)."""
    if not values:
        return [], []
    low, high = min(values), max(values)
    if high == low:
        return [low], [len(values)]
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, int((value - low) / width))] += 1
    return [low + width * (b + 0.5) for b in range(bins)], counts
