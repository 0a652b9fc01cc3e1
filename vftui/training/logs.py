"""A prime-rl run's logs: its WARNING and ERROR lines, with file and time, as they are written.

prime-rl logs with loguru as ``HH:mm:ss  LEVEL  message`` (``utils/logger.py``; colored, so ANSI
codes are stripped) under ``logs/attempt_<n>/``, ``logs/latest`` linking the current attempt: a
new attempt (a restart) is followed to, and said. The first read of a log takes its last part only.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from vftui.training.layout import LOGS
from vftui.training.tail import FileTail

MAX_LINE = 256 * 1024
FIRST_READ = 1024**2  # of a log already long when first read: its last MB
KEPT = 200  # warning and error lines kept
MAX_FILES = 64
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LINE = re.compile(r"(\d\d:\d\d:\d\d)\s+(DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s+(.*)")
SERIOUS = ("WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class LogLine:
    file: str  # relative to logs/latest
    time: str  # HH:MM:SS as the log says it
    level: str
    message: str


def parse(raw: bytes, file: str) -> LogLine | None:
    text = ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip("\r")
    match = LINE.match(text.strip())
    if match is None:
        return None
    return LogLine(file, match.group(1), match.group(2), match.group(3).strip())


class LogsReader:
    """The serious lines of every log of the current attempt; ``counts`` by level since it began."""

    def __init__(self, run: Path) -> None:
        self.root = run / LOGS
        self.attempt: str | None = None
        self.restarts: list[str] = []  # attempts that began while followed
        self.lines: collections.deque[LogLine] = collections.deque(maxlen=KEPT)
        self.counts: collections.Counter[str] = collections.Counter()
        self._tails: dict[Path, FileTail] = {}

    def read(self) -> list[LogLine]:
        """The serious lines written since the last read."""
        attempt = _attempt(self.root)
        if attempt != self.attempt:
            if self.attempt is not None and attempt is not None:
                self.restarts.append(attempt)
                self.counts.clear()
            self.attempt, self._tails = attempt, {}
        found: list[LogLine] = []
        for path in self._files():
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = FileTail(path, MAX_LINE)
                size = tail.size() or 0
                if size > FIRST_READ:
                    tail.start_at(size - FIRST_READ)
            lines = tail.read()
            if lines.restarted:
                self.counts.clear()
            name = str(path.relative_to(self.root))
            for raw in lines.lines:
                line = parse(raw, name)
                if line is not None and line.level in SERIOUS:
                    self.counts[line.level] += 1
                    found.append(line)
        self.lines.extend(found)
        return found

    def _files(self) -> list[Path]:
        found: list[Path] = []
        with contextlib.suppress(OSError):
            for folder, dirs, files in os.walk(self.root):  # links inside are not followed
                dirs.sort()
                found += [Path(folder, f) for f in sorted(files) if f.endswith(".log")]
                if len(found) >= MAX_FILES:
                    break
        return found[:MAX_FILES]


def _attempt(root: Path) -> str | None:
    """The attempt ``logs/latest`` names (``attempt_3``), or None without one."""
    try:
        return os.readlink(root)
    except OSError:
        return root.name if root.is_dir() else None
