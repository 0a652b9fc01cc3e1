"""Text from outside made harmless for a terminal: control characters shown, not obeyed.

A model id, a model's answer, an endpoint's error or a line of a file being viewed can
hold escape sequences: ``ESC ] 0 ;`` sets the terminal's title, ``ESC ] 52 ;`` writes the
clipboard, ``ESC [`` moves the cursor. Neither Rich nor Textual removes ESC, so every such
text passes through ``printable`` on its way to a terminal (the dashboard's model,
headless lines, error sentences). Files and ``--json`` keep the exact text: JSON escapes
control characters itself. A line printed for a person is one line: a newline inside it (in a
path, a ``VFTUI_*`` value, an endpoint's error) is shown as ``␊``, so it cannot forge a line
of its own; a message of several lines is a list of lines (``say``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

from vftui.events import Event

E = TypeVar("E", bound=Event)

# C0 controls (but newline and tab), DEL, C1 controls (CSI is 0x9b), and the bidirectional
# overrides and isolates that make text display in another order than it is read.
CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
UNSAFE, UNSAFE_IN_A_LINE = re.compile(f"[{CONTROLS}]"), re.compile(f"[\n{CONTROLS}]")


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


def one_line(text: str) -> str:
    """``printable``, and a newline shown as ``␊`` too: the text stays on the line it is printed in."""
    return UNSAFE_IN_A_LINE.sub(_visible, text) if UNSAFE_IN_A_LINE.search(text) else text


def say(lines: str | Sequence[str], stream: TextIO) -> None:
    """Print for a person a line (``str``) or several (a list), each ``one_line``; dropped if the terminal is
    gone (SSH hung up)."""
    with contextlib.suppress(OSError):
        print(
            "\n".join(map(one_line, [lines] if isinstance(lines, str) else lines)),
            file=stream,
            flush=True,
        )


def with_texts(event: E, change: Callable[[str], str]) -> E:
    """The event with ``change`` applied to its text fields, the texts of its list fields and
    its dicts' text keys (a group's messages, lists of dicts, are left alone)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        new: object
        if isinstance(value, str):
            new = change(value)
        elif isinstance(value, list) and value and any(isinstance(v, str) for v in value):
            new = [change(v) if isinstance(v, str) else v for v in value]
        elif isinstance(value, dict) and any(isinstance(k, str) for k in value):
            new = {change(k) if isinstance(k, str) else k: v for k, v in value.items()}
        else:
            continue
        if new != value:
            changes[f.name] = new
    return dataclasses.replace(event, **changes) if changes else event


def shortened(text: str, most: int = 120) -> str:
    """``text`` cut to ``most`` characters, an ellipsis its last: a name a sentence shows, however long."""
    return text if len(text) <= most else text[: most - 1] + "…"
