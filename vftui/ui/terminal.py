"""Whether a screen can be shown here: a terminal on stdin and stdout, or a browser tab that
``vftui serve`` (textual-serve) started this process for, whose stdin and stdout are its pipes."""

from __future__ import annotations

import os
import signal
import sys
import termios

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what textual-serve sets TEXTUAL_DRIVER to


def in_browser() -> bool:
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER


def has_screen() -> bool:
    return in_browser() or (sys.stdout.isatty() and sys.stdin.isatty())


def answers(fd: int) -> bool:
    """Whether the terminal on ``fd`` is still there: one that hung up (a dropped SSH session, a killed
    tmux) answers every call with EIO, though ``isatty`` still says yes."""
    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        return False
    return True


def hung_up() -> bool:
    """The terminal this command's screens are drawn on went away (a browser tab's pipes are none)."""
    return not in_browser() and not answers(sys.stdin.fileno())


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with_parent() -> None:
    """A tab's session ends with the ``vftui serve`` that started it, however that ends (``kill -9``
    included): nobody could ever see or close it again. Linux only; elsewhere, when its page closes."""
    parent = os.getppid()
    if sys.platform != "linux":
        return
    import ctypes  # a served session's alone: every command's start imports this module

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the call above
        os._exit(1)
