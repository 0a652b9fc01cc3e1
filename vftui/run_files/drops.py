"""The groups a run dropped, recorded beside its jsonl.

atroposlib writes and sends only the groups a trainer can learn from; a group of equal scores
is dropped, yet it counts in the identical-score rate and the mean reward. This file keeps
each drop (item, reason, scores, metrics, turns), so ``vftui view`` and a resumed run count
the run's groups as the live run did. One JSON object a line; lines that cannot be read are
skipped, as a damaged jsonl's are.
"""

from __future__ import annotations

import json
from typing import Any

from vftui import safe_files
from vftui.bounds import HUGE, LongLine, read_lines, score
from vftui.events import GroupDropped
from vftui.run_files import store
from vftui.run_files.files import RunFiles

MAX_LINE_BYTES = (
    1 << 20
)  # a drop's line holds scores and metrics, never texts: anything longer is damage


class DropLog:
    """Appends each drop of a run; the file is made on the first one, never through a link."""

    def __init__(self, files: RunFiles) -> None:
        self.path = files.drops

    def add(self, drop: GroupDropped) -> None:
        line = json.dumps(
            {
                "item": drop.item,
                "reason": drop.reason,
                "scores": drop.scores,
                "metrics": drop.metrics,
                "turns": drop.turns,
            },
            allow_nan=False,
        )
        with open(safe_files.open_append(self.path), "a") as f:
            f.write(line + "\n")


def read_drops(files: RunFiles, offset: int = 0) -> tuple[list[GroupDropped], int]:
    """The drops recorded from ``offset`` on (whole lines only) and the offset after them."""
    drops: list[GroupDropped] = []
    try:
        f = safe_files.open_to_read(files.drops)
    except OSError:
        return drops, offset
    with f:
        f.seek(offset)
        for raw in read_lines(
            f, MAX_LINE_BYTES
        ):  # a line over the limit is skipped, never held whole
            if isinstance(raw, LongLine):
                if not raw.ended:
                    break
            elif not raw.endswith(b"\n"):
                break  # a last line still being written
            elif (drop := _parse(raw)) is not None:
                drops.append(drop)
            offset = f.tell()
    return drops, offset


def damaged_line(files: RunFiles) -> tuple[int, str] | None:
    """The first line of the drop log that is no JSON object (its number, what it is), a torn last one aside
    (``store.torn_tail``, cut by the resume): a resume refuses such damage, where the view skips it. None when
    every line is one."""
    try:
        f = safe_files.open_to_read(files.drops)
    except FileNotFoundError:
        return None
    with f:
        for number, raw in enumerate(read_lines(f, MAX_LINE_BYTES), start=1):
            ended = raw.ended if isinstance(raw, LongLine) else raw.endswith(b"\n")
            if not ended and store.torn_tail(files.drops):
                break  # the last line, cut short: the resume cuts it
            if isinstance(raw, LongLine):
                return number, f"over {MAX_LINE_BYTES:,} bytes"
            # an object _parse skips (a score out of range, written as it came) is no damage
            if raw.strip() and not store.is_json_object(raw):
                return number, "not a JSON object"
    return None


def _parse(raw: bytes) -> GroupDropped | None:
    """A drop as written (a failed one has no scores), or None for a line that is not one: an item that is no
    dataset position, a score or metric that is no number a figure can use (``bounds.score``)."""
    try:
        data = json.loads(raw)
        scores = _scores(data["scores"])
        metrics = {str(name): _scores(values) for name, values in data.get("metrics", {}).items()}
        item, turns = data["item"], data.get("turns", [])
        if (
            type(item) is not int
            or not 0 <= item <= HUGE
            or not all(type(t) is int and 0 <= t <= HUGE for t in turns)
        ):
            return None
        return GroupDropped(item, str(data["reason"]), scores, metrics, list(turns))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _scores(values: list[Any]) -> list[float]:
    scores = [score(v) for v in values]
    numbers = [s for s in scores if s is not None]
    if len(numbers) < len(scores):
        raise ValueError("not a score")
    return numbers
