"""Every file vftui writes, written only where it means to: never through a link someone planted.

A run's files sit in folders others may write to (a shared /tmp, a team's folder). A symbolic
link planted at ``groups.lock`` or ``groups.checkpoint.json.tmp`` would make a plain ``open``
write wherever it points, with the user's rights. So every file is opened here: never through
a link at its name (``O_NOFOLLOW``: a link is refused), and a file that replaces another is
first made under a fresh name of its own (``O_EXCL``) and renamed over it (a link at the name
is replaced). Links among the folders above a file are the user's own business and followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from vftui.errors import UserError

NO_LINKS = os.O_NOFOLLOW | os.O_CLOEXEC
NOT_THROUGH_A_LINK = "it is a symbolic link, which vftui never writes through"


class LinkRefused(OSError):
    """A link where vftui was to write; an OSError, so each writer's own handling of one says it."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ELOOP, NOT_THROUGH_A_LINK, str(path))


def given_file(path: Path, flag: str) -> Path:
    """A file named on the command line (``--out``, ``--resume``), absolute, refused if it is a link."""
    path = path.expanduser()
    if path.is_symlink():
        raise UserError(
            f"{flag} {path} is a symbolic link; name the file itself (vftui never writes through "
            "a link)"
        )
    try:
        return path.parent.resolve() / path.name
    except RuntimeError:  # Python 3.11's word for a link loop on the way
        raise UserError(f"{flag} {path}: its folder is a symbolic link loop") from None


def open_fd(path: Path, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that never follows a link at ``path`` (``LinkRefused``); ``mode`` is masked by the umask."""
    try:
        return os.open(path, flags | NO_LINKS, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise LinkRefused(path) from None
        raise


def open_to_read(path: Path) -> BinaryIO:
    """A run file to read back (settings, checkpoint, index entry, lock, drops): a FIFO or a device there would
    block its reader for ever, so it is opened without blocking and refused (an ``OSError`` saying what it is)
    unless it is a regular file."""
    return os.fdopen(
        _only_regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path), "rb"
    )


def open_regular(path: Path, flags: int, mode: int = 0o666) -> int:
    """``open_fd`` of a regular file only (a lock): a FIFO or a device there is opened without blocking and
    refused, and so is a folder, each an ``OSError`` saying what it is."""
    try:
        fd = open_fd(path, flags | os.O_NONBLOCK, mode)
    except IsADirectoryError:
        raise OSError(
            errno.EISDIR, f"it is {_kind(stat.S_IFDIR)}, not a regular file", str(path)
        ) from None
    except OSError as e:
        if e.errno != errno.ENXIO:  # a FIFO opened to write with no reader, or a socket
            raise
        raise OSError(
            errno.EINVAL, f"it is {not_regular(path)}, not a regular file", str(path)
        ) from None
    return _only_regular(fd, path)


def _only_regular(fd: int, path: Path) -> int:
    """``fd``, blocking again, if it is a regular file; else closed, and an ``OSError`` saying what it is."""
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"it is {_kind(mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def not_regular(path: Path) -> str | None:
    """What is at ``path`` when something is there that no reader can take ("a FIFO", "a folder", "a link that
    leads nowhere"); None for a regular file or nothing at all."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        if not os.path.lexists(path):
            return None
        return "a symbolic link loop" if e.errno == errno.ELOOP else "a link that leads nowhere"
    return None if stat.S_ISREG(mode) else _kind(mode)


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
    return next((name for test, name in kinds if test(mode)), "of an unknown kind")


def open_append(path: Path, mode: int = 0o644) -> int:
    """A file to append to, made if missing (a run's jsonl, log, drops); a FIFO planted at its name blocked the
    run for ever, so only a regular file is taken (``open_regular``)."""
    return open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)


def create_new(path: Path, mode: int = 0o666) -> int:
    """A file that did not exist; a ``FileExistsError`` if anything is at ``path``, a link included."""
    return open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)


def replace(path: Path, data: bytes) -> None:
    """``path`` replaced in one rename by a new file holding ``data``: a crash or a full disk leaves the old
    or the new file, and a link at ``path`` is replaced, not written through."""
    while True:
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = create_new(tmp)
            break
        except FileExistsError:
            continue  # taken (planted, or a crashed write's): another name
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def own_folder(path: Path, private: bool = False) -> Path:
    """``path`` as a folder of this user's (``private``: of mode 0700, no one else may enter), made if missing;
    anything else there (a link, a file, another user's folder) is a ``PermissionError`` saying what it is."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700 if private else 0o777)
    found = path.lstat()
    mode = stat.S_IMODE(found.st_mode)
    if stat.S_ISLNK(found.st_mode):
        wrong = "a symbolic link"
    elif not stat.S_ISDIR(found.st_mode):
        wrong = "not a folder"
    elif found.st_uid != os.getuid():
        wrong = f"a folder of another user's (uid {found.st_uid})"
    elif private and mode != 0o700:
        wrong = f"a folder of mode {mode:04o}, which others may enter"
    else:
        return path
    raise PermissionError(errno.EPERM, f"it is {wrong}", str(path))
