"""``vftui runs``: every run this user started, running or not, wherever its jsonl is.

A running run answers on its control socket with its live figures; for the others, the
run's own files say how far it got and how it ended (the checkpoint records the end).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from vftui.errors import UserError
from vftui.live.client import ask_status
from vftui.live.server import RunInfo, socket_path
from vftui.printable import say
from vftui.run_files import find_resumable, sidecars
from vftui.run_index import known_runs

KILLED = "interrupted"  # no state recorded and nobody holds it: killed, or its machine went down


@dataclass(frozen=True)
class RunLine:
    state: str
    groups_done: int
    groups_total: int
    groups_per_s: float
    out_path: Path
    created: float
    pid: int | None = None

    @property
    def running(self) -> bool:
        return self.pid is not None


def describe(out: Path) -> RunLine:
    """How the run writing (or that wrote) ``out`` is doing."""
    run_file, checkpoint = sidecars(out)
    run, saved = _read(run_file), _read(checkpoint)
    created = float(run.get("created", 0.0))
    info: RunInfo | None = ask_status(socket_path(out))
    if info is not None:
        return RunLine(info.state.value, info.groups_done, info.groups_total, info.groups_per_s, out, created, info.pid)
    done, total = int(saved.get("groups", 0)), int(run.get("config", {}).get("steps", 0))
    elapsed = float(saved.get("elapsed_s", 0.0))
    state = saved.get("state")
    if state == "finished" and done < total:
        state = "stopped"
    return RunLine(state or KILLED, done, total, done / elapsed if elapsed > 0 else 0.0, out, created)


def all_runs() -> list[RunLine]:
    """Newest first."""
    return sorted((describe(out) for out in known_runs()), key=lambda r: r.created, reverse=True)


def find_running(target: Path | None) -> RunLine:
    """The run ``target`` names (a run folder or its jsonl), or the newest running one; it must be running."""
    if target is None:
        running = [r for r in all_runs() if r.running]
        if not running:
            raise UserError("no vftui run is running (vftui runs lists them all)")
        return running[0]
    line = describe(find_resumable(target.expanduser().resolve(), asked_by="vftui attach"))
    if not line.running:
        raise UserError(f"the run at {line.out_path} is not running ({line.state}); "
                        f"vftui view {line.out_path} shows what it collected")
    return line


def run_runs() -> int:
    lines = all_runs()
    if not lines:
        say("no runs yet (vftui run starts one)", sys.stdout)
        return 0
    say(f"{'STATE':<12}{'GROUPS':>16}  {'RATE':>9}  PATH", sys.stdout)
    for r in lines:
        rate = f"{r.groups_per_s:.2f} g/s" if r.groups_per_s else "-"
        say(f"{r.state:<12}{f'{r.groups_done}/{r.groups_total}':>16}  {rate:>9}  {r.out_path}", sys.stdout)
    return 0


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
