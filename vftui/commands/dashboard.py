"""The live view: the Textual dashboard over a collector run, then the summary.

The run goes to a child process (``live.process``) and the app opens at once, showing
the child's preparation steps (libraries, environment, endpoint, tokenizer) as they come. A
setting the child refuses closes the app and is printed as its one sentence (exit 2). The
run's events reach the app through the inbox, the app's thread worker waits for its
summary, and keys go to its controls. After the app exits, the summary and the output path
are printed to the terminal, as in the headless view.
"""

from __future__ import annotations

import sys

from vftui.collector.child import child_main
from vftui.commands import run_end
from vftui.config import RunConfig
from vftui.errors import EXIT_FAILED, EXIT_INTERRUPTED
from vftui.live.process import STOPPED_HARD, CollectorProcess
from vftui.text.printable import say
from vftui.ui import themes
from vftui.ui.inbox import Inbox


def run_dashboard(config: RunConfig) -> int:
    ours = themes.available_themes()
    theme = themes.resolve(config.theme, ours=ours)
    inbox = Inbox()
    collector = CollectorProcess(config, inbox.put, target=child_main).start()
    try:
        # the app's widgets and screens load here while the child loads the collector's libraries
        from vftui.ui.app import VftuiApp
        from vftui.ui.feeds import StartedRun

        app = VftuiApp(
            StartedRun(inbox, collector),
            window=config.window,
            identical_alert=config.identical_alert,
            theme_name=theme,
            extra_themes=ours,
        )
        summary = app.run()
    finally:
        collector.close()
    if (
        collector.interrupted
    ):  # stopped while it was prepared: as Ctrl-C before any run (the CLI says so, 130)
        raise KeyboardInterrupt
    if collector.refusal is not None:
        raise collector.refusal
    if summary is None and collector.stopped_hard:
        say(f"vftui: {STOPPED_HARD}", sys.stderr)
        return EXIT_INTERRUPTED
    if summary is None:
        print("vftui: the dashboard closed before the run ended", file=sys.stderr)
        return EXIT_FAILED
    simulated = collector.prepared is not None and collector.prepared.simulated
    say([*app.eval_lines(), *run_end.summary(summary, simulated)], sys.stderr)
    return run_end.exit_code(summary)
