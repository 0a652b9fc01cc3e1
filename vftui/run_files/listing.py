"""Every run this user started, running or not, wherever its jsonl is: for ``vftui runs``, its screen
and ``vftui attach``.

A running run answers on its control socket with its live figures; for the others, the
run's own files say how far it got and how it ended (the checkpoint records the end). Every run
is asked at once, so one that does not answer (stopped with Ctrl-Z) costs a second, whatever
the number of runs, and is listed as not answering.
"""

from __future__ import annotations

import math
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from vftui import paths, safe_files
from vftui.bounds import HUGE
from vftui.errors import UserError
from vftui.live.client import NotAnswering, ask_status
from vftui.live.server import RunInfo
from vftui.run_files import lock, records
from vftui.run_files.files import RunFiles
from vftui.run_files.index import known_runs, run_id
from vftui.run_files.records import Checkpoint, RunRecord, Settings
from vftui.run_files.vf_eval import METADATA
from vftui.text.printable import printable
from vftui.text.wording import clock, ended_as, groups_rate

KILLED = "interrupted"  # no state recorded and nobody holds it: killed, or its machine went down
NOT_ANSWERING = (
    "not answering"  # its process listens on its socket but says nothing: stopped (Ctrl-Z), stuck
)
MAX_ASKED_AT_ONCE = 32


DAMAGED = "damaged"  # its settings or checkpoint do not read: listed, with ``problem`` saying why


class About(TypedDict):
    """What a run collects, as its record says: a ``RunLine``'s own fields."""

    env: str
    mode: str
    model: str


