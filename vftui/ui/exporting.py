"""The dashboard's ``x`` (export) and, for a viewed file, ``d`` (dump): the groups the filter shows,
written by ``run_files.export``, the code ``vftui export`` runs, in a thread the quit never waits for."""

from __future__ import annotations

import time
from pathlib import Path

from textual.message import Message
from textual.message_pump import MessagePump
from textual.notifications import SeverityLevel

from vftui.errors import UserError
from vftui.figures.group_filter import parse_filter
from vftui.run_files import export
from vftui.run_files.export import Selection
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
    return Path.cwd() / f"{stem}-{stamp}{suffix}"


def read_out(text: str) -> Path:
    """The prompt's answer as a new dataset's path; a ValueError says what is wrong with it."""
    out = Path(text.strip()).expanduser()
    if out.suffix not in FORMAT_OF:
        raise ValueError("name a .parquet (prime-rl's SFT data) or a .jsonl (TRL's messages)")
    if out.exists() or out.is_symlink():
        raise ValueError(f"{one_line(str(out))} exists: name a new file")
    if not out.parent.is_dir():
        raise ValueError(f"{one_line(str(out.parent))}: no such folder")
    return out.resolve()


def start(to: MessagePump, source: Path, out: Path, fmt: str, where: str) -> None:
    """Export the groups of ``source`` that ``where`` shows (all, without it); ``to`` gets ``Exported``."""

    def work() -> Exported:
        chosen = Selection(parse_filter(where) if where.strip() else None)
        try:
            tally = export.export([source], out, fmt, chosen, force=False)
        except export.NothingKept as e:
            return Exported([str(e)], "warning")
        except (UserError, OSError) as e:
            return Exported([f"nothing written: {e}"], "error")
        return Exported(export.summary(out, fmt, tally), "information")

    in_background(to, work, "export")
