"""A run owns its jsonl for its whole life: a second run, or a resume of a live one, is refused.

The lock is an ``flock`` on a ``.lock`` file beside the jsonl that holds the owner's pid
(so the refusal can name it). It goes away with the process, however that ends, so a
run killed with -9 never leaves its output locked. The file is removed on release; a
process that locked a file just removed checks it still is the one on disk and tries
again, so two runs can never both hold the same path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from vftui import safe_files
from vftui.errors import UserError
from vftui.run_files.files import RunFiles


class RunLock:
    """Held from ``acquire`` until ``release`` (or the process's end)."""

    def __init__(self, files: RunFiles) -> None:
        self.out_path = files.jsonl
        self.path = files.lock_path
        self._fd: int | None = None

    def acquire(self, hint: str) -> RunLock:
        """Take the lock, or a UserError naming the process that holds it (``hint``: what to do)."""
        while True:
            try:  # a link, a FIFO, a folder there: one sentence
                fd = safe_files.open_regular(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as e:
                raise UserError(f"cannot lock {self.path}: {e.strerror}; remove it first") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise self._held(holder, hint) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # removed by its owner's release between our open and our lock
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def refuse_if_held(self, hint: str) -> None:
        """The sentence of ``acquire`` where a live run holds the lock, found without writing the file (a shared
        lock, let go at once); nothing where none does (no lock, a stale one, or something else at its name)."""
        if (holder := self.live_holder()) is not None:
            raise self._held(holder, hint)

    def live_holder(self) -> str | None:
        """The pid of the live run that holds the lock (``unknown`` where it wrote none yet), found as
        ``refuse_if_held`` finds it; None where no run holds it."""
        try:
            fd = safe_files.open_regular(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # let go with the descriptor
        except BlockingIOError:
            return os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        return None

    def _held(self, holder: str, hint: str) -> UserError:
        return UserError(
            f"{self.out_path} is being written by another vftui run (pid {holder}); {hint}"
        )

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


def holder(files: RunFiles) -> int | None:
    """The pid written in the run's lock file by the process holding it."""
    try:
        with safe_files.open_to_read(files.lock_path) as f:
            return int(f.read(32).strip())
    except (OSError, ValueError):
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = path.lstat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)
