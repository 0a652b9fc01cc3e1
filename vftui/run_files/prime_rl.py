"""prime-rl's run folder read as rollouts, for ``vftui view`` (live with ``--follow``) and ``compare``.

prime-rl (PrimeIntellect-ai/prime-rl at 559b44772e47: ``src/prime_rl/monitors/file.py``, the orchestrator's
``main_loop`` and the dispatcher's ``emit_episode``) writes, under its output folder:

- ``rollouts/step_<N>/{train,eval}/all/traces.jsonl``: every completed episode, appended the moment it
  arrives (failed ones, trace-less ones included), one verifiers ``Episode.to_record()`` a line, stamped
  with its rollout group (``group.id``), its env's name (``env.name``) and its work (``run.work``: the
  step it was dispatched at); a train episode is filed under the step whose batch was collecting.
- ``.../effective/traces.jsonl``: the trained-on subset, per finalized batch; ``metrics.jsonl`` (scalars a
  step) and ``configs/orchestrator.json`` (the resolved config: each train source's ``group_size``).

The ``all`` files of successive steps are the run's stream: vftui reads the train ones, step by step, one
group a prime-rl rollout group (the rollouts of one task) with each rollout's figures as verifiers' own
``Trace`` gives them (``v1_traces``); a failed rollout is an error, counted, never a zero. Followed, a
group shows once all its rollouts are in, or once the stream is two steps past it (a cancelled group
never fills).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui import bounds, safe_files
from vftui.bounds import LongLine
from vftui.errors import UserError
from vftui.group_format import META
from vftui.run_files import store, v1_traces, view_cache
from vftui.run_files.files import RunFiles
from vftui.run_files.v1_traces import Failure, SavedRollout, V1Eval, as_dict, as_list, as_text

ROLLOUTS = "rollouts"  # prime_rl.monitors.file.FileMonitor.log_episodes
ORCHESTRATOR_CONFIG = Path("configs", "orchestrator.json")  # prime_rl.entrypoints.rl
KINDS, SUBSETS = ("train", "eval"), ("all", "effective")  # prime_rl.monitors.base.Kind, Subset
STEP = re.compile(r"step_(\d{1,9})")
FOLLOW_EVERY_S = 1.0
STEPS_PAST = (
    2  # a followed group still short of its size shows once the stream is this many steps on
)


@dataclass
class Group:
    """One prime-rl rollout group: its task's rollouts and failures, and the steps they were filed under."""

    key: str
    item: int
    step: int
    last_step: int
    rollouts: list[SavedRollout] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    size: int | None = None  # the source's group_size, where the config says it

    @property
    def episodes(self) -> int:
        return len(self.rollouts) + len(self.failures)


@dataclass
class Stream:
    """Where a prime-rl run's episodes are: the run folder, or one of its ``traces.jsonl`` files alone."""

    run: Path
    only: Path | None = None  # a file the user named: that step's episodes, nothing else

    def files(self) -> list[tuple[int, Path]]:
        """The train ``all`` files (or the one named), by step."""
        if self.only is not None:
            return [(_step_of(self.only), self.only)]
        found = []
        with contextlib.suppress(OSError):
            for folder in (self.run / ROLLOUTS).iterdir():
                if (m := STEP.fullmatch(folder.name)) is not None:
                    path = folder / "train" / "all" / v1_traces.TRACES
                    if path.is_file():
                        found.append((int(m.group(1)), path))
        return sorted(found)


def stream_of(path: Path) -> Stream | None:
    """The prime-rl run ``path`` names (its folder, its ``rollouts/``, or one of its step files); None: no run."""
    if path.is_file():
        return Stream(path.parents[4], path) if _in_tree(path) else None
    if path.name == ROLLOUTS and path.parent != path:
        path = path.parent
    if (path / ROLLOUTS).is_dir() or (path / ORCHESTRATOR_CONFIG).is_file():
        return Stream(path)
    return None


def _in_tree(path: Path) -> bool:
    """``rollouts/step_<N>/<kind>/<subset>/traces.jsonl``: where prime-rl files its episodes."""
    parts = path.parts[-5:]
    return (
        len(parts) == 5
        and parts[0] == ROLLOUTS
        and STEP.fullmatch(parts[1]) is not None
        and parts[2] in KINDS
        and parts[3] in SUBSETS
        and parts[4] == v1_traces.TRACES
    )


