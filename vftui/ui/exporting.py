"""The dashboard's ``x`` (export) and, for a viewed file, ``d`` (dump): the groups the filter shows,
written by ``run_files.export``, the code ``vftui export`` runs, in a thread the quit never waits for."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual.message import Message
from textual.message_pump import MessagePump
from textual.notifications import SeverityLevel

from vftui.errors import UserError
from vftui.figures.group_filter import parse_filter
from vftui.run_files import export
from vftui.run_files.export import Selection
from vftui.run_files.store import unique_path
from vftui.text.printable import one_line
from vftui.ui.background import in_background

FORMAT_OF = {".parquet": "prime-rl", ".jsonl": "messages"}
"""What ``x`` writes, by OUT's suffix: prime-rl's SFT parquet, or TRL's messages jsonl."""


class Exported(Message):
    """An export or a view's dump ended: its summary, or the one sentence why nothing was written."""

    def __init__(self, lines: list[str], severity: SeverityLevel) -> None:
        super().__init__()
        self.lines, self.severity = lines, severity


def default_out(source: Path, suffix: str, now: float) -> Path:
    """A new name in the current folder: the viewed run's may be someone else's, or read-only."""
    stem = source.stem if source.suffix == ".jsonl" else source.name
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return unique_path(Path.cwd() / f"{stem}-{stamp}{suffix}")


def read_out(text: str) -> Path:
    """The prompt's answer as a new dataset's path; a ValueError says what is wrong with it."""
    out = Path(text.strip()).expanduser()
    if out.suffix.lower() not in FORMAT_OF:
        raise ValueError("name a .parquet (prime-rl's SFT data) or a .jsonl (TRL's messages)")
    if out.exists() or out.is_symlink():
        raise ValueError(f"{one_line(str(out))} exists: name a new file")
    if not out.parent.is_dir():
        raise ValueError(f"{one_line(str(out.parent))}: no such folder")
    return out.resolve()


class Running:
    """Exports under way; ``stop_all`` gives them up (nothing half-written stays) when the screen
    that started them closes: a daemon thread would die mid-write at exit, its temporary file left."""

    STOP_WAIT_S = 5.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, to: MessagePump, source: Path, out: Path, fmt: str, where: str) -> None:
        """Export the groups of ``source`` that ``where`` shows (all, without it); ``to`` gets
        ``Exported``."""

        def stopped(tally: export.Tally) -> None:
            if self._stop.is_set():
                raise export.Stopped

        def work() -> Exported:
            chosen = Selection(parse_filter(where) if where.strip() else None)
            try:
                tally = export.export([source], out, fmt, chosen, False, stopped)
            except export.NothingKept as e:
                return Exported([str(e)], "warning")
            except (UserError, OSError, export.Stopped) as e:
                return Exported([f"nothing written: {e}"], "error")
            return Exported(export.summary(out, fmt, tally), "information")

        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(in_background(to, work, "export"))

    def stop_all(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + self.STOP_WAIT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
