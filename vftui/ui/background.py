"""Work off the app's thread that the app's exit never waits for.

Textual's thread workers run on asyncio's default executor, which ``asyncio.run`` joins as the app
closes: a quit would wait for whatever they still do (importing transformers for a tokenizer, asking
thousands of runs), seconds on a loaded machine. A daemon thread is left behind at exit instead; what
it made comes back as a message, unless the app closed meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from textual.message import Message
from textual.message_pump import MessagePump


def in_background(to: MessagePump, work: Callable[[], Message], name: str) -> threading.Thread:
    """Run ``work`` in a daemon thread and post the message it returns to ``to``; the thread, for
    work that must be waited for at the end."""

    def run() -> None:
        message = work()
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile: its loop is gone
            to.post_message(message)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