@dataclass(frozen=True)
class RunLine:
    state: str
    groups_done: int | None  # None: not known (a big run found under a folder, not read whole)
    groups_total: int | None
    groups_per_s: float
    out_path: Path
    created: float
    pid: int | None = None
    env: str = ""
    mode: str = ""
    model: str = ""
    duration_s: float = 0.0  # the seconds it ran, over all its sessions (``seconds_run``)
    mean_reward: float | None = None
    problem: str = ""
    host: str = ""  # another machine's run (``vftui runs --host``): its id as that machine gave it
    given_id: str = ""
    kind: str = (
        "vftui"  # what wrote it: vftui, or (``vftui runs FOLDER``) verifiers v1, prime-rl, vf-eval
    )
    errors: int = (
        0  # an eval's examples that failed to score: in none of its figures, its reward included
    )

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def answering(self) -> bool:
        """Running and taking calls: a run a dashboard can attach to."""
        return self.running and self.state != NOT_ANSWERING

    @property
    def id(self) -> str:
        return self.given_id or run_id(self.out_path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunLine:
        """A line of another machine's ``vftui runs --json`` (``as_dict``), its host added by ``fleet``.

        A figure that is there but is not one of its kind, finite and in range (a count of 10**400, a start
        in the year 10**292, a NaN rate) is a ``ValueError`` naming it: the row is left out, never shown wrong.
        """
        text = {
            key: printable(default if d.get(key) is None else str(d[key]))
            for key, default in _TEXTS.items()
        }
        count, up_to = f"a count (0 to {HUGE:.0e})", f"from 0 to {HUGE:.0e}"
        started = _figure(d, "started", 0.0, "a date (1970 to 9999)", 0, LATEST)
        duration = _figure(d, "duration_s", 0.0, f"a time (a number of seconds {up_to})", 0, HUGE)
        done = _figure(d, "groups_done", None, count, 0, HUGE, whole=True)
        total = _figure(d, "groups_total", None, count, 0, HUGE, whole=True)
        rate = _figure(d, "groups_per_s", 0.0, f"a rate (a number {up_to})", 0, HUGE)
        reward = _figure(
            d,
            "mean_reward",
            None,
            f"a reward (a number from -{HUGE:.0e} to {HUGE:.0e})",
            -HUGE,
            HUGE,
        )
        pid = _figure(d, "pid", None, "a process id", 1, 2**31 - 1, whole=True)
        errors = _figure(d, "errors", 0, count, 0, HUGE, whole=True)
        return cls(
            text["state"],
            None if done is None else int(done),
            None if total is None else int(total),
            float(rate or 0),
            Path(text["path"]),
            float(started or 0),
            None if pid is None else int(pid),
            text["env"],
            text["mode"],
            text["model"],
            float(duration or 0),
            None if reward is None else float(reward),
            text["problem"],
            text["host"],
            text["id"],
            text["kind"],
            int(errors or 0),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "started": self.created,
            "duration_s": round(self.duration_s, 1),
            "env": self.env,
            "mode": self.mode,
            "model": self.model,
            "groups_done": self.groups_done,
            "groups_total": self.groups_total,
            "groups_per_s": self.groups_per_s,
            "mean_reward": self.mean_reward,
            "errors": self.errors,
            "path": str(self.out_path),
            "pid": self.pid,
            **({"problem": self.problem} if self.problem else {}),
            **({"host": self.host} if self.host else {}),
        }


def describe(out: Path) -> RunLine:
    """How the run writing (or that wrote) ``out`` is doing; ``DAMAGED`` when its files do not say."""
    files = RunFiles(out)
    if what := safe_files.not_regular(out):  # its groups cannot be read: said, not counted as whole
        return RunLine(DAMAGED, 0, 0, 0.0, out, 0.0, problem=f"{out} is {what}")
    try:
        run = records.run_record(files) or RunRecord(config=Settings())
        saved = records.read(files.checkpoint, Checkpoint) or Checkpoint()
    except records.Damaged as e:
        return RunLine(DAMAGED, 0, 0, 0.0, out, 0.0, problem=str(e))
    config, created = run.config, run.created
    about = About(env=config.env, mode=config.mode, model=run.model)
    total = config.own_shard.share(config.steps) if config.mode != "eval" else 0
    info = ask_status(files.socket)
    if isinstance(info, RunInfo):
        return RunLine(
            info.state.value,
            info.groups_done,
            info.groups_total or total,
            info.groups_per_s,
            out,
            created,
            info.pid,
            duration_s=seconds_run(files, saved, created, live=True),
            mean_reward=info.mean_reward,
            **about,
        )
    done, elapsed = (
        saved.groups if saved.groups_done is None else saved.groups_done,
        seconds_run(files, saved, created, live=False),
    )
    total = (
        saved.groups_total or total
    )  # what the run knew at its end (an eval's examples): the config may not say
    state = ended_as(saved.state, done, total) if saved.state is not None else KILLED
    rate, pid = done / elapsed if elapsed > 0 else 0.0, None
    if isinstance(
        info, NotAnswering
    ):  # alive: its figures as last saved, its pid as its lock names it
        state, rate, pid = NOT_ANSWERING, 0.0, lock.holder(files)
        elapsed = seconds_run(files, saved, created, live=True)
    return RunLine(
        state,
        done,
        total or done,
        rate,
        out,
        created,
        pid,
        duration_s=elapsed,
        mean_reward=saved.mean_reward,
        errors=eval_errors(files.eval_dir) if config.mode == "eval" else 0,
        **about,
    )


def seconds_run(files: RunFiles, saved: Checkpoint, created: float, live: bool) -> float:
    """How long a run has run: the one definition of a run's duration, ``vftui runs``' TIME and the
    viewer's clock alike.

    The seconds the run actually ran, over all its sessions: its checkpoint's ``elapsed_s`` (each
    session adds its own seconds to the earlier sessions', so the time between a stop and its
    ``--resume`` counts in none), and, while it runs (``live``), the seconds since that checkpoint
    was saved, or since this session took the run's lock if it has saved none yet. Never the wall
    time from its first group to its last: a run resumed a day later did not run for a day. With no
    checkpoint and no lock: the seconds since it was ``created`` while it runs, else 0 (not known)."""
    if not live:
        return saved.elapsed_s
    now = time.time()
    since = max(saved.saved_at or 0.0, _session_start(files) or created)
    if not since:
        return saved.elapsed_s
    return saved.elapsed_s + max(0.0, now - since)


def _session_start(files: RunFiles) -> float | None:
    """When the process now running the run took its lock (its file is written then, never again)."""
    try:
        return files.lock_path.stat().st_mtime
    except OSError:
        return None


def eval_errors(folder: Path) -> int:
    """How many examples the eval in ``folder`` lists as failed to score (its ``metadata.json``, as vftui
    writes it); 0 where it lists none or cannot be read (the row says what else it knows)."""
    try:
        found = records.read(folder / METADATA, records.EvalMetadata)
    except records.Damaged:
        return 0
    return found.errors_listed if found is not None else 0


def all_runs(skipped: list[str] | None = None) -> list[RunLine]:
    """Every run known, newest first by the time it started, wherever its files are (the runs
    folder or ``--out`` elsewhere); asked all at once. A damaged index entry's sentence goes to
    ``skipped`` when given."""
    runs = known_runs(skipped)
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_ASKED_AT_ONCE, len(runs)))) as pool:
        lines = list(pool.map(describe, runs))
    return sorted(lines, key=lambda r: -r.created)


