"""``vftui compare`` in a terminal: the sources' figures side by side, the items by how much they
changed (worst first), and the selected item's rollouts in each source side by side.

Everything here is computed once from the files (``comparison``); the app only shows it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Static

from vftui.figures.comparison import Change, Summary
from vftui.text.printable import printable
from vftui.text.wording import figure, number
from vftui.ui import themes
from vftui.ui.lean_output import lean_driver
from vftui.ui.widgets.token_preview import message_pieces


def shown(text: str) -> Text:
    """Text from the files as it is: its control characters as signs (``printable``), its brackets never markup."""
    return Text(printable(text))


def rollout_text(messages: list[dict], title: str) -> Text:
    """One rollout as text, as the dashboard's preview shows messages: the model's words bright, the rest dim."""
    text = Text(title + "\n", style="bold")
    for piece, style in message_pieces(messages):
        text.append(piece, style=style)
    return text


class CompareApp(App[None]):
    CSS_PATH = "compare.tcss"
    TITLE = "vftui compare"
    BINDINGS = [
        Binding(
            "n",
            "next_rollout",
            "next rollout",
            tooltip="the next rollout of the item in both sources (or enter)",
        ),
        Binding("q,ctrl+c", "quit", "quit", priority=True),
    ]

    def __init__(
        self,
        summaries: list[Summary],
        change: Change,
        header: str,
        theme_name: str = "vftui-dark",
        extra_themes=None,
    ) -> None:
        super().__init__()
        self.summaries, self.change, self.header = summaries, change, header
        self.letters = [chr(ord("A") + i) for i in range(len(summaries))]
        self.rollout = 0
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(shown(self.header), id="compare-header")
        yield DataTable(id="figures", cursor_type="none", zebra_stripes=True)
        yield DataTable(id="items", cursor_type="row")
        with Horizontal(id="sides"):
            for letter in self.letters[:2]:
                yield Static(id=f"side-{letter}", classes="side")
        yield Footer()

    def on_mount(self) -> None:
        figures = self.query_one("#figures", DataTable)
        figures.add_columns("", *self.letters)
        rows = [
            ("items", [str(len(s.source.items)) for s in self.summaries]),
            ("errors", [str(s.source.errors) for s in self.summaries]),
            ("reward", [figure(s.reward.as_dict()) for s in self.summaries]),
            ("pass@1", [figure(s.pass1.as_dict()) for s in self.summaries]),
            ("truncated", [f"{s.truncated:.1%}" for s in self.summaries]),
            ("identical", [f"{s.identical:.1%}" for s in self.summaries]),
            ("completion", [f"{s.completion_chars:.0f} chars" for s in self.summaries]),
        ]
        names = sorted({n for s in self.summaries for n in s.functions})
        rows += [
            (
                n,
                [
                    figure(s.functions[n].as_dict()) if n in s.functions else "-"
                    for s in self.summaries
                ],
            )
            for n in names
        ]
        for label, values in rows:
            figures.add_row(
                shown(label), *values
            )  # a reward function's name is the environment's text
        items = self.query_one("#items", DataTable)
        items.border_title = f"items by change, B - A, worst first ({self.change.paired} in both)"
        items.add_columns("item", "A", "B", "change")
        for c in self.change.items:
            style = "red" if c.change < 0 else "green" if c.change > 0 else ""
            items.add_row(
                shown(c.key),
                number(c.before),
                number(c.after),
                Text(number(c.change, "+"), style=style),
                key=c.key,
            )
        items.focus()
        self.show_sides()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.rollout = 0
        self.show_sides()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_next_rollout()  # enter on an item: its next rollout, as in the dashboard

    def action_next_rollout(self) -> None:
        self.rollout += 1
        self.show_sides()

    def show_sides(self) -> None:
        """The highlighted item's rollout ``self.rollout`` in A and in B."""
        items = self.query_one("#items", DataTable)
        if not self.change.items:
            return
        key = self.change.items[min(items.cursor_row, len(self.change.items) - 1)].key
        for letter, summary in zip(self.letters[:2], self.summaries[:2], strict=True):
            item = summary.source.items[key]
            n = self.rollout % len(item.rollouts)
            title = f"{letter} · item {key} · rollout {n + 1}/{len(item.rollouts)} · reward {number(item.rewards[n])}"
            self.query_one(f"#side-{letter}", Static).update(
                rollout_text(item.rollouts[n], printable(title))
            )
