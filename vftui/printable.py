"""Text from outside made harmless for a terminal: control characters shown, not obeyed.

A model id, a model's answer, an endpoint's error or a line of a file being viewed can
hold escape sequences: ``ESC ] 0 ;`` sets the terminal's title, ``ESC ] 52 ;`` writes the
clipboard, ``ESC [`` moves the cursor. Neither Rich nor Textual removes ESC, so every such
text passes through ``printable`` on its way to a terminal (the dashboard's model,
headless lines, error sentences). Files and ``--json`` keep the exact text: JSON escapes
control characters itself.
"""

from __future__ import annotations

import contextlib
import re
from typing import TextIO

# C0 controls (but newline and tab), DEL, C1 controls (CSI is 0x9b), and the bidirectional
# overrides and isolates that make text display in another order than it is read.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode control pictures: ␛ for ESC, ␇ for BEL
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab replaced by a visible sign."""
    return UNSAFE.sub(_visible, text) if UNSAFE.search(text) else text


def say(text: str, stream: TextIO) -> None:
    """Print ``text`` for a person: made printable, and dropped if the terminal is gone (SSH hung up)."""
    with contextlib.suppress(OSError):
        print(printable(text), file=stream, flush=True)