def kept_elsewhere(line: RunLine, home: Path | None = None) -> bool:
    """Whether the run's jsonl is outside the runs folder ``home`` (``--out`` elsewhere)."""
    return not line.out_path.is_relative_to(home or paths.runs_dir().resolve())


def find_running(target: Path | None) -> RunLine:
    """The run ``target`` names (a run folder or its jsonl), or the newest running one; it must be running."""
    if target is None:
        running = [r for r in all_runs() if r.answering]
        if not running:
            raise UserError("no vftui run is running (vftui runs lists them all)")
        return max(running, key=lambda r: r.created)
    line = describe(RunFiles.find(target.expanduser().resolve(), asked_by="vftui attach").jsonl)
    if line.state == NOT_ANSWERING:
        raise not_answering(line)
    if not line.running:
        raise UserError(
            f"the run at {line.out_path} is not running ({line.state}); "
            f"vftui view {shlex.quote(str(line.out_path))} shows what it collected"
        )
    return line


def not_answering(line: RunLine) -> UserError:
    return UserError(
        f"the run at {line.out_path} (pid {line.pid}) does not answer: it is stopped (Ctrl-Z; "
        f"kill -CONT {line.pid} resumes it) or stuck"
    )


_TEXTS = {
    "state": "?",
    "path": "",
    "env": "",
    "mode": "",
    "model": "",
    "problem": "",
    "host": "",
    "id": "",
    "kind": "vftui",  # an older vftui's runs --json: its own runs, all of them
}
LATEST = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC: a later start is no date a clock shows


def _figure(
    d: dict[str, Any],
    key: str,
    absent: float | None,
    kind: str,
    low: float,
    high: float,
    whole: bool = False,
) -> float | None:
    """``d[key]`` when it is a number of its kind from ``low`` to ``high`` (``absent`` when missing or null);
    else a ``ValueError`` that says so. Compared as given, so a 400-digit int is never made a float."""
    value = d.get(key)
    if value is None:
        return absent
    fits = type(value) is int or (type(value) is float and not whole and math.isfinite(value))
    if not fits or not low <= value <= high:
        shown = repr(value)
        raise ValueError(f"{key} {shown[:24]}{'…' if len(shown) > 24 else ''} is not {kind}")
    return value


COLUMNS = (
    "ID",
    "STATE",
    "STARTED",
    "TIME",
    "ENV",
    "MODE",
    "MODEL",
    "GROUPS",
    "RATE",
    "REWARD",
    "PATH",
)


def cells(r: RunLine) -> tuple[str, ...]:
    """A run's row, as ``vftui runs`` prints it and the runs screen shows it."""
    started = time.strftime("%m-%d %H:%M", time.localtime(r.created)) if r.created else "-"
    unknown = r.state in (NOT_ANSWERING, DAMAGED) or not (r.running or r.duration_s)
    rate = (
        "-" if unknown else groups_rate(r.groups_per_s)
    )  # a paused run's is 0.00, as its dashboard's
    reward = f"{r.mean_reward:.3f}" if r.mean_reward is not None else "-"
    return (
        r.id,
        r.state,
        started,
        clock(r.duration_s) if r.duration_s or r.kind == "vftui" else "-",  # another's: not known
        r.env.rsplit("/", 1)[-1] or "-",
        r.mode or "-",
        r.model or "-",
        "/".join("-" if n is None else str(n) for n in (r.groups_done, r.groups_total))
        + (f" ({r.errors} errors)" if r.errors else ""),  # 10/10 of which 5 in no figure
        rate,
        reward,
        str(r.out_path),
    )
