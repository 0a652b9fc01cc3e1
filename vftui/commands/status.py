"""``vftui status RUN_DIR``: one check-in of a prime-rl run, without a screen, for a person, cron or CI.

Exit 0 healthy, 3 degraded or down, 2 bad input. ``--append FILE`` appends the entry (never
rewrites); ``--notify CMD`` runs CMD (or POSTs to an http(s) URL) when the health differs from
the last check-in's: the one ``--append``'s file ends with, else the one this command last saw of
the run (kept in vftui's data folder).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from vftui import paths, safe_files
from vftui.errors import UserError
from vftui.loopback import unproxied
from vftui.text.printable import one_line, say
from vftui.training import check_in
from vftui.training.follow import Follower, Snapshot
from vftui.training.health import HEALTHY
from vftui.training.layout import find

DEGRADED_EXIT = 3
NOTIFY_TIMEOUT_S = 30.0
TAIL_BYTES = 64 * 1024  # of an --append file: where its last entry's health is


def run_status(
    target: Path,
    as_json: bool,
    append: Path | None,
    notify: str | None,
    inference: list[str],
) -> int:
    run = find(target)
    if append is not None:
        append = safe_files.given_file(append, "--append")
    follower = Follower(run, inference)
    follower.poll(until_end=True)
    snap = follower.snapshot()
    text = check_in.entry(snap)
    before = _previous(append, run.path)
    if append is not None:
        _append(append, text)
    _remember(run.path, snap.verdict.word)
    if as_json:
        print(json.dumps(check_in.as_json(snap), indent=2))
    else:
        say(text.rstrip("\n").split("\n"), sys.stdout)
    if notify and before is not None and before != snap.verdict.word:
        notify_command(notify, snap, before)
    return 0 if snap.verdict.word == HEALTHY else DEGRADED_EXIT


def _append(path: Path, text: str) -> None:
    try:
        fd = safe_files.open_append(path)
    except OSError as e:
        raise UserError(
            f"--append {one_line(str(path))}: cannot write it ({e.strerror or e})"
        ) from None
    try:
        size = os.fstat(fd).st_size
        os.write(fd, (("\n" if size else "") + text).encode())
    finally:
        os.close(fd)


def _state_file(run: Path) -> Path:
    key = hashlib.sha256(str(run).encode()).hexdigest()[:16]
    return paths.data_dir() / "status" / f"{key}.json"


def _previous(append: Path | None, run: Path) -> str | None:
    """The health of the last check-in: the --append file's last entry, else this command's last word."""
    if append is not None and append.exists():
        with contextlib.suppress(OSError), safe_files.open_to_read(append) as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            return check_in.last_health(f.read().decode("utf-8", errors="replace"))
    with contextlib.suppress(OSError, ValueError):
        said = json.loads(_state_file(run).read_text())
        return said.get("health") if isinstance(said, dict) else None
    return None


def _remember(run: Path, word: str) -> None:
    path = _state_file(run)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        safe_files.replace(
            path, json.dumps({"run": str(run), "health": word, "at": time.time()}).encode()
        )


def notify_command(command: str, snap: Snapshot, before: str) -> None:
    """Run ``command`` through the shell with the change in its environment, or POST it to a URL."""
    body = check_in.as_json(snap) | {"previous_health": before}
    if command.startswith(("http://", "https://")):
        try:
            with httpx.Client(timeout=NOTIFY_TIMEOUT_S, **unproxied(command)) as client:
                client.post(command, json=body).raise_for_status()
        except httpx.HTTPStatusError as e:
            say(
                f"vftui: --notify {_shown(command)}: it answered {e.response.status_code}",
                sys.stderr,
            )
        except (httpx.HTTPError, httpx.InvalidURL) as e:  # its words name no secret: no URL in them
            why = str(e) if isinstance(e, httpx.TransportError) and str(e) else type(e).__name__
            say(f"vftui: --notify {_shown(command)}: {one_line(why)}", sys.stderr)
        return
    env = os.environ | {
        "VFTUI_HEALTH": snap.verdict.word,
        "VFTUI_PREVIOUS_HEALTH": before,
        "VFTUI_RUN": str(snap.run.path),
        "VFTUI_STEP": str(snap.overview.step if snap.overview.step is not None else ""),
        "VFTUI_ALERTS": "; ".join(a.sentence for a in snap.verdict.alerts if a.level != "note"),
    }
    # stdout is --json's: what the command prints goes to stderr. A session of its own, so that a
    # command over its time is stopped with everything it started, not just its shell.
    process = subprocess.Popen(command, shell=True, env=env, stdout=2, start_new_session=True)
    try:
        code = process.wait(timeout=NOTIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        say(
            f"vftui: --notify: the command ran over {NOTIFY_TIMEOUT_S:.0f} s and was stopped",
            sys.stderr,
        )
        return
    if code:
        say(f"vftui: --notify: the command exited {code}", sys.stderr)


def _shown(url: str) -> str:
    """A webhook's URL without what may be its secret: a user and password, the query."""
    try:
        return str(httpx.URL(url).copy_with(userinfo=b"", query=None, fragment=None))
    except httpx.InvalidURL:
        return "the URL"
