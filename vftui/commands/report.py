"""``vftui report SOURCE [SOURCE ...] [-o FILE]``: a run, an eval, a shard folder, or several of one
environment compared, as one HTML file that opens from disk and fetches nothing (``vftui.report``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vftui import safe_files
from vftui.commands.compare import note_unread, readable
from vftui.comparing.comparison import measure
from vftui.errors import UserError
from vftui.report.page import DOCTYPE, Report, render
from vftui.run_files.files import RunFiles
from vftui.run_files.lock import RunLock
from vftui.run_files.results import load
from vftui.text.printable import say


def run_report(paths: list[Path], out: Path, threshold: float | None, max_rollouts: int) -> int:
    """Read the sources (saying each on stderr: a big one takes a while), write the page, print its path."""
    out = safe_files.given_file(out, "-o")
    _refuse_a_live_runs_file(out)
    _refuse_what_is_no_page(out)
    sources = []
    for path in paths:
        _progress(f"reading {path}")
        sources.append(load(path))
    sources = readable(sources)
    note_unread(sources)
    _progress("measuring" + (" and testing the changes" if len(sources) > 1 else ""))
    summaries, changes = measure(sources, threshold)
    page = render(Report(sources, summaries, changes), max_rollouts, _progress)
    data = page.encode()
    _refuse_a_live_runs_file(out)  # a run started there while the sources were read
    try:
        safe_files.replace(out, data)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    say(f"vftui: report written to {out} ({len(data) / 2**20:.1f} MB)", sys.stdout)
    return 0


def _refuse_a_live_runs_file(out: Path) -> None:
    """-o never names a file a live run writes: its page (``NAME.html``, beside its jsonl) was replaced by the
    report without a word, and the run's next update put its own back."""
    for files in RunFiles.owners(out):
        if (pid := RunLock(files).live_holder()) is not None:
            what = "the page" if out.name == files.html.name else "a file"
            raise UserError(
                f"-o {out} is {what} of the live run {files.jsonl} (pid {pid}), which writes it as it "
                f"goes; name another file, like -o {out.with_name(out.stem + '-report.html')}"
            )


def _refuse_what_is_no_page(out: Path) -> None:
    """-o replaces a page, never a file that is none: one slip of the shell named the run's own groups or an
    eval's metadata, and the report took their place."""
    if not out.parent.is_dir():  # said now, not after minutes of reading a big run
        raise UserError(f"cannot write {out}: there is no folder {out.parent}")
    if not os.path.lexists(out):
        return
    try:
        with safe_files.open_to_read(out) as f:
            head = f.read(len(DOCTYPE) + 64)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip().lower()  # a byte-order mark, blank lines
    # an empty file (mktemp's) holds nothing to lose
    if start and not start.startswith(DOCTYPE.lower().encode()):
        raise UserError(
            f"-o {out} is a file that is no HTML page; vftui replaces only a page (remove it first, "
            "or name another file)"
        )


def _progress(line: str) -> None:
    say(f"vftui: report: {line}", sys.stderr)
