"""``vftui view FILE.jsonl``: a saved groups file in the dashboard's panels, at once however big.

A run or eval folder opens its groups; vf-eval's ``results.jsonl`` (or its folder) opens in the
groups form, one group an example (``results.viewable``); a folder of one run's shards opens as
that run, its shards read one after another (``shard_folder``); a prime-rl run folder opens its train
rollouts, a group a rollout group, step by step (``prime_rl``), mirrored as it grows with ``--follow``.

The app opens before the file is read; ``GroupFile.read`` runs as the app's worker and
fills the table and the panels as it goes (see ``groupfile``); with ``--follow`` it goes on
reading the lines another process appends until the app closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vftui.errors import UserError
from vftui.run_files import prime_rl
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.results import viewed
from vftui.sim import TOKENIZER_DIR
from vftui.text.printable import one_line
from vftui.ui import themes
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox
from vftui.ui.terminal import has_screen


def viewer(
    path: Path,
    tokenizer: str | None = None,
    theme: str | None = None,
    identical_alert: float = 0.5,
    order: str = "file",
    follow: bool = False,
    check_terminal: bool = False,
) -> tuple[VftuiApp, GroupFile]:
    """The dashboard on ``path``'s groups, named as what the user opened (vf-eval's results are read
    from a copy in the cache, named as their eval), and its rows."""
    stream = prime_rl.stream_of(path.expanduser()) if follow else None
    mirror = prime_rl.Live(stream) if stream is not None else None  # a prime-rl run, live
    opened, named = (mirror.path, mirror.named) if mirror is not None else viewed(path)
    if check_terminal and not has_screen():
        raise UserError("vftui view needs a terminal")
    ours = themes.available_themes()
    theme_name = themes.resolve(theme, ours=ours)
    rows = GroupFile(opened, order, named)
    source = ViewedFile(Inbox(), rows, str(TOKENIZER_DIR), tokenizer or "", follow, mirror)
    app = VftuiApp(
        source, identical_alert=identical_alert, theme_name=theme_name, extra_themes=ours
    )
    return app, rows


def run_viewer(
    path: Path,
    tokenizer: str | None,
    theme: str | None,
    identical_alert: float,
    order: str,
    follow: bool = False,
) -> int:
    """``follow``: another process still writes the file; new lines show until the view is closed."""
    app, rows = viewer(path, tokenizer, theme, identical_alert, order, follow, check_terminal=True)
    app.run()
    if rows.skipped:
        print(
            one_line(
                f"vftui view: {rows.skipped} malformed lines in {rows.path} were skipped (see the log panel)"
            ),
            file=sys.stderr,
        )
    for warning in rows.warnings:
        print(one_line(f"vftui view: warning: {rows.path}: {warning}"), file=sys.stderr)
    return app.return_code or 0  # 1 when the app crashed: a crash never exits 0
