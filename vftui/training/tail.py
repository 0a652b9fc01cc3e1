"""New whole lines of a file another process appends to: what a run's metrics and logs are.

Read a bounded piece at a time from where the last read ended; a last line without its newline
waits for it (a torn write is never parsed); a line over the bound is skipped, never held; a file
replaced (another inode) or cut shorter than what was read is read again from its start, and
the reader says so. A FIFO or a device at the name is refused, not blocked on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from vftui import safe_files

READ_BYTES = 32 * 1024**2  # read at most this much a poll: the rest comes next poll


@dataclass
class Lines:
    """One poll's new lines, and what happened on the way."""

    lines: list[bytes] = field(default_factory=list)
    long_lines: int = 0  # lines over the bound, skipped
    restarted: bool = False  # the file was replaced or cut: these lines are from its start
    more: bool = False  # more was there than one poll reads
    error: str = ""  # why the file could not be read this time ("" when it is simply not there yet)


class FileTail:
    """The lines appended to ``path`` since the last ``read``."""

    def __init__(self, path: Path, max_line: int) -> None:
        self.path = path
        self.max_line = max_line
        self.offset = 0
        self._ident: tuple[int, int] | None = None
        self._pending = b""
        self._skipping = False  # inside a line over the bound, or one cut by ``start_at``

    def size(self) -> int | None:
        try:
            return self.path.stat().st_size
        except OSError:
            return None

    def start_at(self, offset: int) -> None:
        """Read from the first whole line at or after ``offset`` (a jump over a file's middle): from the
        byte before it, skipping to its newline, so a line that begins at ``offset`` is read whole."""
        self.offset, self._pending = max(0, offset - 1), b""
        self._skipping = offset > 0

    def read(self, most: int = READ_BYTES) -> Lines:
        found = Lines()
        try:
            f = safe_files.open_to_read(self.path)
        except FileNotFoundError:
            return found
        except OSError as e:
            found.error = e.strerror or str(e)
            return found
        with f:
            stat = os.fstat(f.fileno())
            ident = (stat.st_dev, stat.st_ino)
            if self._ident is not None and (ident != self._ident or stat.st_size < self.offset):
                self.offset, self._pending, self._skipping = 0, b"", False
                found.restarted = True
            self._ident = ident
            f.seek(self.offset)
            data = f.read(max(0, min(most, stat.st_size - self.offset)))
            self.offset += len(data)
            found.more = self.offset < stat.st_size
        self._split(data, found)
        return found

    def _split(self, data: bytes, found: Lines) -> None:
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            line = self._pending + data[start:end]
            self._pending, start = b"", end + 1
            if self._skipping:
                self._skipping = False
            elif len(line) > self.max_line:
                found.long_lines += 1
            else:
                found.lines.append(line)
        if not self._skipping:
            self._pending += data[start:]
            if len(self._pending) > self.max_line:
                self._pending, self._skipping = b"", True
                found.long_lines += 1
