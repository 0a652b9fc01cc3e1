"""Controls: everything a key can do to a run, callable from any thread.

The collector runs on its own asyncio loop; a view (Textual app, signal handler, test) calls
these methods from wherever it lives. Pause and stop hold and close the run's ``GroupGate``,
under its lock, which guards the temperature and the end too. Once the run has ended, pause,
temperature and stop are refused with ``RunEnded`` (every view, in the process or over a
socket, gets the same sentence); a dump still works.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vftui.collector.gate import GroupGate
from vftui.errors import RunEnded
from vftui.events import Event, GroupsDumped, RunState, TemperatureChanged
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE, checked_temperature
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import lines_shown_by
from vftui.run_files.store import GroupWindow
from vftui.text import wording

logger = logging.getLogger(__name__)


class Controls:
    def __init__(
        self,
        gate: GroupGate,
        temperature: float,
        window: GroupWindow,
        files: RunFiles,
        emit: Callable[[Event], None],
        stop_grace_s: float = math.inf,
    ) -> None:
        """``stop_grace_s``: how long a stop waits for the groups in flight before it cancels them."""
        self._gate = gate
        self._lock = gate.lock
        self._temperature = temperature
        self._window = window
        self._files = files
        self._emit = emit
        self._stop_grace_s = stop_grace_s
        self._grace: threading.Timer | None = None
        self._ended = ""  # once the run has ended: "finished", "stopped" or "failed"

    @property
    def temperature(self) -> float:
        return self._temperature

    @property
    def paused(self) -> bool:
        return self._gate.held

    @property
    def stop_requested(self) -> bool:
        return self._gate.stopping

    def pause(self) -> None:
        """No new group starts; groups in flight finish and are kept."""
        with self._lock:
            self._refuse_once_ended("there is nothing to pause")
            announce = self._gate.hold()
        announce()

    def resume(self) -> None:
        with self._lock:
            self._refuse_once_ended("there is nothing to resume")
            announce = self._gate.release()
        announce()

    def toggle_pause(self) -> None:
        self.resume() if self.paused else self.pause()

    def set_temperature(self, value: float) -> float:
        """Applies to groups started from now on; out of range is a ValueError."""
        value = checked_temperature(value)
        with self._lock:
            self._refuse_once_ended("no group will be sampled at another temperature")
            self._temperature = value
        self._emit(TemperatureChanged(value))
        return value

    def nudge_temperature(self, delta: float) -> float:
        """Raise or lower by ``delta``, clamped to the range."""
        target = min(MAX_TEMPERATURE, max(MIN_TEMPERATURE, self._temperature + delta))
        return self.set_temperature(target)

    def dump(self, path: Path | None = None, where: str = "") -> Path:
        """Write the groups in the in-memory window that the filter ``where`` shows (all, without
        one) to a new jsonl; returns its path. A filter that cannot be read is a ValueError."""
        keep = lines_shown_by(where) if where.strip() else None
        if path is None:
            path = self._files.dump_path(time.time())
        written, count, held = self._window.dump(Path(path), keep)
        self._emit(GroupsDumped(str(written), count, held, where.strip()))
        return written

    def stop(self) -> None:
        """Graceful: no new group starts, those in flight finish (given ``stop_grace_s`` at most),
        files are flushed. Twice: cancel them (``GroupGate.force_stop``)."""
        with self._lock:
            self._refuse_once_ended("there is nothing to stop")
            again = self._gate.stopping
            announce = self._gate.close()
            if not again and math.isfinite(self._stop_grace_s):
                self._grace = threading.Timer(self._stop_grace_s, self._grace_over)
                self._grace.daemon = True
                self._grace.start()
        if again:
            self._gate.force_stop()
        else:
            announce()

    def _grace_over(self) -> None:
        """The groups in flight had their time: a stop that waited longer would wait on reward code."""
        with self._lock:
            if self._ended:
                return
        logger.warning(
            "the groups in flight did not finish within %g s of the stop (--score-timeout): "
            "cancelling them (--resume collects them again)",
            self._stop_grace_s,
        )
        with contextlib.suppress(RunEnded):  # it ended meanwhile
            self.stop()

    def _refuse_once_ended(self, why: str) -> None:
        """Under the lock: a run that has ended is not steered."""
        if self._ended:
            raise RunEnded(f"the run has {self._ended}, so {why}")

    def end(self, state: RunState) -> None:
        """The run has ended in ``state``: from now on pause, temperature and stop are refused."""
        with self._lock:
            gate = self._gate
            self._ended = wording.ended_as(state, gate.groups_done, gate.groups_total)
            if self._grace is not None:
                self._grace.cancel()
