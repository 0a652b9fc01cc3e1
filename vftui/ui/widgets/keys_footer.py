"""Textual's footer with its keys in the first frame.

Textual's ``Footer`` composes empty until its screen signals that its bindings changed, which comes
a refresh after the focus settles, and then recomposes a refresh later: the first frames had no keys,
for seconds on a busy machine, while the app waited for its run. The app's keys are known when the
footer is composed, so it composes them at once; every later change still recomposes it.
"""

from __future__ import annotations

from textual.widgets import Footer


class KeysFooter(Footer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.set_reactive(Footer._bindings_ready, True)
