"""The run's one subscriber list: every event of a run goes through ``Bus.emit``.

The parts of a run join as they are built (the view before the preparation's first step, the drop log
once the output is open, health and the socket once prepared), each into its place in ``ORDER``, the one
place where the order is said:

- ``drops`` first: a drop is in its log before any other part hears of it, and before ``emit`` returns to
  the env, which checkpoints next (the checkpoint never claims a drop its log lacks);
- ``socket`` last: it folds the run's tally with its replay under its own lock, so a dashboard attaching
  between two groups counts each once.
"""

from __future__ import annotations

from collections.abc import Callable

from vftui.events import Event, GroupCollected
from vftui.text.redact import scrub_event

Subscriber = Callable[[Event], None]

ORDER = ("drops", "eval gate", "mode", "health", "view", "socket")


class Bus:
    """Scrubs the endpoint's key from each event once, then hands it to each subscriber in ``ORDER``."""

    def __init__(self) -> None:
        self.key = ""  # the endpoint's, once prepare found it
        self._joined: dict[str, Subscriber] = {}
        self._subscribers: tuple[Subscriber, ...] = ()

    def subscribe(self, place: str, subscriber: Subscriber) -> None:
        if place not in ORDER or place in self._joined:
            raise ValueError(f"no free place {place!r} on the bus")
        self._joined[place] = subscriber
        self._subscribers = tuple(self._joined[p] for p in ORDER if p in self._joined)

    def emit(self, event: Event) -> None:
        """From any thread: each subscriber keeps its own state safe (health and the socket lock theirs)."""
        if not isinstance(
            event, GroupCollected
        ):  # a group's messages are training data, kept exact
            event = scrub_event(event, self.key)
        for subscriber in self._subscribers:
            subscriber(event)
