"""``vftui view FILE.jsonl``: a saved groups file in the dashboard's panels."""

from __future__ import annotations

import sys
from pathlib import Path

from vftui.errors import UserError
from vftui.groupfile import replay
from vftui.printable import printable
from vftui.sim.server import TOKENIZER_DIR
from vftui.ui import themes
from vftui.ui.app import VftuiApp
from vftui.ui.inbox import Inbox


def run_viewer(path: Path, tokenizer: str | None, theme: str | None, identical_alert: float, order: str) -> int:
    if path.is_dir():
        raise UserError(f"{path} is a folder; name a .jsonl file in it")
    if not path.is_file():
        raise UserError(f"no such file: {path}")
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise UserError("vftui view needs a terminal")
    events, skipped = replay(path, tokenizer or "", order)
    started = events[0]
    if not started.tokenizer and started.simulated:
        events[0] = type(started)(**{**started.__dict__, "tokenizer": str(TOKENIZER_DIR)})
    ours = themes.available_themes()
    theme_name = themes.resolve(theme, ours=ours)
    inbox = Inbox()
    for event in events:
        inbox.put(event)
    app = VftuiApp(
        inbox,
        window=max(1, started.groups_total),
        identical_alert=identical_alert,
        theme_name=theme_name,
        extra_themes=ours,
    )
    app.run()
    if skipped:
        print(printable(f"vftui view: {skipped} malformed lines in {path} were skipped (see the log panel)"),
              file=sys.stderr)
    return app.return_code or 0  # 1 when the app crashed: a crash never exits 0
