"""Where a run's environment and libraries write: a log file beside the run, never vftui's own output.

An environment's ``print()``, and bytes its code or a subprocess it starts writes to file
descriptors 1 and 2, would reach the terminal raw (escapes and all) and corrupt ``--json`` on
stdout. So a run points both descriptors (and Python's ``sys.stdout``/``sys.stderr``) at a file:
a scratch one while the run is prepared, then ``<run>.collector.log``. vftui's own lines go to
the terminal through copies of the descriptors taken before (``Terminal``).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from vftui import safe_files
from vftui.events import Event, LogRecord
from vftui.run_files.files import RunFiles


@dataclass
class Terminal:
    """vftui's own stdout and stderr, kept aside before the run's output is captured."""

    out: TextIO
    err: TextIO
    _fds: tuple[int, int]
    _streams: tuple[TextIO, TextIO]

    @classmethod
    def keep(cls) -> Terminal:
        fds = (os.dup(1), os.dup(2))
        return cls(
            os.fdopen(fds[0], "w", buffering=1),
            os.fdopen(fds[1], "w", buffering=1),
            fds,
            (sys.stdout, sys.stderr),
        )

    def restore(self) -> None:
        """Descriptors 1 and 2 and Python's streams as they were: a sentence printed after the run reaches
        the terminal."""
        _flush()
        os.dup2(self._fds[0], 1)
        os.dup2(self._fds[1], 2)
        sys.stdout, sys.stderr = self._streams


def capture(file: TextIO) -> TextIO:
    """Point descriptors 1 and 2, Python's stdout/stderr and a crash's traceback at ``file``."""
    _flush()
    os.dup2(file.fileno(), 1)
    os.dup2(file.fileno(), 2)
    sys.stdout = sys.stderr = file
    faulthandler.enable(file)
    return file


def switch_to_log(files: RunFiles, early: TextIO, emit: Callable[[Event], None]) -> Path | None:
    """From now on into the run's log beside its jsonl, with what was said while the run was prepared
    (``early``); a link planted at its name is not followed: the output stays in the scratch file, and the
    run's views are told (``emit``)."""
    path = files.log
    try:
        log = open(safe_files.open_append(path), "a", buffering=1)  # noqa: SIM115 - lives as long as the run
    except OSError as e:
        emit(LogRecord("WARNING", __name__, f"no log written to {path}: {e.strerror}", time.time()))
        return None
    early.seek(0)
    log.write(early.read())
    capture(log)
    return path


def remove_if_empty(path: Path) -> None:
    """The run's log, if nothing reached it (what Python still buffers for it counts)."""
    _flush()
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
