"""The run's page (``RUN.html``): the report of its groups, built as they are written.

Each group's rollouts are appended once its line is in the jsonl (read back from where the page stopped,
so the page holds what the file holds, in its order), drawn as ``vftui report`` draws them: escaped text,
no Markdown, no link from anything the model wrote. At the end of the run the figures, charts and item
table follow, from the figures kept of each group on the way (no pass over the file): the page's style
shows them first. A run stopped before its end leaves a page a browser reads, saying it has no figures
yet. Beyond ``BYTES`` of rollouts the page shows no more groups' rollouts, saying so (its figures are of
every group); ``vftui report`` samples across the run instead.

After each batch of sections a comment (``MARK``) records how far into the jsonl the page goes, with the
last line's checksum: a resumed run cuts the page back to the last mark its jsonl still backs (a torn
line a resume cut, a page written by an older vftui: none), reads the figures of the groups before it
again, and renders the lines after it, so each group is on the page once.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from vftui import safe_files
from vftui.bounds import LongLine
from vftui.comparing.comparison import measure
from vftui.figures.paired import in_order
from vftui.report import page
from vftui.report.html_text import escaped
from vftui.run_files import store
from vftui.run_files.files import RunFiles
from vftui.run_files.results import GroupsTally, Item

logger = logging.getLogger(__name__)
BYTES = page.BYTES  # of the page's rollouts at most
UNFINISHED = (
    '<p class="note unfinished">This run is still collecting, or stopped before its end: its figures, '
    "charts and item table are written at its end. <code>vftui report</code> makes them from what it "
    "wrote.</p>"
)
# how far the page goes: its groups so far, the span of the last jsonl line read and its crc32
MARK_START = b"<!-- vftui page: "
MARK = re.compile(  # a number of 20 digits or more is no page's: forged, never parsed
    rb"<!-- vftui page: (\d{1,19}) groups, jsonl bytes (\d{1,19})-(\d{1,19}), crc (\d{1,19}) -->\n"
)
SHOWN = re.compile(rb'<section class="item" id="(item-[0-9a-f]{16})"')


class RunPage:
    """The run's page, open to append to: ``follow`` after each group, ``finish`` at the end.

    Made by ``open``; a page that cannot be written is a warning, and the run goes on without it.
    """

    def __init__(self, files: RunFiles, jsonl: BinaryIO, kept: _Kept) -> None:
        self._files, self._jsonl = files, jsonl
        self._fd: int | None = kept.fd
        self._read, self._groups, self._size = kept.read, kept.groups, kept.size
        self._tally = kept.tally
        self._shown = kept.shown  # item keys whose rollouts are on the page

    @classmethod
    def open(cls, files: RunFiles) -> RunPage | None:
        """The page of the run's jsonl, cut back to what the jsonl backs (a new page: its head alone)."""
        top = _top(files.jsonl)
        try:
            jsonl = os.fdopen(safe_files.open_regular(files.jsonl, os.O_RDONLY), "rb")
        except OSError as e:
            _not_written(files.jsonl, e)
            return None
        try:
            kept = _kept(files.html, jsonl, top)
            if kept is None:
                safe_files.replace(files.html, top)  # a link at the name is replaced
                fd = safe_files.open_regular(files.html, os.O_RDWR | os.O_APPEND)
                kept = _Kept(fd, 0, 0, len(top), GroupsTally(keep_messages=False), {})
        except OSError as e:
            jsonl.close()
            _not_written(files.html, e)
            return None
        return cls(files, jsonl, kept)

    def follow(self) -> None:
        """Append the sections of the lines written since the last call (each line's once its newline is there)."""
        if self._fd is None:
            return
        try:
            data, read, groups = self._sections()
        except Exception as e:  # noqa: BLE001 - a group the page cannot draw: the page stops, not the run
            logger.warning("the groups were saved, but their HTML view stops here: %r", e)
            self._close()
            return
        if self._write(data):
            self._read, self._groups, self._size = read, groups, self._size + len(data)

    def finish(self) -> Path | None:
        """The lines left, then the figures, charts and item table; the page's path, or None when it could
        not be written."""
        self.follow()
        if self._fd is None:
            return None
        try:
            end = self._summary().encode() + page.END.encode()
        except Exception as e:  # noqa: BLE001 - the page stays one of a stopped run: the run ends as it would
            logger.warning("the groups were saved, but their HTML view has no figures: %s", e)
            self._close()
            return None
        done = self._write(end)
        self._close()
        return self._files.html if done else None

    def _sections(self) -> tuple[bytes, int, int]:
        """The sections of the whole lines after the page's end, its mark; the jsonl's bytes and groups then."""
        read, groups, last = self._read, self._groups, None
        parts: list[bytes] = []
        size = self._size
        for raw, end in _whole_lines(self._jsonl, read):
            if isinstance(raw, bytes):
                last = (read, end, raw)
            read = end
            if (added := _add(self._tally, raw)) is None:
                continue
            groups += 1
            if size < BYTES:
                section = _section(added, groups, self._shown, BYTES - size)
                parts.append(section)
                size += len(section)
        if last is not None:
            begin, end, line = last
            parts.append(
                b"<!-- vftui page: %d groups, jsonl bytes %d-%d, crc %d -->\n"
                % (groups, begin, end, zlib.crc32(line))
            )
        return b"".join(parts), read, groups

    def _summary(self) -> str:
        """The figures, charts and item table of every group added, shown first by the page's style."""
        if not self._groups:
            skipped = self._tally.skipped
            why = f" ({skipped:,} lines skipped: torn, foreign, or no scores)" if skipped else ""
            return f'<div id="summary"><p>No groups were written{why}.</p></div>'
        source = self._tally.source(self._files.jsonl)
        summaries, _ = measure([source], None)
        report = page.Report([source], summaries, [])
        keys = report.keys()
        # the items whose rollouts are on the page first, as the report's table lists them
        listed = sorted([*dict.fromkeys([*self._shown, *keys])][: page.TABLE_ROWS], key=in_order)
        cut = ""
        if len(self._shown) < len(keys):
            cut = (
                f'<p class="note">This page shows the rollouts of {len(self._shown):,} of '
                f"{len(keys):,} items, the first written ({BYTES // 2**20} MB of text at most); its "
                "figures, charts and item table are of every group. <code>vftui report</code> "
                "shows a sample from across the run.</p>"
            )
        return f'<div id="summary">{cut}{page.summary(report, listed, set(self._shown))}</div>'

    def _write(self, data: bytes) -> bool:
        """``data`` appended; False (the page closed, with a warning) when it could not be."""
        if self._fd is None:
            return False
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            _not_written(self._files.html, e)
            self._close()
            return False
        return True

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        self._jsonl.close()


