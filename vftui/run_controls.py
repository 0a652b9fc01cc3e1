"""What a view may do to a running collector: the other half of the contract beside ``events``.

Stdlib only: the control socket and the dashboard's pipe (``live/``) allow exactly this protocol's members.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

MIN_TEMPERATURE, MAX_TEMPERATURE = 0.0, 2.0


def checked_temperature(value: float) -> float:
    """``value`` as a sampling temperature, rounded; outside the range a ValueError says so."""
    value = round(float(value), 4)
    if not MIN_TEMPERATURE <= value <= MAX_TEMPERATURE:
        raise ValueError(
            f"the temperature must be between {MIN_TEMPERATURE:g} and {MAX_TEMPERATURE:g} (got {value:g})"
        )
    return value


FORCED_STOP_S = 1.5
"""A second stop ends the run's process within this (plus a signal's delivery), whatever its reward code does."""


class RunControls(Protocol):
    """What a view may do to a running collector (``vftui.collector.controls.Controls``): every key is one of these.

    ``set_temperature`` refuses a value outside [MIN_TEMPERATURE, MAX_TEMPERATURE]
    (``checked_temperature``); ``nudge_temperature`` clamps to it. Once the run has ended, pause,
    temperature and stop raise ``errors.RunEnded``, whose sentence says why nothing was done.
    """

    @property
    def temperature(self) -> float: ...

    def toggle_pause(self) -> None: ...

    def set_temperature(self, value: float) -> float: ...

    def nudge_temperature(self, delta: float) -> float: ...

    def dump(self, path: Path | None = None, where: str = "") -> Path: ...

    def stop(self) -> None: ...
