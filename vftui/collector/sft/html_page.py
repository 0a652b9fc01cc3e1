"""The run's ``groups.html``, as atroposlib's process mode renders it, minus the script risk, built as
the groups are written.

atroposlib renders each message as Markdown, and Markdown passes raw HTML through, so a
model that writes ``<script>`` gets it run by whoever opens the page. Here each message's
role and text are HTML-escaped first and then handed to atroposlib's own renderer and
template, so the page looks the same and shows the markup as text. Markdown's own links and images
(``[x](javascript:...)``) are live only to http, https and mailto; any other is shown as text. The
jsonl is untouched.

atroposlib renders the whole jsonl after the last group (a 10k-group run lived 41 s past it). Here
the page is appended to as the run goes: the template's head first, each group's section once its
line is in the jsonl (read back from where the page stopped, so the page holds what the file
holds, in its order), the tail at the end: a run's end costs the tail alone, and a run killed
mid-way leaves a page a browser reads (without the tail). After each batch of sections a comment
(``MARK``) records how far into the jsonl the page goes, with the last line's checksum: a resumed
run cuts the page back to the last mark its jsonl still backs (a torn line a resume cut, a page
written by an older vftui: none) and renders the lines after it, so each group is on the page once.
"""

from __future__ import annotations

import html
import logging
import mmap
import os
import re
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from vftui import safe_files
from vftui.bounds import LongLine
from vftui.run_files import store
from vftui.run_files.files import RunFiles

logger = logging.getLogger(__name__)
NO_DATA = "<p>No groups were written.</p>"
LIVE_SCHEMES = ("http", "https", "mailto")
# what markdown makes of [text](url) and ![alt](url); the model's own markup was escaped before
LINK = re.compile(r"<a\b(?P<attributes>[^>]*)>(?P<text>.*?)</a>", re.DOTALL)
IMAGE = re.compile(r"<img\b(?P<attributes>[^>]*)>")
URL, ALT = re.compile(r'\b(?:href|src)="([^"]*)"'), re.compile(r'\balt="([^"]*)"')
# a browser drops these from a URL before it reads the scheme (java\tscript: is javascript:)
IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]")
# how far the page goes: its sections so far, the span of the last jsonl line read and its crc32
MARK_START = b"<!-- vftui page: "
MARK = re.compile(rb"<!-- vftui page: (\d+) groups, jsonl bytes (\d+)-(\d+), crc (\d+) -->\n")
_GROUPS_AT = "\x00"  # where the template's groups go: the page's head before it, its tail after


def _escaped(messages: list[Any]) -> list[Any]:
    out = []
    for rollout in messages:
        if isinstance(rollout, list):
            out.append(
                [
                    {
                        "role": html.escape(str(m.get("role", ""))),
                        "content": html.escape(str(m.get("content") or "")),
                    }
                    for m in rollout
                    if isinstance(m, dict)
                ]
            )
        else:
            out.append(html.escape(str(rollout)))
    return out


def _live(url: str) -> bool:
    scheme, colon, _ = IGNORED_IN_URLS.sub("", html.unescape(url)).partition(":")
    return bool(colon) and scheme.lower() in LIVE_SCHEMES


def _inert_links(section: str) -> str:
    """Each link or image to anything but http, https or mailto as its text and its address, not a link."""

    def shown(match: re.Match[str]) -> str:
        url = URL.search(match["attributes"])
        if url is None or _live(url[1]):
            return match.group()
        text = match.groupdict().get("text") or (
            alt[1] if (alt := ALT.search(match["attributes"])) else ""
        )
        return f"{text} ({url[1]})"

    return IMAGE.sub(shown, LINK.sub(shown, section))


def _section(group: dict[str, Any], index: int) -> str:
    """The group's section as atroposlib renders it, from its escaped messages; '' when it shows nothing."""
    from atroposlib.frontend import jsonl2html

    if not isinstance(group["scores"], list):
        return ""
    safe = {"scores": group["scores"], "messages": _escaped(group.get("messages") or [])}
    return _inert_links(jsonl2html.create_html_for_group(safe, index))


def _head_and_tail(jsonl: Path) -> tuple[bytes, bytes]:
    """atroposlib's template, titled after the jsonl, split where the groups go."""
    from atroposlib.frontend import jsonl2html

    template = Path(jsonl2html.TEMPLATE_FILE).read_text(encoding="utf-8")
    page = template.format(
        title=html.escape(f"Rendered Messages - {jsonl.name}"), groups_html=_GROUPS_AT
    )
    head, tail = page.split(_GROUPS_AT)
    return head.encode(), tail.encode()


