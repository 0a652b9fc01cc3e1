"""The runs under a folder, whatever wrote them: ``vftui runs FOLDER``, here or on the hosts of a fleet.

Four kinds are found: vftui's own runs (a ``*.run.json`` beside each jsonl), a verifiers v1 eval's run folder
(``traces.jsonl``, its config under ``configs/``), a prime-rl output folder (``rollouts/step_<N>/…``,
``configs/orchestrator.json``) and vf-eval's results folder (``results.jsonl``, ``metadata.json``). The walk is
bounded (``MAX_DEPTH`` folders down, ``MAX_ENTRIES`` entries looked at), never goes through a link, skips
hidden folders and does not enter a run's own folder; a folder it cannot read is skipped and counted.

Each run says what its small files tell (config, metadata, checkpoint); its rollouts are read only where they
are at most ``READ_WHOLE_BYTES``, so listing a folder never reads a big run whole: unknown figures are ``None``
(``-`` in the table). Those it reads give the figures every reader gives (``results.load``'s), read a line at a
time, a reward kept of each rollout and no message, and one run's at a time: read whole, 8 MB held some 200 MB
parsed, and 32 runs were read at once.
"""

from __future__ import annotations

import math
import os
import stat
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui import bounds
from vftui.errors import UserError
from vftui.run_files import prime_rl, records, results, v1_traces, vf_eval
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import DAMAGED, MAX_ASKED_AT_ONCE, RunLine, describe
from vftui.run_files.v1_traces import as_dict, as_list, as_text

MAX_DEPTH = 8  # folders below FOLDER: ``~/project/outputs/<env>--<model>--<harness>--<id>`` is 4
MAX_ENTRIES = 10_000  # files and folders looked at: past it the walk stops, and says so
READ_WHOLE_BYTES = (
    8 * 1024**2
)  # a run's rollouts read for its counts and mean reward only up to this
OWN, V1, PRIME_RL, VF_EVAL = "vftui", "verifiers v1", "prime-rl", "vf-eval"  # as compare names them
LEGACY_V1_CONFIG = Path("configs", "eval.json")  # verifiers.v1.cli.output.saved_config_path
UNKNOWN = "-"
MIN_TIMED_S = 1.0  # a run's files written closer together than this tell no duration nor rate
# one run's rollouts parsed at a time: parsing holds the GIL, so reading them side by side gained nothing, and
# each thread held its run's lines as they were parsed
_READING = threading.Lock()


@dataclass
class Walk:
    """What a walk found: each run's kind and path, and what it could not look at."""

    found: list[tuple[str, Path]] = field(default_factory=list)
    entries: int = 0
    unreadable: int = 0
    capped: bool = False  # stopped at MAX_ENTRIES
    too_deep: int = 0  # folders below MAX_DEPTH, not looked in

    def notes(self, root: Path) -> list[str]:
        said = []
        if self.unreadable:
            said.append(f"skipped {self.unreadable} folder(s) under {root} that cannot be read")
        if self.capped:
            said.append(
                f"looked at the first {MAX_ENTRIES:,} files and folders under {root} only; name a "
                "folder nearer the runs"
            )
        if self.too_deep:
            said.append(
                f"did not look in {self.too_deep} folder(s) more than {MAX_DEPTH} levels below {root}"
            )
        return said


def runs_under(root: Path) -> tuple[list[RunLine], list[str]]:
    """The runs found under ``root`` (a folder), newest first, and notes on what the walk left out."""
    walk = walk_folder(root)
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_ASKED_AT_ONCE, len(walk.found)))) as pool:
        lines = list(pool.map(lambda found: describe_found(*found), walk.found))
    return sorted(lines, key=lambda r: -r.created), walk.notes(root)


