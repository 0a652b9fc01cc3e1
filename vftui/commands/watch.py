"""``vftui watch``: poll a trajectory API and show it, in the terminal app or as lines.

Only the API's read-only endpoints are asked (``/status``, ``/info``): a monitor that
registered or pulled a batch would take groups meant for the trainer. Beside the API's
figures it shows what each live run of ours that sends to it sees (its share, its queued
groups, the workers atroposlib allows it, its off-policy lag), asked on the runs' control
sockets. Headless (``--no-ui``), one status line per poll on stdout; ``--count`` stops after
that many polls (for scripts), otherwise it runs until interrupted.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import httpx

from vftui.events import ApiStatus, EnvShare
from vftui.live.client import ask_status
from vftui.live.server import RunInfo
from vftui.loopback import unproxied
from vftui.run_files import index
from vftui.run_files.files import RunFiles
from vftui.text import wording
from vftui.text.printable import say
from vftui.ui.terminal import has_screen


def poll(client: httpx.Client, api_url: str) -> ApiStatus:
    """What a trainer and the envs see of the API right now, from its read-only endpoints; never raises."""
    api_url = api_url.rstrip("/")
    try:
        status = client.get(f"{api_url}/status").json()
        info = client.get(f"{api_url}/info").json()
    except (httpx.HTTPError, ValueError) as e:
        return ApiStatus(api_url, reachable=False, error=f"{type(e).__name__}: {e}".strip(": "))
    return ApiStatus(
        api_url,
        reachable=True,
        trainer_registered=info.get("batch_size", -1) != -1,
        batch_size=int(info.get("batch_size", -1)),
        current_step=int(status.get("current_step", 0)),
        queue_size=int(status.get("queue_size", 0)),
        envs=our_runs_sending_to(api_url),
    )


def our_runs_sending_to(api_url: str) -> tuple[EnvShare, ...]:
    """Each live run of this user's that sends to ``api_url``, as it sees the API: the API itself
    has no read-only list of its envs (``/status-env`` fails loudly on an id it does not know)."""
    shares = []
    for out in index.known_runs():
        path = RunFiles(out).socket
        info = ask_status(path) if path.exists() else None
        api = info.api if isinstance(info, RunInfo) else None
        if api is not None and api.api_url.rstrip("/") == api_url:
            shares.append(
                EnvShare(
                    str(out),
                    api.env_id,
                    api.env_weight or 0.0,
                    api.self_queue_size,
                    api.workers,
                    api.workers_allowed,
                    api.lag,
                )
            )
    return tuple(shares)


def watch(
    api_url: str, emit: Callable[[ApiStatus], None], stop: threading.Event, every_s: float = 2.0
) -> None:
    """Poll until ``stop`` is set, emitting each snapshot (``vftui watch``)."""
    with httpx.Client(timeout=max(1.0, every_s), **unproxied(api_url)) as client:
        while not stop.is_set():
            emit(poll(client, api_url))
            stop.wait(every_s)


def status_lines(status: ApiStatus) -> list[str]:
    """A poll's line, and one for each env sending to the API."""
    stamp = time.strftime("%H:%M:%S", time.localtime(status.polled_at))
    if not status.reachable:
        return [f"{stamp} {status.api_url} unreachable: {status.error}"]
    return [
        f"{stamp} {status.api_url} {wording.trainer_state(status)} · step {status.current_step} · "
        f"queue {status.queue_size} groups",
        *(f"  {wording.env_share(e)}" for e in status.envs),
    ]


def watch_headless(api_url: str, every_s: float, count: int | None) -> int:
    stop = threading.Event()
    polls = 0

    def emit(status: ApiStatus) -> None:
        nonlocal polls
        say(status_lines(status), sys.stdout)
        polls += 1
        if count is not None and polls >= count:
            stop.set()

    watch(api_url, emit, stop, every_s)
    return 0


def watch_dashboard(api_url: str, every_s: float, theme: str | None) -> int:
    from vftui.ui import themes
    from vftui.ui.inbox import Inbox
    from vftui.ui.watch_app import WatchApp

    inbox = Inbox()
    stop = threading.Event()
    poller = threading.Thread(target=watch, args=(api_url, inbox.put, stop, every_s), daemon=True)
    ours = themes.available_themes()
    app = WatchApp(inbox, api_url, themes.resolve(theme, ours=ours), ours)
    poller.start()
    try:
        app.run()
    finally:
        stop.set()
    return 0


def run_watch(
    api_url: str, every_s: float, no_ui: bool, count: int | None, theme: str | None
) -> int:
    api_url = api_url.rstrip("/")
    if no_ui or not has_screen():
        return watch_headless(api_url, every_s, count)
    return watch_dashboard(api_url, every_s, theme)
