"""vftui started again as a child process (``run --detach``, rl's sim trainer), the same from any folder."""

from __future__ import annotations

import sys


def vftui_command(*args: str) -> list[str]:
    """``python -P -m vftui ARGS``: ``-P`` keeps the working folder off ``sys.path``, so a folder named
    ``vftui`` there (a clone's parent) is never imported in place of the installed package."""
    return [sys.executable, "-P", "-m", "vftui", *args]
