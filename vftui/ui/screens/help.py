"""``?``: every key, with what it does, built from the bindings themselves."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static


def key_names(binding: Binding) -> str:
    """``space,p`` as ``space / p``; ``question_mark`` as ``?``; a ``key_display`` as it is."""
    return binding.key_display or " / ".join(
        format_key(key.strip()) for key in binding.key.split(",")
    )


def help_rows(bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
    """A row for each thing the keys do (a binding's tooltip, else its description), with all its keys."""
    keys: dict[str, list[str]] = {}
    for binding in bindings:
        if not isinstance(binding, Binding):  # a (key, action) tuple: none here says what it does
            continue
        if text := binding.tooltip or binding.description.lower():  # Textual's own are capitalized
            keys.setdefault(text, []).append(key_names(binding))
    return [(" / ".join(names), text) for text, names in keys.items()]


class HelpScreen(ModalScreen[None]):
    # its own style, so every app's ? (the dashboard's, compare's) shows the same box
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    #help-box {
        width: 84;
        max-width: 90%;
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: thick $primary;
        background: $surface;
    }
    #help-keys {
        height: auto;
        max-height: 70vh;  /* the box's border, padding and title fit around it on a 24-row terminal */
    }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self._rows = rows

    def compose(self):
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for keys, description in self._rows:
            table.add_row(Text(keys), Text(description))
        with Vertical(id="help-box"):
            yield Static(
                "[b]vftui keys[/b]  (esc closes; up, down and the mouse scroll)", id="help-title"
            )
            with VerticalScroll(id="help-keys"):  # a small terminal scrolls to the last keys
                yield Static(table)

    def on_mount(self) -> None:
        self.query_one("#help-keys").focus()
