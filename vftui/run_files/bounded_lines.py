"""JSON lines from another machine, bounded by what they parse to, not only by their bytes.

Parsed, JSON's containers cost far more than they are written in: ``{},`` is 3 bytes on the wire and some 72 in
memory, so a host's 100 MB answer of them held 2.9 GB (and the 512 MB a compare source may be, some 15 GB). So
before a line is parsed, the values it can make are counted from its bytes (``values``, never fewer than the
truth, each at most ``VALUE_BYTES`` once parsed); a line past its own bounds is left out unparsed (one too long is
never held, only measured), and past the answer's budget of values reading stops (``spent``).
"""

from __future__ import annotations

import re

from vftui.text.json_lines import PipedLines

VALUE_BYTES = 100  # the most a value ``values`` counts costs parsed (an object of one key: ~90)
QUICK = 256  # a line counted to at most this many values is taken at that count: no closer look
_KEPT = b'"[,:'
_OTHERS = bytes(b for b in range(256) if b not in _KEPT)
_STRING = re.compile(rb'"[^"]*+(?:"|\Z)')  # on a line cut to ``_KEPT``: no escape left, so linear


def values(line: bytes) -> int:
    """An upper bound on the values (keys included) that parsing ``line`` makes: one, one more for each ``[``
    and ``,``, and two for each ``:`` (a key and its value). A line counted to more than ``QUICK`` with its
    strings' own is counted again without them (a message's commas are no values)."""
    quick = _count(line)
    if quick <= QUICK:
        return quick
    # its escapes gone (``\\`` first, as JSON reads them, left to right), then all but quotes and what is
    # counted, then the strings left empty: a quote that is left opens or closes a string of counted signs
    bare = line.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _OTHERS)
    bare = bare.replace(b'""', b"")
    return _count(_STRING.sub(b"", bare) if b'"' in bare else bare)


def _count(text: bytes) -> int:
    return 1 + text.count(b"[") + text.count(b",") + 2 * text.count(b":")


class BoundedLines(PipedLines):
    """``PipedLines`` whose lines are bounded before ``_line`` parses them: one longer than ``line_bytes`` or
    of more than ``line_values`` values is left out (counted, and said), and once the lines taken would pass
    ``budget`` values together, no line is parsed again (``spent``: its reader stops reading)."""

    def __init__(self, line_bytes: int, line_values: int | None = None, budget: int | None = None):
        super().__init__()
        self.line_bytes, self.line_values, self.budget = line_bytes, line_values, budget
        self.values = 0  # the values of the lines parsed so far, as ``values`` counts them
        self.spent = False
        self._skipped: int | None = None  # the bytes so far of a line past ``line_bytes``, not held

    def feed(self, chunk: bytes) -> int:
        """The lines read so far, ``chunk``'s whole ones too; one past ``line_bytes`` is never held whole."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._add(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return self.lines
            self._ended()
            start = end + 1

    def close(self) -> None:
        self._ended()

    def _add(self, piece: bytes) -> None:
        if self._skipped is not None:
            self._skipped += len(piece)
            return
        self._partial += piece
        if len(self._partial) > self.line_bytes:
            self._skipped = len(self._partial)
            self._partial = bytearray()  # its memory given back, not kept for the next line

    def _ended(self) -> None:
        if self._skipped is not None:
            self.lines += 1
            self._leave_out(f"longer than {self.line_bytes:,} bytes ({self._skipped:,})")
            self._skipped = None
            return
        self._take(bytes(self._partial))
        self._partial.clear()

    def _take(self, line: bytes) -> None:
        if not line.strip():
            return
        self.lines += 1
        if self.spent:
            return
        count = values(line)
        if self.line_values is not None and count > self.line_values:
            return self._leave_out(f"more than {self.line_values:,} values")
        if self.budget is not None and self.values + count > self.budget:
            self.spent = True
            return
        self.values += count
        self._line(line)
