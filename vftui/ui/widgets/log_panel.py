"""The collector's log records and status changes, newest at the bottom."""

from __future__ import annotations

import time

from rich.text import Text
from textual import events
from textual.widgets import RichLog

from vftui.ui.model import LOG_LINES, DashboardModel

LEVEL_STYLE = {
    "ERROR": "bold red",
    "CRITICAL": "bold red",
    "WARNING": "yellow",
    "INFO": "",
    "DEBUG": "dim",
}


class LogPanel(RichLog):
    """Writes only the records added since the last ``show`` (the model counts them)."""

    BORDER_TITLE = "log"

    shown = 0
    _model: DashboardModel | None = None

    def __init__(self, *, id: str | None = None) -> None:
        # RichLog lays lines out at least 78 wide, cutting them in a narrower panel: wrap at the panel's width.
        # It keeps every line written unless told: as many as the records the model keeps, so a long run's
        # drops and alerts do not grow the dashboard.
        super().__init__(id=id, wrap=True, markup=False, min_width=1, max_lines=LOG_LINES)

    def show(self, model: DashboardModel) -> None:
        self._model = model
        fresh = min(model.logs_total - self.shown, len(model.logs))
        for record in list(model.logs)[len(model.logs) - fresh :] if fresh > 0 else []:
            stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
            self.write(
                Text(f"{stamp} ", style="dim").append(
                    record.message, style=LEVEL_STYLE.get(record.level, "")
                )
            )
        self.shown = model.logs_total

    def on_resize(self, event: events.Resize) -> None:
        """RichLog wraps a line as it is written: the kept records are written again at the new width."""
        if self._model is not None:
            self.clear()
            self.shown = self._model.logs_total - len(self._model.logs)
            self.show(self._model)