def _top(jsonl: Path) -> bytes:
    """The page before its groups, named after the jsonl (the same on every resume: how a page is known)."""
    return (
        page.head(f"vftui run: {jsonl.name}", "run") + UNFINISHED + page.rollouts_heading("all")
    ).encode()


def _section(group: Item, number: int, shown: dict[str, None], room: int) -> bytes:
    """A group's rollouts, as many as ``room`` bytes hold (one at least; a group can hold more rollouts than a
    page has room for); the first of its item's groups on the page is the item's anchor."""
    first = group.key not in shown
    shown.setdefault(group.key)
    anchor = f' id="{page.anchor(group.key)}"' if first else ""
    parts = [
        f'<section class="item"{anchor}><h3>group {number:,}: item {escaped(group.key)}</h3>'.encode()
    ]
    size, count = 0, len(group.rewards)
    for r in range(count):
        if size >= room:
            parts.append(
                f'<p class="note">{count - r:,} more rollouts of this group are not drawn: the page '
                f"holds {BYTES // 2**20} MB of rollouts at most.</p>".encode()
            )
            break
        parts.append(page.rollout(group, r, "").encode())
        size += len(parts[-1])
    parts.append(b"</section>")
    return b"".join(parts)


@dataclass
class _Kept:
    """What a page holds: its descriptor, the jsonl's bytes and groups it covers, its size, the figures of
    those groups and the items whose rollouts it shows."""

    fd: int
    read: int
    groups: int
    size: int
    tally: GroupsTally
    shown: dict[str, None]


