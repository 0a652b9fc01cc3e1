"""Bounds on what vftui reads back from files and settings: how long a line, how big a file, how deep
a value nests.

Each bound is far beyond anything vftui writes, so passing one means damage or a hostile input:
the reader says so in one sentence (a ``ValueError`` to word for the file it came from) instead of
holding the input whole, running out of memory, or out of stack in a recursive parser.
"""

from __future__ import annotations

import json
import math
import numbers
import reprlib
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from vftui import safe_files
from vftui.errors import UserError

# Upper bounds on numbers far beyond any real run, so a typo or a damaged file is one sentence, not an
# OverflowError or a MemoryError deep inside: settings' sizes (LARGE) and counts (HUGE: groups, items, seconds).
LARGE, HUGE = 100_000, 10**12
# A reward or metric value vftui averages: beyond this it is a reward function's bug or damage, not a score. Any
# mean, variance, interval or difference of values within it stays a finite float (the squares stay below 1e200).
MAX_SCORE = 1e100
MAX_NESTING = 64  # levels of a JSON or TOML value: settings and run files need a handful
MAX_RECORD_BYTES = (
    4 * 1024**2
)  # a run's settings, checkpoint or index entry, an eval's metadata, a config file
PIECE_BYTES = (
    1024**2
)  # a line longer than this is measured this much at a time before it is read (or skipped)


@dataclass(frozen=True)
class LongLine:
    """A line over the bound, skipped without being held: its length, and whether its newline came."""

    size: int
    ended: bool


def read_lines(f: BinaryIO, limit: int) -> Iterator[bytes | LongLine]:
    """Each line of ``f`` from where it stands, or a ``LongLine`` for one over ``limit`` bytes.

    A line longer than a piece is measured piece by piece before it is read, so one over the limit
    is never held. A last line without its newline comes as it is (a whole line ends in one).
    """
    while raw := f.readline(PIECE_BYTES):
        if len(raw) < PIECE_BYTES or raw.endswith(b"\n"):
            yield raw
            continue
        start, size = f.tell() - len(raw), len(raw)
        while (piece := f.readline(PIECE_BYTES)) and not piece.endswith(b"\n"):
            size += len(piece)
        size += len(piece)
        if size > limit:
            yield LongLine(size, piece.endswith(b"\n"))
            continue
        f.seek(start)
        yield f.read(size)


def score(value: Any) -> float | None:
    """``value`` as a float when it is a score vftui can compute with: a real number (a bool is not one), finite
    and within ``MAX_SCORE`` (an int of 400 digits is not); None otherwise, for the caller to count or refuse."""
    if type(value) is float:  # the common case first: an ABC check per value costs a big file
        return value if -MAX_SCORE <= value <= MAX_SCORE else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, int) and abs(value) > MAX_SCORE:
        return None  # before float(), which an int of 400 digits overflows
    number = float(value)
    return number if abs(number) <= MAX_SCORE else None  # NaN compares false


def refusal(value: Any) -> str:
    """Why ``score`` refused ``value``, after it: ``'0.5', not a number``, ``nan, not a finite number``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{reprlib.repr(value)}, not a number"
    if isinstance(value, int) or math.isfinite(value):
        return f"{reprlib.repr(value)}, beyond ±{MAX_SCORE:g}"
    return f"{reprlib.repr(value)}, not a finite number"


def too_long(line: LongLine, limit: int) -> str:
    return f"longer than {limit // 1024**2:,} MB ({line.size:,} bytes)"


def load_json(data: bytes | str) -> Any:
    """A JSON value nested at most ``MAX_NESTING`` deep; a ``ValueError`` says what is wrong."""
    try:
        value = json.loads(data, parse_int=json_integer)
    except RecursionError:
        raise ValueError(f"it nests deeper than {MAX_NESTING} levels") from None
    return check_nesting(value)


def json_integer(text: str) -> int:
    """An integer of the JSON; one past Python's digit limit is said as such (its own error told the user to
    call ``sys.set_int_max_str_digits()``)."""
    if len(text.lstrip("-")) > sys.get_int_max_str_digits() > 0:
        raise ValueError(f"it holds {over_digit_limit()}")
    return int(text)


def over_digit_limit() -> str:
    """What every reader of JSON calls an integer past Python's digit limit (read when said: a program may
    change the limit)."""
    return f"an integer of more than {sys.get_int_max_str_digits():,} digits"


def read_json(path: Path) -> Any:
    """A JSON file of at most ``MAX_RECORD_BYTES`` (``OSError`` when it cannot be read, or is not a regular file)."""
    with safe_files.open_to_read(path) as f:
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise ValueError(f"it is over {MAX_RECORD_BYTES // 1024**2:,} MB")
    return load_json(data)


def read_toml(path: Path, role: str) -> dict[str, Any]:
    """A TOML file of at most ``MAX_RECORD_BYTES``; else a ``UserError`` naming it by its ``role`` ("the config
    file", "theme file"): it cannot be read (or is not a regular file), is too big, not UTF-8, not TOML, too deep."""
    try:
        with safe_files.open_to_read(path) as f:
            data = f.read(MAX_RECORD_BYTES + 1)
    except OSError as e:
        raise UserError(f"cannot read {role} {path}: {e.strerror}") from e
    if len(data) > MAX_RECORD_BYTES:
        raise UserError(f"{role} {path} is over {MAX_RECORD_BYTES // 1024**2:,} MB")
    try:
        return check_nesting(tomllib.loads(data.decode()))
    except UnicodeDecodeError as e:
        problem = f"is not UTF-8 text (byte {e.start})"
    except tomllib.TOMLDecodeError as e:
        problem = f"does not parse as TOML: {e}"
    except (RecursionError, ValueError):  # tomllib recurses
        problem = f"nests deeper than {MAX_NESTING} levels"
    raise UserError(f"{role} {path} {problem}")


def check_nesting(value: Any) -> Any:
    """``value`` when its lists and objects nest at most ``MAX_NESTING`` deep (walked without recursion)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(MAX_NESTING):
        level = [
            child
            for v in level
            for child in (v.values() if isinstance(v, dict) else v)
            if isinstance(child, dict | list)
        ]
        if not level:
            return value
    raise ValueError(f"it nests deeper than {MAX_NESTING} levels")
