"""Saved groups files (a run's jsonl, a dump, Atropos process output) for ``vftui view``.

The view opens at once, however big the file, as toolong does with logs: a background pass
(``GroupFile.read``) records each line's offset and the few figures the table and the filter
need, in arrays (a few dozen bytes a group), folds the panels' statistics and reports its
progress (``FileProgress``). A group's tokens and messages are read from disk only when
it is selected. Lines without vftui's own ``vftui`` object (plain Atropos output) still
show: turns are counted from the messages and the temperature from ``generation_params``.
A followed file (``vftui view --follow``) is looked at again every second for new lines.

A folder of one run's shards (``shard_folder``) is read the same way, one shard's file after
another, as one sequence of rows: each row knows its file, so nothing is joined on disk. A line
whose item is another shard's is reported and skipped, like any line that does not fit; the
shards and items missing are warnings (``warnings``), said in the log once the pass is done.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import itertools
import json
import math
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from vftui import bounds, safe_files, stats
from vftui.bounds import HUGE, LongLine
from vftui.defaults import PASS_THRESHOLD
from vftui.events import (
    Event,
    FileProgress,
    GroupCollected,
    LogRecord,
    Mode,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
)
from vftui.figures.eval_stats import EvalTally
from vftui.figures.group_filter import parse_filter, searchable
from vftui.figures.series import Series
from vftui.group_format import META
from vftui.run_files import listing, records, store
from vftui.run_files.drops import read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import RunLine
from vftui.run_files.records import RunRecord, Settings
from vftui.run_files.shard_folder import ShardedRun, ShardRun, foreign, gaps

HISTORY = 240  # the panels' sparklines
PROGRESS_EVERY_S = 0.25
YIELD_EVERY = 64  # lines
MAX_FUNCTION_COLUMNS = (
    32  # reward functions whose per-group means are kept for the filter's figures
)
FOLLOW_EVERY_S = 1.0  # a followed file is looked at as often as the view repaints (ui.inbox.TICK_S)
FOLLOWING = "following the file as it grows"
# With many groups in flight a file is in the order groups finished; a view can reorder it.
ORDERS = {"file": None, "item": "_items", "time": "_starts"}


def lines_shown_by(where: str) -> Callable[[bytes], bool]:
    """Whether a group's line is one the dashboard's filter ``where`` shows (a line that is not a
    group is not); a ValueError says what in ``where`` cannot be read."""
    shows = parse_filter(where)

    def keep(line: bytes) -> bool:
        try:
            raw = json.loads(line)
            return isinstance(raw, dict) and shows(group_event(0, raw))
        except (ValueError, TypeError, KeyError, RecursionError):
            return False

    return keep


def group_event(index: int, group: dict[str, Any]) -> GroupCollected:
    """A line's group, its figures checked (a ``ValueError`` or ``TypeError`` says what does not fit)."""
    meta = group.get(META) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"its '{META}' is not an object")
    messages = group.get("messages") or [[] for _ in group["tokens"]]
    turns = meta.get("turns") or [
        sum(1 for m in msgs if m.get("role") == "assistant") for msgs in messages
    ]
    params = group.get("generation_params") or {}
    metrics = meta.get("metrics", {})
    if not isinstance(metrics, dict) or not isinstance(params, dict):
        raise ValueError("its metrics or generation_params are not an object")
    temperature = params.get("temperature", meta.get("temperature"))
    item = int(meta.get("item", index - 1))
    if not 0 <= item <= HUGE:
        raise ValueError(f"its item {item} is not a dataset position")
    return GroupCollected(
        index=index,
        item=item,
        example_id=meta.get("example_id"),
        scores=_numbers(group["scores"]),
        metrics={str(name): _numbers(values) for name, values in metrics.items()},
        turns=[int(t) for t in _numbers(turns)],
        tokens=group["tokens"],
        masks=group["masks"],
        messages=messages,
        finish_reasons=meta.get("finish_reasons") or [None] * len(group["tokens"]),
        temperature=math.nan if temperature is None else _number(temperature),  # NaN: not recorded
        started_at=_number(meta.get("started_at", 0.0)),
        elapsed_s=_number(meta.get("elapsed_s", 0.0)),
        logprobs=group.get("inference_logprobs"),
    )


