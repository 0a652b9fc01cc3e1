"""The views cache: other tools' files made again in the groups form (vf-eval results, verifiers v1
traces, prime-rl rollouts), one file per version of each, under ``paths.cache_dir()/views``.

A view of a big eval leaves tens of MB behind and nothing read them again once the source changed,
so each new one prunes the folder: what nobody opened for a week goes, and past ``MAX_BYTES`` the
least recently opened goes too, but never one opened within the last hour (a view may still read it).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from vftui import paths
from vftui.run_files.files import RunFiles

FORM = "5"
"""The groups form the cache holds: a new one is made again, never read from an old cache (5: a
v1 trace's tool schemas kept)."""
MAX_BYTES = 1024**3
UNUSED_S = 7 * 24 * 3600.0
IN_USE_S = 3600.0


def folder() -> Path:
    made = paths.cache_dir() / "views"
    made.mkdir(parents=True, exist_ok=True)
    return made


def reuse(path: Path) -> bool:
    """Whether ``path`` is made already; if so, it and its drop log are marked as just opened (pruning
    goes by that)."""
    try:
        os.utime(path)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.utime(RunFiles(path).drops)
    return True


def made(name: str) -> Path:
    """Where a new view goes; the cache is pruned first."""
    prune()
    return folder() / name


def prune(now: float | None = None, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Delete what the cache can spare (see the module's note); the files deleted."""
    now = time.time() if now is None else now
    entries = []
    for path in folder().iterdir():
        with contextlib.suppress(OSError):
            stat = path.lstat()
            entries.append((stat.st_mtime, stat.st_size, path))
    entries.sort()  # the least recently opened first
    total = sum(size for _, size, _ in entries)
    gone = []
    for opened, size, path in entries:
        idle = now - opened
        if idle < IN_USE_S or (idle < UNUSED_S and total <= max_bytes):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
            gone.append(path)
    return gone
