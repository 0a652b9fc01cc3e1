"""Events and figures as strict JSON for programs: ``--json`` lines, eval metadata, ``compare --json``."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

from vftui.events import Event
from vftui.text.printable import one_line


class PipedLines:
    """Lines read as a pipe hands them over, in chunks of any size: each whole line that is not blank to
    ``_line`` as it completes (counted in ``lines``), the last (without its newline) at ``close``. A line
    ``_line`` cannot take is left out with ``_leave_out``: counted, and the first one's reason kept."""

    def __init__(self) -> None:
        self.lines = 0
        self.left_out, self.why = 0, ""  # lines left out, why the first was
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> int:
        """The lines read so far, ``chunk``'s whole ones too."""
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._partial += chunk[start:end]
            self._take(bytes(self._partial))
            self._partial.clear()
            start = end + 1
        self._partial += chunk[start:]
        return self.lines

    def close(self) -> None:
        self._take(bytes(self._partial))
        self._partial.clear()

    def left_out_said(self, who: str) -> str:
        return f"left out {self.left_out} of the {self.lines} lines {who} answered ({self.why})"

    def _take(self, line: bytes) -> None:
        if line.strip():
            self.lines += 1
            self._line(line)

    def _leave_out(self, why: str) -> None:
        self.left_out += 1
        self.why = self.why or one_line(f"line {self.lines}: {why}")

    def _line(self, line: bytes) -> None:
        raise NotImplementedError


def shown(text: str | bytes) -> str:
    """The start of a line, or a value from one, quoted, for a sentence on what it is not."""
    return repr((text.decode(errors="replace") if isinstance(text, bytes) else text)[:80])


def to_json_line(event: Event) -> str:
    """The event as one line of strict JSON; a NaN or infinite figure becomes null."""
    body = to_json_dict(event)
    try:
        return json.dumps(body, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(finite_json(body), default=str, allow_nan=False)


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinite float as None, for JSON other tools read."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def to_json_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict with the event's type under ``event``."""
    body = dataclasses.asdict(event)
    for key, value in body.items():
        if isinstance(value, enum.Enum):
            body[key] = value.value
    return {"event": type(event).__name__, **body}
