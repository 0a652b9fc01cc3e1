"""prime-rl's ``metrics.jsonl``: read as it grows, and written the way prime-rl writes it.

prime-rl's ``FileMonitor`` (``monitors/file.py``) appends, line-buffered, one row per log call:
``{"step": N, "time": unix seconds, **metrics}``, non-finite values dropped. The trainer and the
orchestrator append their own rows to the one file, each running at its own step (the orchestrator
ahead by its off-policy lag), and both log ``time/step`` and ``time/save_ckpt``: those are told
apart here by the row's side (``time/step (trainer)``). A resumed run logs its steps from the
checkpoint on again. Any other name is kept as it is, known or not.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vftui import bounds, safe_files
from vftui.training.tail import FileTail

MAX_LINE = 16 * 1024**2  # a row of a few hundred metrics is tens of KB
TRAINER_MARKS = ("time/wait_for_batch", "time/forward_backward", "optim/lr", "perf/mfu")
ORCHESTRATOR_MARKS = ("time/wait_for_policy", "progress/tasks", "off_policy/dropped")
BOTH_SIDES = ("time/step", "time/save_ckpt")  # both sides log these under one name


@dataclass(frozen=True)
class Row:
    step: int
    time: float | None
    values: dict[str, float]


@dataclass
class Read:
    """One poll of the file: its new rows, and what could not be read, counted."""

    rows: list[Row] = field(default_factory=list)
    restarted: bool = False
    more: bool = False
    bad_lines: int = 0
    first_bad: str = ""  # what the first bad line was, for a sentence
    long_lines: int = 0
    skipped_values: int = 0  # values that are not finite numbers (null, text, NaN written by hand)
    error: str = ""


def side(values: Mapping[str, object]) -> str:
    """``trainer``, ``orchestrator`` or ``""``: who logged a row, from the names only one side logs."""
    if any(name in values for name in TRAINER_MARKS):
        return "trainer"
    if any(name in values for name in ORCHESTRATOR_MARKS) or any(
        name.startswith(("train/", "progress/")) for name in values
    ):
        return "orchestrator"
    return ""


def series_name(name: str, who: str) -> str:
    """The name a value is charted under: its own, but for the names both sides log."""
    return f"{name} ({who})" if who and name in BOTH_SIDES else name


def parse(line: bytes, found: Read) -> Row | None:
    """A row from one line; a line that is not one is counted in ``found``."""
    try:
        value = bounds.load_json(line)
    except (ValueError, UnicodeDecodeError) as e:
        return _bad(found, f"not JSON ({e})")
    if not isinstance(value, dict):
        return _bad(found, "not a JSON object")
    step = value.get("step")
    if type(step) is not int or not 0 <= step < bounds.HUGE:
        return _bad(found, f"its step is {_shown(step)}, not a step number")
    when = bounds.score(value.get("time"))
    who = side(value)
    values: dict[str, float] = {}
    for name, raw in value.items():
        if name in ("step", "time"):
            continue
        number = bounds.score(raw)
        if number is None:
            found.skipped_values += 1
            continue
        values[series_name(name, who)] = number
    return Row(step, when, values)


def _bad(found: Read, why: str) -> Row | None:
    """Count a line that is not a row (None, for ``parse`` to return)."""
    found.bad_lines += 1
    found.first_bad = found.first_bad or why
    return None


def _shown(value: object) -> str:
    text = (
        json.dumps(value)
        if isinstance(value, (int, float, str, bool, type(None)))
        else "not a number"
    )
    return text if len(text) <= 40 else text[:39] + "…"


class MetricsReader:
    """Follows one ``metrics.jsonl``. The first read of a long file reads its head (the run's early
    levels: ``HEAD_STEPS`` steps) and its last ``tail_steps`` steps, not its middle: a window is what
    is charted, and the first frame comes as soon on a run of 10,000 steps as on one of 100."""

    HEAD_PIECE = 256 * 1024
    HEAD_MOST = 4 * 1024**2
    HEAD_STEPS = 20  # the early levels need the first 10 steps of each side

    def __init__(self, path: Path, tail_steps: int) -> None:
        self.tail = FileTail(path, MAX_LINE)
        self.tail_steps = tail_steps
        self.skipped: tuple[int, int] | None = None  # the steps a first read jumped over
        self._started = False

    def read(self) -> Read:
        if not self._started and (self.tail.size() or 0) > 0:
            self._started = True
            return self._head_and_tail(self.tail.size() or 0)
        return self._rows(self.tail.read())

    def _head_and_tail(self, size: int) -> Read:
        head = Read()
        steps: set[int] = set()
        while len(steps) < self.HEAD_STEPS and self.tail.offset < min(size, self.HEAD_MOST):
            piece = self._rows(self.tail.read(self.HEAD_PIECE))
            _merge(head, piece)
            steps.update(row.step for row in piece.rows)
            if not piece.more:
                return head
        per_step = self.tail.offset / max(1, len(steps))
        start = size - int(per_step * self.tail_steps * 1.25)
        jumped = start > self.tail.offset
        if jumped:
            self.tail.start_at(start)
        rest = self._rows(self.tail.read())
        if jumped and rest.rows and steps and rest.rows[0].step > max(steps) + 1:
            self.skipped = (max(steps) + 1, rest.rows[0].step - 1)
        _merge(head, rest)
        return head

    def _rows(self, lines) -> Read:
        found = Read(
            restarted=lines.restarted,
            more=lines.more,
            long_lines=lines.long_lines,
            error=lines.error,
        )
        for line in lines.lines:
            if line.strip() and (row := parse(line, found)) is not None:
                found.rows.append(row)
        return found


def _merge(into: Read, more: Read) -> None:
    into.rows += more.rows
    for name in ("bad_lines", "long_lines", "skipped_values"):
        setattr(into, name, getattr(into, name) + getattr(more, name))
    into.first_bad = into.first_bad or more.first_bad
    into.restarted = into.restarted or more.restarted
    into.more, into.error = more.more, more.error or into.error


def append_row(
    path: Path, step: int, metrics: Mapping[str, float], when: float | None = None
) -> None:
    """One row as prime-rl's ``FileMonitor`` appends it (non-finite values dropped); for sims and tests."""
    row = {"step": step, "time": time.time() if when is None else when}
    row |= {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    fd = safe_files.open_append(path)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)
