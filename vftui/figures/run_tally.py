"""A run's groups, each folded once in the collector's process: the run's summary, an attaching dashboard's
``RunSoFar`` and ``vftui runs`` read the same figures."""

from __future__ import annotations

import collections
import copy
import threading

from vftui import stats
from vftui.events import GroupCollected, GroupDropped, RunSoFar


class RunTally:
    """The whole run's totals, its drops by reason and its rate; locked, since the socket's threads read it
    while the run's loop adds to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = stats.Accumulator()
        self._dropped: collections.Counter[str] = collections.Counter()
        self._throughput = stats.Throughput()
        self._rollouts = self._truncated = (
            0  # of the groups kept: how many, how many cut at the cap
        )

    def _count_finishes(self, group: GroupCollected) -> None:
        self._rollouts += len(group.finish_reasons)
        self._truncated += sum(reason == "length" for reason in group.finish_reasons)

    def add(self, group: GroupCollected | GroupDropped) -> None:
        """A group as it ends; a dropped one was scored, so it counts in the totals too."""
        with self._lock:
            self._totals.add(group)
            if isinstance(group, GroupDropped):
                self._dropped[group.reason] += 1
            else:
                self._count_finishes(group)
                ended = group.started_at + group.elapsed_s
                self._throughput.add(ended, sum(len(t) for t in group.tokens), group.started_at)

    def history(self, groups: list[GroupCollected], drops: list[GroupDropped]) -> None:
        """A resumed run's earlier groups: in its figures as they were live, not in today's rate."""
        with self._lock:
            every: list[GroupCollected | GroupDropped] = [*groups, *drops]
            for group in every:
                self._totals.add(group)
            for kept in groups:
                self._count_finishes(kept)
            self._dropped.update(drop.reason for drop in drops)

    def metrics(self) -> dict[str, float]:
        with self._lock:
            return self._totals.metrics()

    def truncated(self) -> tuple[int, int]:
        """Of the rollouts kept, how many the token cap cut off, and how many there were."""
        with self._lock:
            return self._truncated, self._rollouts

    def dropped(self) -> dict[str, int]:
        with self._lock:
            return dict(self._dropped)

    def so_far(self) -> RunSoFar:
        """For a dashboard attaching now: every group so far, the replayed ones included."""
        with self._lock:
            return RunSoFar(copy.deepcopy(self._totals), dict(self._dropped))

    def groups_per_s(self, now: float, collecting: bool) -> float:
        with self._lock:
            return self._throughput.rates(now, collecting)[0]
