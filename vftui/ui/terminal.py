"""Whether a screen can be shown here: a terminal on stdin and stdout, or a browser tab that
``vftui serve`` (textual-serve) started this process for, whose stdin and stdout are its pipes."""

from __future__ import annotations

import os
import sys

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"  # what textual-serve sets TEXTUAL_DRIVER to


def in_browser() -> bool:
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER


def has_screen() -> bool:
    return in_browser() or (sys.stdout.isatty() and sys.stdin.isatty())