def _state(run: RunLine | None) -> RunState:
    """What a viewed file's run is: finished once it has ended (or for a file no vftui run wrote);
    a run still live (paused, running) is what it says it is, never finished; one that does not
    answer, running."""
    if run is None or not run.running:
        return RunState.FINISHED
    try:
        return RunState(run.state)
    except ValueError:
        return RunState.RUNNING


def _numbers(values: Any) -> list[float]:
    """Floats a figure can be computed from (``bounds.score``): a string, a bool, ``1e400`` or ``1e308`` (whose
    square or sum overflows) is a ``ValueError``, and the line is skipped and counted."""
    if not isinstance(values, list):
        raise TypeError(f"{type(values).__name__} where a list of numbers belongs")
    read = [bounds.score(v) for v in values]
    numbers = [v for v in read if v is not None]
    if len(numbers) < len(read):
        raise ValueError(f"it holds {bounds.refusal(values[read.index(None)])}")
    return numbers


def _number(value: Any) -> float:
    return _numbers([value])[0]


@dataclass(frozen=True)
class Row:
    """A group as the table and the filter see it; ``GroupFile.group`` reads the rest."""

    index: int
    item: int
    scores: tuple[float, ...]
    turns: tuple[float, ...]  # the group's mean, for the filter
    temperature: float
    offset: int  # where its line starts in the file
    completion_length: float  # its rollouts' mean trained tokens
    elapsed_s: float
    function_means: tuple[tuple[str, float], ...] = ()  # each reward function's mean over the group
    part: int = 0  # which of the files it is in (a folder of shards has one a shard)
    kept: ClassVar[bool] = True  # a file's lines were written

    @property
    def metrics(self) -> dict[str, list[float]]:
        """Per function, its mean for each rollout: the group's means weigh as its rollouts did (stats.GroupLike)."""
        return {name: [mean] * len(self.scores) for name, mean in self.function_means}

    @property
    def identical(self) -> bool:
        return stats.is_identical(self.scores)


@dataclass
class _Place:
    """How far a pass has read one file: the run's, or one shard's of a folder of them."""

    path: Path
    part: int  # its number among the files (``Row.part``)
    name: str  # as the view's lines name it
    run: ShardRun | None  # its shard, in a folder of them: its lines' items must be that shard's
    identity: tuple[int, int] = (
        0,
        0,
    )  # the file's device and inode: another file at the same path is read anew
    total: int = 0  # the file's size when last looked at
    offset: int = 0  # after the last line read
    lines: int = 0
    drops_offset: int = 0  # in the run's record of its dropped groups (``drops``)
    groups: int = 0
    top_item: int = -1


@dataclass
class _Pass:
    """A reading of the files from their start: how far it came in each, and the figures so far."""

    places: list[_Place]
    announced: bool = False
    seen: tuple[float, float] | None = None
    span: tuple[float, float] = (math.inf, -math.inf)
    totals: stats.Accumulator = field(default_factory=stats.Accumulator)
    rewards: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=HISTORY)
    )
    identical: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=HISTORY)
    )
    tally: EvalTally | None = None  # an eval's file: its figures too
    dropped: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def offset(self) -> int:
        return sum(place.offset for place in self.places)

    @property
    def total(self) -> int:
        return sum(place.total for place in self.places)

    def add_drops(self, place: _Place, series: Series) -> None:
        """The groups the run dropped since the last look: they count in its figures as they did live."""
        found, place.drops_offset = read_drops(RunFiles(place.path), place.drops_offset)
        for drop in found:
            self._scored(drop.scores, series)
            self.totals.add(drop)
            self.dropped[drop.reason] += 1
            if (
                self.tally is not None
            ):  # an eval's dropped example is its error, as the eval counted it
                self.tally.fail(drop.item, drop.reason)

    def _scored(self, scores: list[float], series: Series) -> None:
        """A group kept or left out, in the identical-score rates as the live dashboard has it."""
        series.add_scored(scores)
        if (alike := stats.alike(scores)) is not None:
            self.identical.append(float(alike))

    def add(self, group: GroupCollected, series: Series) -> None:
        series.add_group(group)
        if self.tally is not None:
            self.tally.add(group.item, group.scores, group.metrics)
        self.totals.add(group)
        self.rewards.append(stats.mean(group.scores))
        self._scored(group.scores, series)
        self.seen = stats.widen(self.seen, group.scores)
        self.span = (
            min(self.span[0], group.started_at),
            max(self.span[1], group.started_at + group.elapsed_s),
        )