def walk_folder(root: Path) -> Walk:
    """The runs under ``root``, a level at a time, within the bounds."""
    walk, level = Walk(), [root]
    for _ in range(MAX_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            below += _look(folder, walk)
            if walk.capped:
                return walk
        level = below
    walk.too_deep = len(level)
    return walk


def _look(folder: Path, walk: Walk) -> list[Path]:
    """What ``folder`` is (a run of one kind, or vftui runs beside each other), and the folders to look in."""
    try:
        with os.scandir(folder) as listing:
            entries = []
            for entry in listing:
                walk.entries += 1
                if walk.entries > MAX_ENTRIES:
                    walk.capped = True
                    break
                entries.append(entry)
    except OSError:
        walk.unreadable += 1
        return []
    files = {e.name for e in entries if _is(e, folder=False)}
    folders = {e.name for e in entries if _is(e, folder=True)}
    if prime_rl.ROLLOUTS in folders or _regular(folder / prime_rl.ORCHESTRATOR_CONFIG):
        walk.found.append((PRIME_RL, folder))
        return []
    if vf_eval.RESULTS in files:
        walk.found.append((VF_EVAL, folder))
        return []
    if v1_traces.TRACES in files:
        walk.found.append((V1, folder))
        return []
    # any entry named as a run's record: one that is no file (a FIFO, a link, a folder) is listed as damaged,
    # never passed over
    own = [RunFiles.of_record(folder / name) for name in sorted(e.name for e in entries)]
    runs = [files for files in own if files is not None]
    walk.found += [(OWN, files.jsonl) for files in runs]
    # an eval's results: listed as its run; an rl run's evals (``--eval-every``: a folder each in its eval folder)
    # are found in it, each listed as an eval
    theirs = {files.eval_dir.name for files in runs if _regular(files.eval_dir / vf_eval.RESULTS)}
    return [folder / name for name in sorted(folders - theirs) if not name.startswith(".")]


def _is(entry: os.DirEntry[str], folder: bool) -> bool:
    """Whether the entry itself (never what a link points at) is a folder, or a regular file."""
    try:
        return (
            entry.is_dir(follow_symlinks=False) if folder else entry.is_file(follow_symlinks=False)
        )
    except OSError:
        return False


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def describe_found(kind: str, path: Path) -> RunLine:
    """What ``path``'s files tell of a run of ``kind``; ``DAMAGED`` with a sentence where they cannot be read."""
    if kind == OWN:
        return describe(path)
    try:
        line = {V1: _v1, PRIME_RL: _prime_rl, VF_EVAL: _vf_eval}[kind](path)
    except (UserError, OSError, ValueError) as e:
        said = str(e)
        if isinstance(e, OSError) and e.strerror:  # the file's own name: the row is its folder
            said = f"{Path(e.filename).name}: {e.strerror}" if e.filename else e.strerror
        return RunLine(DAMAGED, None, None, 0.0, path, _mtime(path), problem=said, kind=kind)
    return line


@dataclass
class _Facts:
    """What a foreign run's files tell, before it is a row."""

    env: str = ""
    model: str = ""
    mode: str = ""
    total: int | None = None
    done: int | None = None
    mean: float | None = None
    started: float = 0.0
    last: float = 0.0  # when its rollouts were last written
    errors: int = 0  # its examples (tasks) that failed to score, in none of its figures


def _v1(folder: Path) -> RunLine:
    """A verifiers v1 eval: env, model and tasks asked from its resolved config; its traces when small."""
    config = _json(folder / v1_traces.RESOLVED_CONFIG) or _json(folder / LEGACY_V1_CONFIG)
    taskset = as_dict(as_dict(config.get("env")).get("taskset"))
    traces = folder / v1_traces.TRACES
    facts = _Facts(
        as_text(taskset.get("id")) or as_text(as_dict(config.get("env")).get("id")),
        as_text(config.get("model")),
        "eval",
        _count(config.get("num_tasks")),
        started=_started(folder / v1_traces.RESOLVED_CONFIG, traces),
        last=_mtime(traces),
    )
    _read_if_small(facts, traces)
    return _line(V1, folder, facts)


def _prime_rl(folder: Path) -> RunLine:
    """A prime-rl run: its sources' envs from its orchestrator config; its train rollouts when small."""
    config = _json(folder / prime_rl.ORCHESTRATOR_CONFIG)
    sources = [as_dict(s) for s in as_list(as_dict(config.get("train")).get("source"))]
    envs = [
        as_text(s.get("name")) or as_text(as_dict(as_dict(s.get("env")).get("taskset")).get("id"))
        for s in sources
    ]
    files = [path for _, path in prime_rl.Stream(folder).files()]
    facts = _Facts(
        ", ".join(e for e in envs if e),
        as_text(as_dict(config.get("model")).get("name")),
        "rl",
        started=_started(folder / prime_rl.ORCHESTRATOR_CONFIG, *files),
        last=max((_mtime(p) for p in files), default=0.0),
    )
    if files and sum(p.stat().st_size for p in files) <= READ_WHOLE_BYTES:
        with _READING:
            scores = _Scores()
            run = prime_rl.read(prime_rl.Stream(folder), scores.add).run
            _read_whole(facts, scores.of_v1(run))
    return _line(PRIME_RL, folder, facts)


def _vf_eval(folder: Path) -> RunLine:
    """vf-eval's results: env, model, examples and mean reward from its metadata.json; its rows when small."""
    metadata = folder / vf_eval.METADATA
    found = _json(metadata)
    rows = folder / vf_eval.RESULTS
    duration = bounds.score(found.get("time_ms"))
    facts = _Facts(
        as_text(found.get("env_id")) or as_text(found.get("env")),
        as_text(found.get("model")),
        "eval",
        _count(found.get("num_examples")),
        mean=bounds.score(found.get("avg_reward")),
        started=_started(rows, metadata),
        last=max(_mtime(rows), _mtime(metadata)),
        errors=records.errors_listed(found.get("errors")),
    )
    if duration is not None and duration > 0:
        facts.started = max(0.0, facts.last - duration / 1000)
    _read_if_small(facts, rows)
    return _line(VF_EVAL, folder, facts)


def _read_if_small(facts: _Facts, rollouts: Path) -> None:
    """``rollouts`` read where small; an empty file (a run that just began) is none done yet, and no reward (its
    metadata's was not measured on these rows)."""
    size = rollouts.stat().st_size
    if size == 0:
        facts.done, facts.mean = 0, None
    elif size <= READ_WHOLE_BYTES:
        with _READING:
            _read_whole(facts, _scores(rollouts))


@dataclass
class _Scores:
    """What the listing takes of a run's rollouts, as ``results.load`` reads them: each item's rewards, the
    examples that failed, the env and model they name."""

    rewards: dict[str, array[float]] = field(default_factory=dict)
    errors: int = 0
    env: str = ""
    model: str | None = None

    def add(self, rollouts: list[v1_traces.SavedRollout]) -> None:
        for rollout in rollouts:
            self.rewards.setdefault(rollout.key, array("d")).append(rollout.reward)

    def of_v1(self, run: v1_traces.V1Eval) -> _Scores:
        """``run``'s (read with ``add``), as ``results`` sources it."""
        self.errors, self.env, self.model = len(v1_traces.failed_tasks(run)), run.env, run.model
        return self


def _scores(path: Path) -> _Scores:
    """The figures of a rollouts file (a v1 eval's traces, vf-eval's results or vftui's groups) as
    ``results.load`` gives them: v1 traces a line at a time with a reward kept of each rollout (held whole they
    keep every rollout's messages and tokens), the rest by ``results.figures_of``; a sentence where it is none
    of them."""
    scores = _Scores()
    if (stream := prime_rl.stream_of(path)) is not None:  # a prime-rl step's file, named alone
        return scores.of_v1(prime_rl.read(stream, scores.add).run)
    if results.is_v1(path):
        return scores.of_v1(v1_traces.read(path, scores.add))
    source = results.figures_of(path)
    rewards = {key: array("d", item.rewards) for key, item in source.items.items()}
    return _Scores(rewards, source.errors, source.env_id, source.setup.model)


def _read_whole(facts: _Facts, scores: _Scores) -> None:
    """The items scored (a task whose rollouts all failed is none) and the mean reward, from a run's rollouts
    read whole: the mean of its items' means, as compare and the eval itself give it (over rollouts, an item
    with fewer rows weighed less); none where no item is. Its env and model where the small files did not say."""
    means = [math.fsum(rewards) / len(rewards) for rewards in scores.rewards.values()]
    facts.done = len(scores.rewards)
    facts.mean = math.fsum(means) / len(means) if means else None
    facts.errors = scores.errors
    facts.env = facts.env or scores.env
    facts.model = facts.model or scores.model or ""


def _line(kind: str, path: Path, facts: _Facts) -> RunLine:
    whole = facts.done is not None and facts.total is not None and facts.done >= facts.total
    elapsed = max(0.0, facts.last - facts.started) if facts.started else 0.0
    elapsed = elapsed if elapsed >= MIN_TIMED_S else 0.0  # files copied at once: no rate to tell
    return RunLine(
        "finished" if whole else UNKNOWN,
        facts.done,
        facts.total,
        facts.done / elapsed if facts.done and elapsed > 0 else 0.0,
        path,
        facts.started,
        env=facts.env,
        mode=facts.mode,
        model=facts.model,
        duration_s=elapsed,
        mean_reward=facts.mean,
        given_id=UNKNOWN,
        kind=kind,
        errors=facts.errors,
    )


def _json(path: Path) -> dict[str, Any]:
    """A small JSON object file (``bounds.read_json``: a regular file, at most a few MB); empty when absent."""
    try:
        value = bounds.read_json(path)
    except FileNotFoundError:
        return {}
    except ValueError as e:  # named: the row is its folder
        raise ValueError(f"{path.name}: {e}") from e
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value <= bounds.HUGE else None


def _started(first: Path, *then: Path) -> float:
    """When the run began: ``first``'s mtime (a config written as it started), else the earliest of ``then``."""
    return _mtime(first) or min((t for p in then if (t := _mtime(p))), default=0.0)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
