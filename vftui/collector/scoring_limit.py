"""A reward function that never returns fails its group instead of hanging the run.

Scoring is given ``--score-timeout`` seconds. One that awaits for ever is cancelled then. One
that blocks (synchronous code that never yields, so the event loop, Ctrl-C's handler and every
control call wait with it) is interrupted: a watchdog thread notices the loop has not run for
that long and signals the main thread, whose handler raises ``ScoringTimeout`` inside the
blocked reward function, only when the code running is scoring. Code that ignores signals
(a C extension stuck in a loop) cannot be interrupted: after twice the limit the process
ends, its files holding whole lines, with one sentence, so every stop path ends in bounded time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator

from vftui.errors import EXIT_FAILED

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
        self._stopped = threading.Event()

    @contextlib.asynccontextmanager
    async def scoring(self, what: str) -> AsyncIterator[None]:
        """Around one call of reward code (``what`` names it in the failure)."""
        task = asyncio.current_task()
        assert task is not None
        self._scoring.add(task)
        try:
            async with asyncio.timeout(self.limit_s):
                yield
        except TimeoutError as e:
            raise ScoringTimeout(f"{what} did not return within {self.limit_s:g} s (--score-timeout)") from e
        finally:
            self._scoring.discard(task)

    async def watch(self) -> None:
        """For the run's life, on its main thread: the heartbeat, the handler and the watchdog."""
        main = threading.main_thread().ident
        previous = signal.signal(INTERRUPT, self._interrupted)
        self._stopped.clear()
        watchdog = threading.Thread(target=self._watchdog, args=(main,), name="vftui-scoring-watchdog", daemon=True)
        watchdog.start()
        try:
            while True:
                self._beat = time.monotonic()
                await asyncio.sleep(BEAT_S)
        finally:
            self._stopped.set()
            signal.signal(INTERRUPT, previous)

    def _interrupted(self, signum: int, frame: object) -> None:
        """On the main thread, between two bytecodes of whatever blocks it: only scoring is interrupted."""
        self._answered = True  # signals get through: whatever blocks can be interrupted, or is not ours to
        self._beat = time.monotonic()  # the next blocking reward gets its own full limit
        with contextlib.suppress(RuntimeError):  # no running loop: not scoring
            if asyncio.current_task() in self._scoring:
                raise ScoringTimeout(f"reward code blocked the run for over {self.limit_s:g} s (--score-timeout)")

    def _watchdog(self, main: int | None) -> None:
        sent_at: float | None = None
        while not self._stopped.wait(BEAT_S):
            now = time.monotonic()
            if now - self._beat <= self.limit_s or not self._scoring or main is None:
                sent_at = None
                continue
            if sent_at is None or self._answered:
                self._answered, sent_at = False, now
                signal.pthread_kill(main, INTERRUPT)
            elif now - sent_at > self.limit_s:  # signalled, never answered: code that ignores signals
                sys.__stderr__.write(f"vftui: reward code has blocked the run for {now - self._beat:.0f} s and "
                                     "cannot be interrupted; the run ends now (its file holds whole lines: --resume "
                                     "it)\n")
                os._exit(EXIT_FAILED)


limit = ScoringLimit()  # the collector process's one run sets ``limit_s`` and runs ``watch``
