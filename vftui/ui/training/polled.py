"""What the follower's worker sends the screen each poll: the snapshot and the charts' values."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from vftui.training.follow import Snapshot

CHART_POINTS = 240  # the newest values of each chart: wider than any terminal


@dataclass
class Polled(Message):
    """A poll's result, built in the worker thread: the screen only shows it."""

    snapshot: Snapshot
    charts: dict[str, list[float]]  # metric name -> its newest values, oldest first
    new_logs: int
    curves: dict[str, dict[str, list[tuple[int, float]]]]  # run label -> figure -> (step, value)
