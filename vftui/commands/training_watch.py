"""``vftui watch RUN_DIR``: a prime-rl run followed live, in the training dashboard or as lines.

Headless (``--no-ui``, or no terminal), one line a poll: the step, the health and why, the key
figures; every new note and log warning on a line of its own. ``--count`` stops after that many
polls. ``--notify`` runs when the health changes while it is followed.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from vftui.commands.status import notify_command
from vftui.commands.tokens import load_decoder
from vftui.text.printable import one_line, say
from vftui.training.check_in import figure, step_line
from vftui.training.follow import Follower, Snapshot
from vftui.training.layout import find
from vftui.ui.terminal import has_screen

KEY_LABELS = ("reward", "entropy", "mismatch kl", "grad norm", "trainer step", "orchestrator step")


def line(snap: Snapshot) -> str:
    o = snap.overview
    figures = [f for f in o.progress + o.stability + o.performance if f.label in KEY_LABELS]
    alerts = [a.name for a in snap.verdict.alerts if a.level != "note"]
    why = f" ({', '.join(alerts)})" if alerts else ""
    return f"step {step_line(snap)} {snap.verdict.word}{why} | " + ", ".join(map(figure, figures))


def _notifier(notify: str | None):
    if not notify:
        return None

    def changed(snap: Snapshot, before: str) -> None:
        threading.Thread(target=notify_command, args=(notify, snap, before), daemon=True).start()

    return changed


def run_training_watch(
    target: Path,
    every_s: float,
    no_ui: bool,
    count: int | None,
    theme: str | None,
    inference: list[str],
    notify: str | None,
    with_runs: list[Path] | None = None,
) -> int:
    run = find(target)
    follower = Follower(run, inference)
    others = [Follower(find(other)) for other in with_runs or []]
    if no_ui or not has_screen():
        return _headless(follower, every_s, count, notify)
    from vftui.ui import themes
    from vftui.ui.training.app import TrainingApp

    ours = themes.available_themes()
    name = run.settings().model
    app = TrainingApp(
        follower,
        every_s,
        themes.resolve(theme, ours=ours),
        ours,
        _notifier(notify),
        lambda: load_decoder(name, given=False),
        others,
    )
    app.run()
    return 0


def _headless(follower: Follower, every_s: float, count: int | None, notify: str | None) -> int:
    said_notes, word = 0, ""
    polls = 0
    while True:
        follower.poll()
        snap = follower.snapshot()
        for note in snap.notes[said_notes:]:
            say(f"note: {note}", sys.stdout)
        said_notes = len(snap.notes)
        for log in follower.new_logs:
            say(f"log: {log.file} {log.time} {log.level}: {one_line(log.message)}", sys.stdout)
        say(line(snap), sys.stdout)
        if word and word != snap.verdict.word and notify:
            notify_command(notify, snap, word)
        word = snap.verdict.word
        polls += 1
        if count is not None and polls >= count:
            return 0
        time.sleep(every_s)
