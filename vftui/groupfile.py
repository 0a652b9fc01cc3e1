"""Saved groups files (a run's jsonl, a dump, Atropos process output) for ``vftui view``.

The view opens at once, however big the file, as toolong does with logs: a background pass
(``GroupFile.read``) records each line's offset and the few figures the table and the filter
need, in arrays (a few dozen bytes a group), folds the panels' statistics and reports its
progress (``FileProgress``). A group's tokens and messages are read from disk only when
it is selected. Lines without vftui's own ``vftui`` object (plain Atropos output) still
show: turns are counted from the messages and the temperature from ``generation_params``.
"""

from __future__ import annotations

import collections
import copy
import functools
import json
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vftui import stats, store
from vftui.events import META, Event, FileProgress, GroupCollected, LogRecord, RunStarted, RunState, RunSummary

HISTORY = 240  # the panels' sparklines
PROGRESS_EVERY_S = 0.25
YIELD_EVERY = 64  # lines
# With many groups in flight a file is in the order groups finished; a view can reorder it.
ORDERS = {"file": None, "item": "_items", "time": "_starts"}


def group_event(index: int, group: dict[str, Any]) -> GroupCollected:
    meta = group.get(META) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"its '{META}' is not an object")
    messages = group.get("messages") or [[] for _ in group["tokens"]]
    turns = meta.get("turns") or [sum(1 for m in msgs if m.get("role") == "assistant") for msgs in messages]
    params = group.get("generation_params") or {}
    return GroupCollected(
        index=index,
        item=int(meta.get("item", index - 1)),
        example_id=meta.get("example_id"),
        scores=[float(s) for s in group["scores"]],
        metrics=meta.get("metrics", {}),
        turns=turns,
        tokens=group["tokens"],
        masks=group["masks"],
        messages=messages,
        finish_reasons=meta.get("finish_reasons") or [None] * len(group["tokens"]),
        temperature=float(params.get("temperature", meta.get("temperature", float("nan")))),
        started_at=meta.get("started_at", 0.0),
        elapsed_s=meta.get("elapsed_s", 0.0),
        logprobs=group.get("inference_logprobs"),
    )


def run_description(path: Path) -> dict[str, Any]:
    """The ``.run.json`` beside a run's jsonl, when there is one."""
    sidecar = path.with_suffix(".run.json")
    try:
        return json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True)
class Row:
    """A group as the table and the filter see it; ``GroupFile.group`` reads the rest."""

    index: int
    item: int
    scores: tuple[float, ...]
    turns: tuple[float, ...]  # the group's mean, for the filter
    temperature: float
    line: int  # which group of the file, in file order

    @property
    def identical(self) -> bool:
        return stats.is_identical(self.scores)


