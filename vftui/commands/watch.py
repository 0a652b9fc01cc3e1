"""``vftui watch``: poll a trajectory API and show it, in the terminal app or as lines.

Headless (``--no-ui``), one status line per poll on stdout; ``--count`` stops after that
many polls (for scripts), otherwise it runs until interrupted.
"""

from __future__ import annotations

import sys
import threading
import time

from vftui import wording
from vftui.collector import trajectory_api
from vftui.events import ApiStatus
from vftui.printable import printable


def status_line(status: ApiStatus) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(status.polled_at))
    if not status.reachable:
        return f"{stamp} {status.api_url} unreachable: {status.error}"
    envs = "".join(f"\n  {wording.env_share(e)}" for e in status.envs)
    return (f"{stamp} {status.api_url} {wording.trainer_state(status)} · step {status.current_step} · "
            f"queue {status.queue_size} groups{envs}")


def watch_headless(api_url: str, every_s: float, count: int | None) -> int:
    stop = threading.Event()
    polls = 0

    def emit(status: ApiStatus) -> None:
        nonlocal polls
        print(printable(status_line(status)), flush=True)
        polls += 1
        if count is not None and polls >= count:
            stop.set()

    trajectory_api.watch(api_url, emit, stop, every_s)
    return 0


def watch_dashboard(api_url: str, every_s: float, theme: str | None) -> int:
    from vftui.ui import themes
    from vftui.ui.inbox import Inbox
    from vftui.ui.watch_app import WatchApp

    inbox = Inbox()
    stop = threading.Event()
    poller = threading.Thread(target=trajectory_api.watch, args=(api_url, inbox.put, stop, every_s), daemon=True)
    ours = themes.available_themes()
    app = WatchApp(inbox, api_url, themes.resolve(theme, ours=ours), ours)
    poller.start()
    try:
        app.run()
    finally:
        stop.set()
    return 0


def run_watch(api_url: str, every_s: float, no_ui: bool, count: int | None, theme: str | None) -> int:
    api_url = api_url.rstrip("/")
    if no_ui or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return watch_headless(api_url, every_s, count)
    return watch_dashboard(api_url, every_s, theme)