def _step_of(path: Path) -> int:
    m = STEP.fullmatch(path.parent.parent.parent.name)
    return int(m.group(1)) if m else 0


class Reader:
    """A run's groups as its stream files hold them, read on from where the last look ended."""

    def __init__(self, stream: Stream, each: v1_traces.Tally | None = None) -> None:
        self.stream = stream
        # takes each episode's rollouts, which are then not kept (``v1_traces.read``)
        self._each = each
        self.run = V1Eval(stream.only or stream.run)
        self.groups: dict[str, Group] = {}
        self.newest_step = -1
        self._offsets: dict[Path, int] = {}
        self._positions: dict[str, int] = {}
        self._sizes = _group_sizes(stream.run)
        self._seen_episode = False

    def look(self, whole_lines: bool) -> None:
        """Every line written since the last look; with ``whole_lines``, a last line still being written waits.
        A run whose first line is no episode, or a trace of an unknown version, is a sentence."""
        for step, path in self.stream.files():
            self.newest_step = max(self.newest_step, step)
            try:
                with safe_files.open_to_read(path) as f:
                    f.seek(self._offsets.get(path, 0))
                    for raw in store.group_lines(f):
                        whole = raw.ended if isinstance(raw, LongLine) else raw.endswith(b"\n")
                        if whole_lines and not whole:
                            break
                        self._offsets[path] = self._offsets.get(path, 0) + (
                            raw.size if isinstance(raw, LongLine) else len(raw)
                        )
                        self._line(raw, step, path)
            except OSError as e:
                raise UserError(f"cannot read {path}: {e.strerror}") from e

    def _line(self, raw: bytes | LongLine, step: int, path: Path) -> None:
        try:
            row = json.loads(raw) if isinstance(raw, bytes) else None
        except (ValueError, RecursionError):
            row = None
        if not isinstance(row, dict) or not v1_traces.is_episode(row):
            if isinstance(raw, LongLine) or raw.strip():
                if not self._seen_episode:
                    raise UserError(
                        f"{path}: not prime-rl episodes this vftui knows (a line without an episode's "
                        "'task' and 'traces')"
                    )
                self.run.skipped += 1
            return
        self._seen_episode = True
        rollouts, failures = v1_traces.read_episode(row, self.run, self._positions)
        if self._each is not None:  # the figures alone: no group is followed
            self._each(rollouts)
            self.run.rollouts.clear()
            return
        first = rollouts[0] if rollouts else failures[0] if failures else None
        key, item = (first.key, first.item) if first is not None else ("", 0)
        group_id = as_text(as_dict(row.get("group")).get("id")) or as_text(row.get("id")) or key
        group = self.groups.get(group_id)
        if group is None:
            env = as_dict(row.get("env"))
            size = self._sizes.get(as_text(env.get("name"))) or self._sizes.get("")
            group = self.groups[group_id] = Group(key, item, step, step, size=size)
        group.last_step = step
        group.rollouts += rollouts
        group.failures += failures

    def ready(self, group: Group) -> bool:
        """Whether a followed group is whole: all its rollouts in, or the stream far past it."""
        full = group.size is not None and group.episodes >= group.size
        return full or self.newest_step >= group.last_step + STEPS_PAST

    def finish(self) -> None:
        """A run with no episode in it is a sentence (a run just started is followed, not read whole)."""
        if not self._seen_episode:
            raise UserError(
                f"{self.stream.only or self.stream.run}: no prime-rl episode in it yet "
                f"(no {ROLLOUTS}/step_<N>/train/all/{v1_traces.TRACES} holds one)"
            )


def _group_sizes(run: Path) -> dict[str, int]:
    """Each train source's ``group_size`` by its name (``name``, else its taskset's id); ``""``: the one
    source's, where the run has only one; a config that cannot be read (a FIFO, a device, damage) is a sentence."""
    config = v1_traces.side_file(run / ORCHESTRATOR_CONFIG)
    sources = as_list(as_dict(as_dict(config).get("train")).get("source"))
    sizes: dict[str, int] = {}
    for source in map(as_dict, sources):
        size = source.get("group_size")
        if type(size) is not int or not 1 <= size <= bounds.HUGE:
            continue
        taskset = as_text(as_dict(as_dict(source.get("env")).get("taskset")).get("id"))
        sizes[as_text(source.get("name")) or taskset] = size
    if len(sources) == 1 and sizes:
        sizes[""] = next(iter(sizes.values()))
    return sizes


