"""What a dashboard shows, and what quitting it does: a run it started, a run it attached to, or a file.

The app asks its feed instead of telling the three apart itself: where events come
from (``inbox``, fed by ``execute`` in the app's worker), what the keys steer
(``controls``; None for a file), what ``q`` asks while the run goes on, and whether a
signal or the app's end stops the run or leaves it running.
"""

from __future__ import annotations

import threading
from typing import Any

from vftui.events import RunSummary
from vftui.live.client import AttachedRun
from vftui.live.process import CollectorProcess
from vftui.run_controls import RunControls
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.prime_rl import Live
from vftui.ui.inbox import Inbox
from vftui.ui.screens.confirm import Answer

STOP_OR_NOT: tuple[Answer, ...] = (("y,enter", "yes", "stop"), ("n", "no", None))
STOP_OR_LEAVE: tuple[Answer, ...] = (
    ("s", "stop the run", "stop"),
    ("l", "leave it running", "leave"),
    ("escape", "cancel", None),
)


class Feed:
    """A file: nothing to steer or stop; ``q`` closes at once."""

    controls: RunControls | None = None
    rows: GroupFile | None = None
    quit_question: tuple[str, tuple[Answer, ...]] | None = None
    """Asked when ``q`` is pressed while the run goes on; its answers are "stop", "leave" or None."""
    leaves_run = False
    """The run goes on without this dashboard: a signal leaves it running, and so does the app's end."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    def execute(self, closed: threading.Event) -> RunSummary | None:
        """The app's worker: feeds ``inbox`` until the run's summary; ``closed`` is set as the app ends."""
        raise NotImplementedError


class ViewedFile(Feed):
    """A groups file, read by a background pass (``groupfile``); with ``follow``, until the app closes."""

    rows: GroupFile  # always a file's

    def __init__(
        self,
        inbox: Inbox,
        rows: GroupFile,
        sim_tokenizer: str,
        tokenizer: str = "",
        follow: bool = False,
        mirror: Live | None = None,
    ) -> None:
        super().__init__(inbox)
        self.rows = rows
        self._read: dict[str, Any] = {"sim_tokenizer": sim_tokenizer, "tokenizer": tokenizer}
        self._follow = follow
        self._mirror = (
            mirror  # a followed prime-rl run, mirrored into ``rows``' file until the app closes
        )

    def execute(self, closed: threading.Event) -> RunSummary:
        if self._mirror is not None:
            threading.Thread(
                target=self._mirror.follow, args=(closed,), name="prime-rl mirror", daemon=True
            ).start()
        return self.rows.read(
            self.inbox.put, follow_until=closed if self._follow else None, **self._read
        )


class StartedRun(Feed):
    """The run this dashboard started, in a child process: quitting (after asking) or a signal stops it."""

    quit_question = ("The run is still collecting. Stop it and quit?", STOP_OR_NOT)

    def __init__(self, inbox: Inbox, process: CollectorProcess) -> None:
        super().__init__(inbox)
        self.process = process
        self.controls = process.controls

    def execute(self, closed: threading.Event) -> RunSummary | None:
        return self.process.wait_summary()  # None: stopped while it was prepared


class AttachedTo(Feed):
    """A run that lives on its own (``vftui attach``): quitting asks whether to stop it or leave it running."""

    quit_question = (
        "The run is still collecting. Stop it, or quit and leave it running?",
        STOP_OR_LEAVE,
    )
    leaves_run = True

    def __init__(self, inbox: Inbox, attached: AttachedRun) -> None:
        super().__init__(inbox)
        self.attached = attached
        self.controls = attached.controls

    def execute(self, closed: threading.Event) -> RunSummary | None:
        return self.attached.wait_summary(give_up=closed)
