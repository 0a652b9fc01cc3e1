"""A reward function that never returns fails its group instead of hanging the run, and a second stop ends it.

Scoring is given ``--score-timeout`` seconds. One that awaits for ever is cancelled then. One
that blocks (synchronous code that never yields, so the event loop and everything on it wait
with it) is interrupted: a watchdog thread notices the loop has not run for that long and
signals the main thread, whose handler raises ``ScoringTimeout`` inside the blocked reward
function, only when the code running is scoring. Code that ignores signals (a C extension
stuck in a loop) cannot be interrupted: after twice the limit the process ends, its files
holding whole lines, with one sentence, so every stop path ends in bounded time.

A second stop (``force_stop``, from any thread) interrupts blocked reward code at once, with
``CancelledError``, as the cancel of the groups in flight would; and a process that exists for
the run alone (``may_end_process``) ends ``FORCED_STOP_S`` later if the run has not ended by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

from vftui.errors import EXIT_FAILED, EXIT_INTERRUPTED
from vftui.run_controls import FORCED_STOP_S

BEAT_S = 0.25  # how often the loop says it is alive
INTERRUPT = signal.SIGUSR1


class ScoringTimeout(TimeoutError):
    """Raised in a reward function that did not return in time."""


class ScoringLimit:
    def __init__(self) -> None:
        self.limit_s = 120.0
        self._scoring: set[asyncio.Task] = set()
        self._beat = time.monotonic()
        self._answered = False
        self._stopped = threading.Event()  # the run is over: no watchdog, no deadline
        self._main: int | None = None  # the main thread, while the handler is ours
        self._forced = False
        # the loop of the run watched now or last: a second stop refuses reward code there alone (the run's own
        # tasks that outlive it), never on a loop of the process's later work
        self._loop: asyncio.AbstractEventLoop | None = None
        self._say: Callable[[str], None] | None = None

    @contextlib.contextmanager
    def may_end_process(self, say: Callable[[str], None]) -> Iterator[None]:
        """Around a run in a process that exists for it (the CLI's, the dashboard's collector): a second stop
        the run does not obey in time ends the process, and ``say`` tells the user why."""
        self._say = say
        try:
            yield
        finally:
            self._say = None

    def force_stop(self) -> None:
        """The second stop, from any thread: blocked reward code is interrupted now; a process of the run's
        own ends ``FORCED_STOP_S`` from now unless the run has ended by then, whatever that code does."""
        if self._forced:
            return
        self._forced = True
        self._interrupt()
        if self._say is not None:
            threading.Thread(
                target=self._end_unless_over, name="vftui-forced-stop", daemon=True
            ).start()

    def _interrupt(self) -> None:
        main = self._main
        if main is not None:
            signal.pthread_kill(main, INTERRUPT)

    def _end_unless_over(self) -> None:
        if not self._stopped.wait(FORCED_STOP_S):
            self._end_process(
                f"the run did not end within {FORCED_STOP_S:g} s of the second stop (reward code "
                "holds it); it ends now",
                EXIT_INTERRUPTED,
            )

    def _end_process(self, why: str, code: int) -> None:
        """The last resort: the jsonl holds whole lines (each is one write), so the run can be resumed."""
        sentence = f"vftui: {why} (its file holds whole lines: --resume it)"
        say = self._say or _to_stderr
        with contextlib.suppress(Exception):  # nothing may keep the process from ending
            say(sentence)
        os._exit(code)

    @contextlib.asynccontextmanager
    async def scoring(self, what: str) -> AsyncIterator[None]:
        """Around one call of reward code (``what`` names it in the failure)."""
        if self._forced and asyncio.get_running_loop() is self._loop:
            # a second stop: no reward code of that run starts any more (one that blocks would hold the cancel)
            raise asyncio.CancelledError("the run was stopped twice")
        task = asyncio.current_task()
        assert task is not None
        self._scoring.add(task)
        try:
            async with asyncio.timeout(self.limit_s):
                yield
        except TimeoutError as e:
            raise ScoringTimeout(
                f"{what} did not return within {self.limit_s:g} s (--score-timeout)"
            ) from e
        finally:
            self._scoring.discard(task)

    async def watch(self) -> None:
        """For the run's life, on its main thread: the heartbeat, the handler and the watchdog."""
        main = threading.main_thread().ident
        previous = signal.signal(INTERRUPT, self._interrupted)
        self._stopped.clear()
        self._forced, self._main, self._loop = False, main, asyncio.get_running_loop()
        watchdog = threading.Thread(
            target=self._watchdog, args=(main,), name="vftui-scoring-watchdog", daemon=True
        )
        watchdog.start()
        try:
            while True:
                self._beat = time.monotonic()
                await asyncio.sleep(BEAT_S)
        finally:
            self._main = None
            self._stopped.set()
            signal.signal(INTERRUPT, previous)

    def _interrupted(self, signum: int, frame: object) -> None:
        """On the main thread, between two bytecodes of whatever blocks it: only scoring is interrupted."""
        self._answered = (
            True  # signals get through: whatever blocks can be interrupted, or is not ours to
        )
        self._beat = time.monotonic()  # the next blocking reward gets its own full limit
        with contextlib.suppress(RuntimeError):  # no running loop: not scoring
            if asyncio.current_task() in self._scoring:
                if self._forced:
                    raise asyncio.CancelledError("the run was stopped twice")
                raise ScoringTimeout(
                    f"reward code blocked the run for over {self.limit_s:g} s (--score-timeout)"
                )

    def _watchdog(self, main: int | None) -> None:
        sent_at: float | None = None
        while not self._stopped.wait(BEAT_S):
            now = time.monotonic()
            if self._forced and now - self._beat > 2 * BEAT_S and self._scoring:
                self._interrupt()  # each reward that blocks the loop before it runs the cancel
                continue
            if now - self._beat <= self.limit_s or not self._scoring or main is None:
                sent_at = None
                continue
            if sent_at is None or self._answered:
                self._answered, sent_at = False, now
                signal.pthread_kill(main, INTERRUPT)
            elif (
                now - sent_at > self.limit_s
            ):  # signalled, never answered: code that ignores signals
                self._end_process(
                    f"reward code has blocked the run for {now - self._beat:.0f} s and cannot be "
                    "interrupted; the run ends now",
                    EXIT_FAILED,
                )


def _to_stderr(line: str) -> None:
    """The process's own stderr, even where ``sys.stderr`` was replaced (none at all: nothing said)."""
    if sys.__stderr__ is not None:
        sys.__stderr__.write(line + "\n")


limit = ScoringLimit()  # the collector process's one run sets ``limit_s`` and runs ``watch``
