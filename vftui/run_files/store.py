"""Where groups live: a crash-safe jsonl appender, a bounded window, dumps, reading back.

A group line is written with a single ``write`` on an ``O_APPEND`` descriptor, so a
``kill -9`` leaves only whole lines; a torn tail (power loss) is cut off by
``repair_tail`` before a resumed run appends. A write that fails (a full disk) takes its
partial line back and fails the run with one sentence (``WriteFailed``).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from vftui import safe_files
from vftui.bounds import LongLine, over_digit_limit, read_lines, too_long
from vftui.errors import RunFailed, UserError

# The longest group line read back: 16 rollouts of 128K tokens with their logprobs. A longer one is
# damage, reported and skipped without being held.
MAX_GROUP_LINE_BYTES = 128 * 1024**2


class WriteFailed(RunFailed):
    """An OS error writing a run's files (a full disk, a quota): the run cannot go on."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")


def encode_line(obj: Any) -> bytes:
    """One strict JSON line: NaN and infinity are refused (the collector drops such groups first)."""
    return (
        json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"
    ).encode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


STRICT_JSON = json.JSONDecoder(
    parse_constant=_refuse_constant
)  # one for every line: building one costs (no parse_int: a call per token id would slow reading)


def unique_path(path: Path) -> Path:
    """``path`` if free, else ``stem_1``, ``stem_2``... (atroposlib's naming); a link, even a dangling one,
    takes its name."""
    return next(candidate for candidate in numbered(path) if not os.path.lexists(candidate))


def numbered(path: Path) -> Iterator[Path]:
    """``path``, then ``stem_1``, ``stem_2``...: the names a file takes in turn where the one before is taken."""
    yield path
    yield from (path.with_stem(f"{path.stem}_{n}") for n in itertools.count(1))


def torn_tail(path: Path) -> int:
    """The bytes of a last line a write left cut short (an object's start, no newline, no whole JSON object), 0
    if none: a line whose object is whole and only lacks its newline is a group (``repair_tail`` ends it)."""
    with safe_files.open_to_read(path) as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        start = _last_line_start(f)
        f.seek(start)
        tail = f.read(MAX_GROUP_LINE_BYTES + 1)
    if not tail.strip() or is_json_object(tail) or not tail.startswith(b"{"):
        return 0  # blank: no damage; whole: a group; no object's start: damage the reader refuses, not a tear
    return size - start


def repair_tail(path: Path) -> int:
    """Before a resumed run appends: cut a torn last line (``torn_tail``), and end a whole one that lacks its
    newline; returns the number of bytes cut."""
    if not path.exists():
        return 0
    torn = torn_tail(path)
    with os.fdopen(safe_files.open_regular(path, os.O_RDWR), "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if torn:
            f.truncate(size - torn)
        elif size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(size)
                f.write(b"\n")
    return torn


def _last_line_start(f: BinaryIO) -> int:
    """Where the last line of ``f`` starts (after the last newline but one at the very end)."""
    size = f.seek(0, os.SEEK_END)
    keep = size - 1 if size else 0  # a newline that ends the file ends the last line
    while keep > 0:
        step = min(65536, keep)
        f.seek(keep - step)
        newline = f.read(step).rfind(b"\n")
        if newline >= 0:
            return keep - step + newline + 1
        keep -= step
    return 0


def is_json_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return False


class JsonlAppender:
    """The jsonl writer handed to atroposlib (it calls ``write`` and ``close``).

    ``on_line`` sees each encoded line, so the in-memory window holds exactly what the
    file holds.
    """

    def __init__(self, path: Path, on_line=None) -> None:
        self.path = path
        self.lines_written = 0
        self._on_line = on_line
        self._fd: int | None = safe_files.open_append(path)

    def write(self, obj: Any) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        data = encode_line(obj)
        view = memoryview(data)
        start = os.fstat(self._fd).st_size
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)  # whole lines only, even on a full disk
            raise WriteFailed(self.path, e) from e
        self.lines_written += 1
        if self._on_line is not None:
            self._on_line(data)

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as e:
            raise WriteFailed(self.path, e) from e
        finally:
            os.close(fd)


