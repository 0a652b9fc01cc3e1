"""The live view: the Textual dashboard over a collector run, then the summary.

The run is prepared here on the main thread (verifiers environments must be built
there), its events go through a queue to the app, and the collector itself runs in the
app's thread worker. After the app exits, the summary and the output path are printed
to the terminal, as in the headless view.
"""

from __future__ import annotations

import asyncio
import sys

from vftui.collector.runner import Run
from vftui.config import RunConfig
from vftui.events import RunState
from vftui.headless import EXIT_FAILED, HeadlessView, exit_code
from vftui.ui import themes
from vftui.ui.app import VftuiApp
from vftui.ui.inbox import Inbox


def run_dashboard(config: RunConfig) -> int:
    extra = themes.available_themes()
    theme = themes.resolve(config.theme, _textual_themes())
    inbox = Inbox()
    run = Run(config, inbox.put)
    try:
        run.prepare()
        app = VftuiApp(
            inbox,
            run.controls,
            execute=lambda: asyncio.run(run.execute(redirect_prints=False)),
            window=config.window,
            identical_alert=config.identical_alert,
            theme_name=theme,
            extra_themes=extra,
        )
        summary = app.run()
    finally:
        run.close()
    if summary is None:
        print("vftui: the dashboard closed before the run ended", file=sys.stderr)
        return EXIT_FAILED
    view = HeadlessView(json_events=False, simulated=run.plan is not None and run.plan.simulated)
    print(view.summary_text(summary), file=sys.stderr)
    return exit_code(summary) if summary.state is not RunState.FAILED else EXIT_FAILED


def _textual_themes() -> set[str]:
    from textual.theme import BUILTIN_THEMES

    return set(BUILTIN_THEMES)