def _kept(path: Path, jsonl: BinaryIO, top: bytes) -> _Kept | None:
    """A resumed run's page, cut after its last mark the jsonl backs (or after its top), with the figures of
    the groups before that mark read again; None when there is no page of this jsonl's to keep."""
    try:
        fd = safe_files.open_regular(path, os.O_RDWR | os.O_APPEND)
    except OSError:
        return None  # none, or a link or anything else there: a new page replaces it
    try:
        if os.pread(fd, len(top), 0) != top:
            os.close(fd)
            return None
        keep, read = len(top), 0
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as text:
            end = len(text)
            while (at := text.rfind(MARK_START, len(top), end)) >= 0:
                mark = MARK.match(text, at)
                if mark is not None and _backed(jsonl, *map(int, mark.groups()[1:])):
                    keep, read = mark.end(), int(mark[3])
                    break
                end = at
            on_page = {m[1].decode() for m in SHOWN.finditer(text, 0, keep)}
        os.ftruncate(fd, keep)
        tally = _tally_to(jsonl, read)
    except BaseException:
        os.close(fd)
        raise
    shown = {key: None for key in tally.items if page.anchor(key) in on_page}
    return _Kept(fd, read, len(tally.means), keep, tally, shown)


def _tally_to(jsonl: BinaryIO, end: int) -> GroupsTally:
    """The figures of the jsonl's groups before byte ``end``."""
    tally = GroupsTally(keep_messages=False)
    for raw, after in _whole_lines(jsonl, 0):
        if after > end:
            break
        _add(tally, raw)
    return tally


def _whole_lines(jsonl: BinaryIO, start: int) -> Iterator[tuple[bytes | LongLine, int]]:
    """The jsonl's whole lines from byte ``start`` (one over the bound as a ``LongLine``), each with where it
    ends; the last line stops them until its newline is written."""
    jsonl.seek(start)
    for raw in store.group_lines(jsonl):
        whole = raw.ended if isinstance(raw, LongLine) else raw.endswith(b"\n")
        if not whole:
            return
        start += raw.size if isinstance(raw, LongLine) else len(raw)
        yield raw, start


def _add(tally: GroupsTally, raw: bytes | LongLine) -> Item | None:
    """A line added as ``vftui report`` reads it (a line it skips counted, so the figures say so); its group
    alone, or None when it holds none."""
    row = store.json_row(raw)
    if isinstance(row, dict):
        return tally.add(row)
    if row is False:
        tally.skipped += 1
    return None


def _backed(jsonl: BinaryIO, begin: int, end: int, crc: int) -> bool:
    """The jsonl holds a whole line at ``begin``-``end`` with this crc32 (a mark the page can resume from)."""
    fd = jsonl.fileno()
    if not 0 <= begin < end <= os.fstat(fd).st_size or end - begin > store.MAX_GROUP_LINE_BYTES:
        return False
    line = os.pread(fd, end - begin, begin)
    before = os.pread(fd, 1, begin - 1) if begin else b"\n"
    whole = before == b"\n" and len(line) == end - begin and line.endswith(b"\n")
    return whole and zlib.crc32(line) == crc


def _not_written(path: Path, error: OSError) -> None:
    logger.warning(
        "the groups were saved, but not their HTML view: %s", store.WriteFailed(path, error)
    )