class GroupFile(Sequence[Row]):
    """The groups of a file as rows, growing while ``read`` runs (in another thread)."""

    def __init__(self, path: Path, order: str = "file") -> None:
        self.path = path
        self.order = order
        self.skipped = 0
        self.max_item = 0
        self.group_size = 1
        self.score_range = (0.0, 1.0)
        self._offsets, self._items, self._starts = array("q"), array("q"), array("d")
        self._turns, self._temperatures = array("d"), array("d")
        self._score_at, self._scores = array("q", [0]), array("d")
        self._count = 0  # rows whose every column is filled: what readers see
        self._order: array | None = None
        self._file_lock = threading.Lock()
        self.group = functools.lru_cache(maxsize=64)(self._group)

    # -- reading rows (the UI thread) -------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position):  # an int gives a Row; a slice, a list of them
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(self._count))]
        if position < 0:
            position += self._count
        if not 0 <= position < self._count:
            raise IndexError(position)
        line = self._order[position] if self._order is not None else position
        first, end = self._score_at[line], self._score_at[line + 1]
        return Row(position + 1, self._items[line], tuple(self._scores[first:end]), (self._turns[line],),
                   self._temperatures[line], line)

    def position_of(self, index: int) -> int:
        """Where the row numbered ``index`` is: rows are numbered by position."""
        return index - 1

    def _group(self, row: Row) -> GroupCollected:
        """The whole group behind ``row``, read from disk."""
        with self._file_lock, self.path.open("rb") as f:
            f.seek(self._offsets[row.line])
            raw = f.readline()
        parsed = store.parse_group_line(raw)
        if isinstance(parsed, str):
            raise ValueError(f"{self.path} changed since it was read ({parsed})")
        return group_event(row.index, parsed)

    # -- the background pass ----------------------------------------------------------------

    def read(self, emit: Callable[[Event], None], sim_tokenizer: str, tokenizer: str = "") -> RunSummary:
        """Read every line, emitting what the view shows: RunStarted, progress, skipped lines, the summary."""
        started = time.time()
        total = self.path.stat().st_size
        totals = stats.Accumulator()
        rewards: collections.deque[float] = collections.deque(maxlen=HISTORY)
        identical: collections.deque[float] = collections.deque(maxlen=HISTORY)
        announced, last_progress, offset = False, 0.0, 0
        seen: tuple[float, float] | None = None
        span = (float("inf"), float("-inf"))

        def progress(done: bool = False) -> None:
            emit(FileProgress(self._count, offset, total, copy.deepcopy(totals), list(rewards), list(identical), done))

        with self.path.open("rb") as f:
            for number, raw in enumerate(f, start=1):
                at, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                parsed = store.parse_group_line(raw)
                try:
                    if isinstance(parsed, str):
                        raise ValueError(parsed)
                    group = group_event(self._count + 1, parsed)
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    reason = str(e) if isinstance(parsed, str) else f"bad group ({e})"
                    self.skipped += 1
                    emit(LogRecord("WARNING", "view", f"{self.path.name} line {number} skipped: {reason}"))
                    continue
                if not announced:
                    estimate = total // max(1, len(raw))  # the progress refines it; counting first would wait
                    emit(self._started(parsed, group, sim_tokenizer, tokenizer, estimate))
                    announced = True
                self._add(at, group)
                totals.add(group)
                rewards.append(stats.mean(group.scores))
                identical.append(1.0 if group.identical else 0.0)
                seen = stats.widen(seen, group.scores)
                self.score_range = seen or self.score_range
                span = (min(span[0], group.started_at), max(span[1], group.started_at + group.elapsed_s))
                if number % YIELD_EVERY == 0:
                    time.sleep(0)  # hand the GIL over: each of the UI's wake-ups would wait out a switch interval
                if time.monotonic() - last_progress > PROGRESS_EVERY_S:
                    last_progress = time.monotonic()
                    progress()
        if not announced:
            emit(self._started({}, None, sim_tokenizer, tokenizer, 0))
        if (column := ORDERS[self.order]) is not None:
            values = getattr(self, column)
            self._order = array("q", sorted(range(self._count), key=values.__getitem__))
        progress(done=True)
        elapsed = span[1] - span[0] if self._count else time.time() - started
        summary = RunSummary(RunState.FINISHED, self._count, self._count, str(self.path), round(max(0.0, elapsed), 3),
                             {}, f"{self.skipped} malformed lines skipped" if self.skipped else "")
        emit(summary)
        return summary

    def _add(self, offset: int, group: GroupCollected) -> None:
        """One more row: every column first, then the count readers go by."""
        self._offsets.append(offset)
        self._items.append(group.item)
        self._starts.append(float(group.started_at))
        self._turns.append(stats.mean([float(t) for t in group.turns]))
        self._temperatures.append(group.temperature)
        self._scores.extend(group.scores)
        self._score_at.append(len(self._scores))
        self.max_item = max(self.max_item, group.item)
        self.group_size = max(self.group_size, len(group.scores))
        self._count += 1

    def _started(self, raw: dict[str, Any], first: GroupCollected | None, sim_tokenizer: str,
                 tokenizer: str, groups_estimate: int) -> RunStarted:
        description = run_description(self.path)
        config, meta = description.get("config", {}), raw.get(META) or {}
        simulated = bool(meta.get("simulated")) or description.get("endpoint") == "simulated"
        recorded = tokenizer or description.get("tokenizer", "")
        return RunStarted(
            mode="view",
            env=config.get("env", meta.get("env", "?")),
            model=description.get("model", meta.get("model", "?")),
            endpoint=str(self.path),
            simulated=simulated,
            out_path=str(self.path),
            groups_total=groups_estimate,
            groups_done=0,
            group_size=len(first.scores) if first else 0,
            temperature=first.temperature if first else 0.0,
            reward_functions=[n for n in (first.metrics if first else {}) if n != "num_turns"],
            tokenizer=recorded or (sim_tokenizer if simulated else ""),
        )