class GroupFile(Sequence[Row]):
    """The groups of a file (or of a folder of one run's shards) as rows, growing while ``read`` runs (in
    another thread)."""

    def __init__(
        self, source: Path | ShardedRun, order: str = "file", named: Path | None = None
    ) -> None:
        """``named``: what the view calls the rows where it is not their file (a copy made in the cache)."""
        self.sharded = source if isinstance(source, ShardedRun) else None
        self.path = named or (
            source.folder if isinstance(source, ShardedRun) else source
        )  # what the view names
        self._files = (
            [run.path for run in source.runs] if isinstance(source, ShardedRun) else [source]
        )
        self.order = order
        self._record: RunRecord | None = (
            None  # the settings saved beside the file, read by each pass
        )
        self._file_lock = threading.Lock()
        self.group = functools.lru_cache(maxsize=64)(self._group)
        self._start()

    def _start(self) -> None:
        """No rows: the count readers go by first, then new columns, so a ``snapshot`` keeps its own whole."""
        self._count = 0  # rows whose every column is filled: what readers see
        self.skipped = 0
        self.warnings: list[str] = []  # a folder of shards: the shards and items missing
        self.max_item = 0
        self.group_size = 1
        self.score_range = (0.0, 1.0)
        self._offsets, self._items, self._starts = array("q"), array("q"), array("d")
        self._turns, self._temperatures, self._lengths, self._elapsed = (
            array("d") for _ in range(4)
        )
        self._score_at, self._scores = array("q", [0]), array("d")
        self._parts = array("l")
        self._function_means: dict[str, array] = {}  # NaN where a group has no such function
        self._order: array | None = None
        self.series = Series()  # the charts' (the view's model shows this one)
        self.group.cache_clear()

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
        order = (
            self._order
        )  # rows a followed file adds after the sort come after it, as they arrive
        line = order[position] if order is not None and position < len(order) else position
        first, end = self._score_at[line], self._score_at[line + 1]
        means = tuple(
            (name, column[line])
            for name, column in self._function_means.items()
            if not math.isnan(column[line])
        )
        return Row(
            position + 1,
            self._items[line],
            tuple(self._scores[first:end]),
            (self._turns[line],),
            self._temperatures[line],
            self._offsets[line],
            self._lengths[line],
            self._elapsed[line],
            means,
            self._parts[line],
        )

    def position_of(self, index: int) -> int:
        """Where the row numbered ``index`` is: rows are numbered by position."""
        return index - 1

    def temperatures(self) -> tuple[float, float] | None:
        """The lowest and highest temperature the file's groups were sampled at (NaN where none was recorded)."""
        known = [t for t in self._temperatures[: self._count] if not math.isnan(t)]
        return (min(known), max(known)) if known else None

    def snapshot(self) -> GroupFile:
        """The rows as they stand, for the table to hold between ticks: a re-read (see ``_start``) leaves them whole."""
        return copy.copy(self)

    def _group(self, row: Row) -> GroupCollected:
        """The whole group behind ``row``, read from disk."""
        path = self._files[row.part]
        with self._file_lock, safe_files.open_to_read(path) as f:
            f.seek(row.offset)
            raw = next(store.group_lines(f), b"")
        parsed = store.parse_group_line(raw)
        if isinstance(parsed, str):
            raise ValueError(f"{path} changed since it was read ({parsed})")
        return group_event(row.index, parsed)

    def search(self, needles: list[str]) -> dict[str, set[tuple[int, int]]]:
        """For each needle (lower case), the rows (``part``, ``offset``) whose group holds it in a
        prompt, completion or tool call (``group_filter.searchable``): the rows read so far, each
        file once, front to back. Slow work: off the UI thread."""
        found: dict[str, set[tuple[int, int]]] = {needle: set() for needle in needles}
        places = sorted((self._parts[line], self._offsets[line]) for line in range(self._count))
        for part, offsets in itertools.groupby(places, key=lambda place: place[0]):
            with safe_files.open_to_read(self._files[part]) as f:
                for _, offset in offsets:
                    f.seek(offset)
                    parsed = store.parse_group_line(next(store.group_lines(f), b""))
                    messages = parsed.get("messages") if isinstance(parsed, dict) else None
                    if not isinstance(messages, list):
                        continue
                    text = searchable([m for m in messages if isinstance(m, list)])
                    for needle in needles:
                        if needle in text:
                            found[needle].add((part, offset))
        return found

    # -- the background pass ----------------------------------------------------------------

    def read(
        self,
        emit: Callable[[Event], None],
        sim_tokenizer: str,
        tokenizer: str = "",
        follow_until: threading.Event | None = None,
    ) -> RunSummary:
        """Read every line, emitting what the view shows: RunStarted, progress, skipped lines, the summary.

        With ``follow_until``, another process may still be writing the file: only whole lines
        are read, and at the end the pass looks for new ones every ``FOLLOW_EVERY_S`` until
        the event is set (the view closed).
        """
        started = time.time()
        self._record = self._run_record(emit)
        announce = functools.partial(
            self._started, sim_tokenizer=sim_tokenizer, tokenizer=tokenizer
        )
        reading = self._read_from_start(emit, announce, whole_lines=follow_until is not None)
        if not reading.announced:
            emit(announce({}, None, 0))
        if follow_until is not None:
            emit(RunStatus(RunState.RUNNING, self._count, self._count, FOLLOWING))
            while not follow_until.wait(FOLLOW_EVERY_S):
                reading = self._look(reading, emit, announce)
        own = self._run_now()
        elapsed = reading.span[1] - reading.span[0] if self._count else time.time() - started
        if own is not None and own.duration_s > 0:  # the seconds it ran, as vftui runs says them
            elapsed = own.duration_s
        summary = RunSummary(
            _state(own),
            self._count,
            self._count,
            str(self.path),
            round(max(0.0, elapsed), 3),
            {},
            f"{self.skipped} malformed lines skipped" if self.skipped else "",
            dict(reading.dropped),
        )
        emit(summary)
        return summary

    def _read_from_start(
        self, emit: Callable[[Event], None], announce: Callable[..., RunStarted], whole_lines: bool
    ) -> _Pass:
        """Every line of the files, one after another, as new rows, in the order the view asks for."""
        self._start()
        reading = _Pass(self._places())
        if self.sharded is not None:
            self._warn(self.sharded.missing(), emit)
        for place in reading.places:
            with safe_files.open_to_read(place.path) as f:
                status = os.fstat(f.fileno())
                place.identity, place.total = (status.st_dev, status.st_ino), status.st_size
                self._read_lines(f, place, reading, emit, announce, whole_lines)
            reading.add_drops(place, self.series)
        if (
            self.sharded is not None and not whole_lines
        ):  # a followed run's shards are still being written
            counts = {
                place.run.shard: place.groups for place in reading.places if place.run is not None
            }
            self._warn(
                gaps(counts, self.sharded.count, max(place.top_item for place in reading.places)),
                emit,
            )
        if (column := ORDERS[self.order]) is not None:
            values = getattr(self, column)
            self._order = array("q", sorted(range(self._count), key=values.__getitem__))
        self._progress(reading, emit, done=True)
        return reading

    def _places(self) -> list[_Place]:
        """Each file to read, with its size now: the progress counts the bytes of them all from the start."""
        runs = self.sharded.runs if self.sharded is not None else [None]
        places = [
            _Place(self._files[part], part, run.name if run else self.path.name, run)
            for part, run in enumerate(runs)
        ]
        for place in places:
            with contextlib.suppress(OSError):  # a file that is not there says so when it is opened
                place.total = place.path.stat().st_size
        return places

    def _warn(self, lines: list[str], emit: Callable[[Event], None]) -> None:
        """Warnings about what a folder of shards lacks: in the log now, and on stderr once the view closes."""
        self.warnings += lines
        for line in lines:
            emit(LogRecord("WARNING", "view", line))

    def _look(
        self, reading: _Pass, emit: Callable[[Event], None], announce: Callable[..., RunStarted]
    ) -> _Pass:
        """A followed file's new whole lines; all of it again when it shrank or another file took its place."""
        changed = False
        for place in reading.places:
            try:
                f = safe_files.open_to_read(place.path)
            except (
                FileNotFoundError
            ):  # removed, perhaps to be replaced: a new file is read from its start
                continue
            with f:
                status = os.fstat(f.fileno())
                if (
                    status.st_dev,
                    status.st_ino,
                ) != place.identity or status.st_size < place.offset:
                    again = "it" if self.sharded is None else "the shards"
                    message = (
                        f"{place.name} shrank or was replaced: reading {again} again from the start"
                    )
                    emit(LogRecord("WARNING", "view", message))
                    return self._read_from_start(emit, announce, whole_lines=True)
                before, place.total = place.offset, status.st_size
                self._read_lines(f, place, reading, emit, announce, whole_lines=True)
            drops_before = place.drops_offset
            reading.add_drops(place, self.series)
            changed = changed or place.offset != before or place.drops_offset != drops_before
        if changed:
            self._progress(reading, emit, done=True)
        return reading

    def _read_lines(
        self,
        f: BinaryIO,
        place: _Place,
        reading: _Pass,
        emit: Callable[[Event], None],
        announce: Callable[..., RunStarted],
        whole_lines: bool,
    ) -> None:
        """The lines from ``place.offset`` on as rows; with ``whole_lines``, a last line still being written waits."""
        f.seek(place.offset)
        last_progress = 0.0
        for raw in store.group_lines(f):
            whole = raw.ended if isinstance(raw, LongLine) else raw.endswith(b"\n")
            if whole_lines and not whole:
                break
            place.lines += 1
            at = place.offset
            place.offset += raw.size if isinstance(raw, LongLine) else len(raw)
            if not isinstance(raw, LongLine) and not raw.strip():
                continue
            parsed = store.parse_group_line(raw)
            try:
                if isinstance(parsed, str):
                    raise ValueError(parsed)
                group = group_event(self._count + 1, parsed)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                self._skip(place, str(e) if isinstance(parsed, str) else f"bad group ({e})", emit)
                continue
            if place.run is not None and (overlap := foreign(place.run, group.item)) is not None:
                self._skip(place, overlap, emit)
                continue
            if not reading.announced:
                # from the first line's bytes: the progress refines it; counting first would wait
                estimate = reading.total // max(1, place.offset - at)
                started = announce(parsed, group, estimate)
                emit(started)
                reading.announced = True
                if started.mode is Mode.EVAL:
                    threshold = (
                        self._record.config.pass_threshold if self._record is not None else None
                    )
                    reading.tally = EvalTally(
                        len(group.scores), PASS_THRESHOLD if threshold is None else threshold
                    )
            self._add(at, group, place.part)
            place.groups, place.top_item = place.groups + 1, max(place.top_item, group.item)
            reading.add(group, self.series)
            self.score_range = reading.seen or self.score_range
            if place.lines % YIELD_EVERY == 0:
                time.sleep(
                    0
                )  # hand the GIL over: each of the UI's wake-ups would wait out a switch interval
            if time.monotonic() - last_progress > PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                self._progress(reading, emit)

    def _skip(self, place: _Place, reason: str, emit: Callable[[Event], None]) -> None:
        self.skipped += 1
        emit(LogRecord("WARNING", "view", f"{place.name} line {place.lines} skipped: {reason}"))

    def _progress(self, reading: _Pass, emit: Callable[[Event], None], done: bool = False) -> None:
        emit(
            FileProgress(
                self._count,
                reading.offset,
                reading.total,
                copy.deepcopy(reading.totals),
                list(reading.rewards),
                list(reading.identical),
                done,
            )
        )
        if reading.tally is not None:
            emit(reading.tally.report(len(reading.tally.items), final=done))

    def _add(self, offset: int, group: GroupCollected, part: int) -> None:
        """One more row: every column first, then the count readers go by."""
        self._offsets.append(offset)
        self._parts.append(part)
        self._items.append(group.item)
        self._starts.append(float(group.started_at))
        self._turns.append(stats.mean([float(t) for t in group.turns]))
        self._temperatures.append(group.temperature)
        self._lengths.append(group.completion_length)
        self._elapsed.append(group.elapsed_s)
        self._scores.extend(group.scores)
        self._score_at.append(len(self._scores))
        room = MAX_FUNCTION_COLUMNS - len(self._function_means)
        new = [n for n in group.metrics if n not in self._function_means][:room]
        if new:  # a new dict, never a changed one: the UI thread reads the columns while this one reads the file
            self._function_means = {
                **self._function_means,
                **{n: array("d", [math.nan] * self._count) for n in new},
            }
        for name, column in self._function_means.items():
            values = [
                v
                for v in group.metrics.get(name, ())
                if isinstance(v, (int, float)) and math.isfinite(v)
            ]
            column.append(stats.mean(values) if values else math.nan)
        self.max_item = max(self.max_item, group.item)
        self.group_size = max(self.group_size, len(group.scores))
        self._count += 1

    def _run_now(self) -> RunLine | None:
        """The run that wrote the file as ``vftui runs`` describes it now (live or ended, how long it
        ran); None for a file no vftui run wrote its settings or checkpoint beside, a copy, a folder
        of shards."""
        if self.sharded is not None or self.path != self._files[0]:
            return None
        files = RunFiles(self._files[0])
        if self._record is None and not files.checkpoint.exists():
            return None
        return listing.describe(self._files[0])

    def _run_record(self, emit: Callable[[Event], None]) -> RunRecord | None:
        """The settings saved beside the file (the first shard's), if any; damaged ones are named, and the groups
        shown without them."""
        try:
            return records.run_record(RunFiles(self._files[0]))
        except records.Damaged as e:
            emit(
                LogRecord(
                    "WARNING", "view", f"{e}: the groups are shown without the run's settings"
                )
            )
            return None

    def _started(
        self,
        raw: dict[str, Any],
        first: GroupCollected | None,
        groups_estimate: int,
        sim_tokenizer: str,
        tokenizer: str,
    ) -> RunStarted:
        record, meta = self._record or RunRecord(config=Settings()), raw.get(META) or {}
        simulated = bool(meta.get("simulated")) or record.endpoint == "simulated"
        recorded = tokenizer or record.tokenizer
        recorded_mode = (
            record.config.mode
            or str(meta.get("mode") or "")
            or (Mode.RL if raw.get("inference_logprobs") else Mode.SFT)
        )
        return RunStarted(
            mode=Mode(recorded_mode) if recorded_mode in set(Mode) else Mode.SFT,
            env=record.config.env or str(meta.get("env", "?")),
            model=record.model or str(meta.get("model", "?")),
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