class GroupWindow:
    """The most recent groups as encoded lines; bounded, thread-safe, dumpable."""

    def __init__(self, size: int) -> None:
        self._lines: collections.deque[bytes] = collections.deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, line: bytes) -> None:
        with self._lock:
            self._lines.append(line)

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    def dump(
        self, path: Path, keep: Callable[[bytes], bool] | None = None
    ) -> tuple[Path, int, int]:
        """Write the window's groups ``keep`` keeps (all without it) to a new file, never overwriting;
        returns the path, how many were written and how many the window held."""
        with self._lock:
            held = list(self._lines)
        lines = held if keep is None else [line for line in held if keep(line)]
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            free = unique_path(path)
            try:
                fd = safe_files.create_new(free)
                break
            except FileExistsError:
                continue  # taken since unique_path looked
        with os.fdopen(fd, "wb") as f:
            f.writelines(lines)
        return free, len(lines), len(held)


@dataclass(frozen=True)
class BadLine:
    number: int
    reason: str


def read_groups(path: Path) -> Iterator[tuple[int, dict[str, Any]] | BadLine]:
    """Each line's (number, group), or a ``BadLine`` saying why a line was skipped."""
    with safe_files.open_to_read(path) as f:
        for number, raw in enumerate(group_lines(f), start=1):
            if isinstance(raw, LongLine) or raw.strip():
                parsed = parse_group_line(raw)
                yield BadLine(number, parsed) if isinstance(parsed, str) else (number, parsed)


def group_lines(f: BinaryIO) -> Iterator[bytes | LongLine]:
    """The lines of a groups file from where ``f`` stands, one over ``MAX_GROUP_LINE_BYTES`` as a ``LongLine``."""
    return read_lines(f, MAX_GROUP_LINE_BYTES)


def parse_group_line(raw: bytes | LongLine) -> dict[str, Any] | str:
    """A line's group, or why it is not one."""
    if isinstance(raw, LongLine):
        return too_long(raw, MAX_GROUP_LINE_BYTES)
    try:
        obj = STRICT_JSON.decode(raw.decode("utf-8"))
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg})"
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except ValueError as e:  # NaN, Infinity; an integer past Python's digit limit
        if "integer string conversion" in str(e):  # its own words say to raise the limit
            return f"not a group ({over_digit_limit()})"
        return f"not strict JSON ({e})"
    except RecursionError:
        return "not a group (nested too deep to read)"
    if not isinstance(obj, dict) or "scores" not in obj or "tokens" not in obj:
        return "not a scored group (no tokens/scores)"
    return obj


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one rename (``safe_files.replace``); an OS error is a ``WriteFailed``."""
    try:
        safe_files.replace(path, text.encode())
    except OSError as e:
        raise WriteFailed(path, e) from e


def json_row(line: bytes | LongLine) -> dict[str, Any] | bool:
    """The JSON object a line holds as the results readers read it (any keys, NaN allowed); else False
    for a line they skip (torn, too long, foreign), True for a blank one they pass over."""
    try:
        row = json.loads(line) if isinstance(line, bytes) else None
    except (ValueError, RecursionError):
        row = None
    if isinstance(row, dict):
        return row
    return isinstance(line, bytes) and not line.strip()


class JsonObjects:
    """The JSON objects of a file's lines, counting the lines that are not one (torn, foreign: skipped)."""

    def __init__(self, path: Path) -> None:
        self.path, self.skipped = path, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            with safe_files.open_to_read(self.path) as f:
                for line in group_lines(f):
                    row = json_row(line)
                    if isinstance(row, dict):
                        yield row
                    elif not row:
                        self.skipped += 1
        except OSError as e:
            raise UserError(f"cannot read {self.path}: {e.strerror}") from e
