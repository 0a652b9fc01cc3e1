"""``vftui attach [RUN]``: the full dashboard on a run that lives on its own.

The run (headless, detached, or another terminal's dashboard) keeps going whatever this
dashboard does; every key works as in the dashboard that starts a run. Quitting asks
whether to stop the run or leave it running; a dropped terminal leaves it running.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vftui.commands import run_end
from vftui.errors import EXIT_OK, UserError
from vftui.live.client import AttachedRun
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import find_running
from vftui.text import wording
from vftui.text.printable import say
from vftui.ui import themes
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import AttachedTo
from vftui.ui.inbox import Inbox
from vftui.ui.terminal import has_screen


def run_attach(target: Path | None, theme: str | None) -> int:
    run = find_running(target)
    if not has_screen():
        raise UserError("vftui attach needs a terminal (vftui runs lists runs without one)")
    ours = themes.available_themes()
    theme_name = themes.resolve(theme, ours=ours)
    inbox = Inbox()
    attached = AttachedRun(RunFiles(run.out_path).socket, inbox.put).start()
    try:
        app = VftuiApp(AttachedTo(inbox, attached), theme_name=theme_name, extra_themes=ours)
        app.run()
    finally:
        attached.close()
    if app.left_running or attached.summary is None:
        say(wording.left_running(run.pid, run.out_path), sys.stderr)
        return EXIT_OK
    simulated = app.model.run_started is not None and app.model.run_started.simulated
    say([*app.eval_lines(), *run_end.summary(attached.summary, simulated)], sys.stderr)
    return run_end.exit_code(attached.summary)