class GroupsPage:
    """The run's page, open to append to: ``follow`` after each group, ``finish`` at the end.

    Made by ``open``; a page that cannot be written is a warning, and the run goes on without it.
    """

    def __init__(
        self, path: Path, tail: bytes, jsonl: BinaryIO, fd: int, read: int, groups: int
    ) -> None:
        self._path, self._tail, self._jsonl = path, tail, jsonl
        self._fd: int | None = fd
        self._read = read  # the jsonl's bytes the page holds
        self._groups = groups  # its sections, numbered as atroposlib numbers them

    @classmethod
    def open(cls, files: RunFiles) -> GroupsPage | None:
        """The page of the run's jsonl, cut back to what the jsonl backs (a new page: its head alone)."""
        head, tail = _head_and_tail(files.jsonl)
        try:
            jsonl = os.fdopen(safe_files.open_regular(files.jsonl, os.O_RDONLY), "rb")
        except OSError as e:
            _not_written(files.jsonl, e)
            return None
        try:
            kept = _kept(files.html, jsonl, head)
            if kept is None:
                safe_files.replace(files.html, head)  # a link at the name is replaced
                kept = safe_files.open_regular(files.html, os.O_RDWR | os.O_APPEND), 0, 0
        except OSError as e:
            jsonl.close()
            _not_written(files.html, e)
            return None
        return cls(files.html, tail, jsonl, *kept)

    def follow(self) -> None:
        """Append the sections of the lines written since the last call (each line's once its newline is there)."""
        if self._fd is None:
            return
        try:
            data, read, groups = self._sections()
        except Exception as e:  # noqa: BLE001 - atroposlib's renderer failing: the page stops, not the run
            logger.warning("the groups were saved, but their HTML view stops here: %r", e)
            self._close()
            return
        if self._write(data):
            self._read, self._groups = read, groups

    def finish(self) -> Path | None:
        """The lines left, then the tail; the page's path, or None when it could not be written."""
        self.follow()
        done = self._fd is not None and self._write(
            (b"" if self._groups else NO_DATA.encode()) + self._tail
        )
        self._close()
        return self._path if done else None

    def _sections(self) -> tuple[bytes, int, int]:
        """The sections of the whole lines after the page's end, its mark; the jsonl's bytes and groups then."""
        f, read, groups, last = self._jsonl, self._read, self._groups, None
        f.seek(read)
        parts = []
        for raw in store.group_lines(f):
            if isinstance(raw, LongLine):  # skipped, as a reader skips it
                if not raw.ended:
                    break
                read += raw.size
                continue
            if not raw.endswith(b"\n"):
                break  # not whole yet
            last, read = (read, read + len(raw), raw), read + len(raw)
            group = store.parse_group_line(raw)
            if isinstance(group, dict) and (section := _section(group, groups)):
                parts.append(section.encode())
                groups += 1
        if last is not None:
            begin, end, line = last
            parts.append(
                b"<!-- vftui page: %d groups, jsonl bytes %d-%d, crc %d -->\n"
                % (groups, begin, end, zlib.crc32(line))
            )
        return b"".join(parts), read, groups

    def _write(self, data: bytes) -> bool:
        """``data`` appended; False (the page closed, with a warning) when it could not be."""
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            _not_written(self._path, e)
            self._close()
            return False
        return True

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        self._jsonl.close()


def _kept(page: Path, jsonl: BinaryIO, head: bytes) -> tuple[int, int, int] | None:
    """A resumed run's page, cut after its last mark the jsonl backs (or after its head): its descriptor, the
    jsonl's bytes and the groups it holds; None when there is no page of this jsonl's to keep."""
    try:
        fd = safe_files.open_regular(page, os.O_RDWR | os.O_APPEND)
    except OSError:
        return None  # none, or a link or anything else there: a new page replaces it
    try:
        if os.pread(fd, len(head), 0) != head:
            os.close(fd)
            return None
        keep, read, groups = len(head), 0, 0
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as text:
            end = len(text)
            while (at := text.rfind(MARK_START, len(head), end)) >= 0:
                mark = MARK.match(text, at)
                if mark is not None and _backed(jsonl, *map(int, mark.groups()[1:])):
                    keep, read, groups = mark.end(), int(mark[3]), int(mark[1])
                    break
                end = at
        os.ftruncate(fd, keep)
    except BaseException:
        os.close(fd)
        raise
    return fd, read, groups


def _backed(jsonl: BinaryIO, begin: int, end: int, crc: int) -> bool:
    """The jsonl holds a whole line at ``begin``-``end`` with this crc32 (a mark the page can resume from)."""
    if not 0 <= begin < end or end - begin > store.MAX_GROUP_LINE_BYTES:
        return False
    fd = jsonl.fileno()
    line = os.pread(fd, end - begin, begin)
    before = os.pread(fd, 1, begin - 1) if begin else b"\n"
    whole = before == b"\n" and len(line) == end - begin and line.endswith(b"\n")
    return whole and zlib.crc32(line) == crc


def _not_written(path: Path, error: OSError) -> None:
    logger.warning(
        "the groups were saved, but not their HTML view: %s", store.WriteFailed(path, error)
    )