def read(stream: Stream, each: v1_traces.Tally | None = None) -> Reader:
    """Every episode the run's stream files hold now (with ``each``, as ``v1_traces.read`` reads them)."""
    reader = Reader(stream, each)
    reader.look(whole_lines=False)
    reader.finish()
    return reader


def group_line(reader: Reader, group: Group) -> dict[str, Any]:
    """A group in vftui's groups form, an rl run's, with the step prime-rl filed it under."""
    line = v1_traces.group_line(
        group.rollouts, group.item, reader.run.env or "?", reader.run.model or "?", "rl"
    )
    line[META]["step"] = group.step
    return line


def drop_line(group: Group) -> str:
    """A group's failed rollouts as a line of the drop log: the view counts them as the run's errors."""
    n = len(group.failures)
    reason = f"{group.failures[0].reason} ({n} rollout{'s' if n > 1 else ''} failed)"
    return json.dumps({"item": group.item, "reason": reason, "scores": [], "metrics": {}}) + "\n"


def groups_file(stream: Stream) -> Path:
    """The run in the groups form, its failed rollouts in the drop log, made once per version of its files."""
    files = stream.files()
    version = "|".join(f"{p.resolve()}:{p.stat().st_mtime_ns}:{p.stat().st_size}" for _, p in files)
    digest = hashlib.sha256(f"prime-rl|{view_cache.FORM}|{version}".encode()).hexdigest()[:16]
    converted = view_cache.folder() / f"{stream.run.name}-prime-rl-{digest}.jsonl"
    if not view_cache.reuse(converted):
        view_cache.prune()
        reader = read(stream)
        converted.parent.mkdir(parents=True, exist_ok=True)
        held = [g for g in reader.groups.values() if g.rollouts]
        store.write_text_atomic(
            RunFiles(converted).drops,
            "".join(drop_line(g) for g in reader.groups.values() if g.failures),
        )
        store.write_text_atomic(
            converted,
            "".join(json.dumps(group_line(reader, g), allow_nan=False) + "\n" for g in held),
        )
    return converted


class Live:
    """A followed run mirrored into a groups file as it grows: each group appended once it is whole, its
    failures to the drop log, so the view's own ``--follow`` of that file shows them."""

    def __init__(self, stream: Stream) -> None:
        self.reader = Reader(stream)
        self.named = stream.only or stream.run
        name = hashlib.sha256(str(self.named.resolve()).encode()).hexdigest()[:16]
        self.path = view_cache.made(f"{stream.run.name}-prime-rl-live-{name}.jsonl")
        self._shown: set[str] = set()
        store.write_text_atomic(self.path, "")
        store.write_text_atomic(RunFiles(self.path).drops, "")
        self.reader.look(
            whole_lines=True
        )  # a run of an unknown format: a sentence before the view opens
        self._write()

    def follow(self, until: threading.Event) -> None:
        """Look again every second until ``until`` is set (the view closed)."""
        while not until.wait(FOLLOW_EVERY_S):
            try:
                self.reader.look(whole_lines=True)
            except UserError as e:  # a line of a newer format mid-run: said once, among the errors
                with RunFiles(self.path).drops.open("a") as f:
                    f.write(json.dumps({"item": 0, "reason": str(e), "scores": [], "metrics": {}}))
                    f.write("\n")
                return
            self._write()

    def _write(self) -> None:
        ready = [
            (gid, g)
            for gid, g in self.reader.groups.items()
            if gid not in self._shown and self.reader.ready(g)
        ]
        with RunFiles(self.path).drops.open("a") as drops, self.path.open("a") as out:
            for gid, group in ready:
                self._shown.add(gid)
                if group.failures:
                    drops.write(drop_line(group))
                if group.rollouts:
                    out.write(json.dumps(group_line(self.reader, group), allow_nan=False) + "\n")
