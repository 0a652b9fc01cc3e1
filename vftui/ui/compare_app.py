"""``vftui compare`` in a terminal: the answer first (each later source's change against A with its interval,
McNemar's test where items pair and pass@k's change, the ``--fail-if-worse`` verdict, a line each), then
the sources' figures and how they were made side by side, the items by how much they changed (worst
first, each marked where it flipped between pass and fail), and the selected item's rollouts in A and
B, opened at the two that differ most.

Everything here is computed once from the files (``comparison``); the app only shows it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from vftui.comparing import compared
from vftui.comparing.comparison import (
    Change,
    Summary,
    histograms,
    source_series,
    widest_pair,
    worse_beyond,
)
from vftui.text.printable import one_line, printable
from vftui.text.wording import number
from vftui.ui import themes
from vftui.ui.lean_output import lean_driver
from vftui.ui.palette import KeyCommands
from vftui.ui.screens.help import HelpScreen, help_rows
from vftui.ui.widgets.keys_footer import KeysFooter
from vftui.ui.widgets.token_preview import message_pieces


def shown(text: str) -> Text:
    """Text from the files as it is: its control characters as signs (``printable``), its brackets never markup."""
    return Text(printable(text))


MESSAGE_CHARS = (
    20_000  # of one message shown, as the report cuts it: a 50 MB answer stalled the screen
)


def rollout_text(messages: list[dict]) -> Text:
    """One rollout as text, as the dashboard's preview shows messages: the model's words bright, the rest
    dim; a message past ``MESSAGE_CHARS`` is cut, saying how much more there is."""
    text = Text()
    for piece, style in message_pieces([_cut(m) for m in messages]):
        text.append(piece, style=style)
    return text


def _cut(message: dict) -> dict:
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= MESSAGE_CHARS:
        return message
    more = len(content) - MESSAGE_CHARS
    return {
        **message,
        "content": f"{content[:MESSAGE_CHARS]}… {more:,} more characters, in the file",
    }


ALL = "all"  # a fact every source shares, in one row
# the columns how the sources differ needs to have a table of its own, beside the figures
SETUP_ROOM = 44
TABLE_KEYS = [  # what the tables' own bindings do here, said once for the help
    Binding(
        "up,down,pageup,pagedown,home,end",
        "",
        "",
        key_display="↑ ↓ pgup pgdn home end",
        tooltip="an item, opened at the rollouts of A and B that differ most",
    ),
    Binding("tab,shift+tab", "", "", tooltip="the next table (a focused table scrolls)"),
]


class CompareApp(App[None]):
    CSS_PATH = ["compare.tcss", "charts.tcss"]
    TITLE = "vftui compare"
    COMMANDS = App.COMMANDS | {KeyCommands}  # ctrl+p: the keys of the screen in front too
    # -low: no line of each function's change (the figures have each function's mean)
    VERTICAL_BREAKPOINTS = [(0, "-low"), (28, "-tall")]
    BINDINGS = [
        Binding(
            "n",
            "next_rollout",
            "next rollout",
            tooltip="the item's next rollout in A and in B (or enter)",
        ),
        Binding("g", "charts", "charts", tooltip="the sources overlaid: reward, length, rates"),
        Binding("question_mark", "help", "help", tooltip="this list"),
        Binding("q,ctrl+c", "quit", "quit", priority=True),
    ]

    def __init__(
        self,
        summaries: list[Summary],
        changes: list[Change],
        margin: float | None = None,
        theme_name: str = "vftui-dark",
        extra_themes=None,
    ) -> None:
        super().__init__()
        self.summaries, self.changes, self.margin = summaries, changes, margin
        self.letters = compared.letters(len(summaries))
        self.pair = (
            0,
            0,
        )  # the rollouts of the highlighted item shown first: those that differ most
        self.rollout = 0  # how many rollouts on from them (enter, n)
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(self.title_line(), id="compare-header")
        yield Static(self.answer(), id="answer")
        if by_function := self.by_function():
            yield Static(by_function, id="by-function")
        with Horizontal(id="tables"):
            yield DataTable(id="figures", cursor_type="none", zebra_stripes=True)
            yield DataTable(id="setup", cursor_type="none", show_header=False)
        yield DataTable(id="items", cursor_type="row")
        with Horizontal(id="sides"):
            for letter in self.letters[:2]:
                yield Static(id=f"side-{letter}", classes="side")
        yield KeysFooter()

    def title_line(self) -> Text:
        """The environment, and which source each letter stands for."""
        env = next((s.source.env_id for s in self.summaries if s.source.env_id), "")
        text = Text(f"{one_line(env) or 'compare'}: ", style="bold")
        for n, (letter, summary) in enumerate(zip(self.letters, self.summaries, strict=True)):
            text.append(f"{' · ' if n else ''}{letter} ", style="bold")
            text.append(f"{one_line(str(summary.source.path))} ({summary.source.kind})")
        return text

    def answer(self) -> Text:
        """Each later source's change against A and its meaning, its pass@k and McNemar's test of pass/fail,
        then (with --fail-if-worse) the verdicts."""
        text = Text()
        for letter, change in zip(self.letters[1:], self.changes, strict=True):
            style = "red" if compared.meaning(change).startswith("worse") else "bold"
            text.append(compared.change_line(letter, change) + "\n", style=style)
            tested = [compared.mcnemar(change.flips)] if change.flips else []
            text.append("  " + " · ".join([*tested, compared.pass_changes(change)]) + "\n")
        if self.margin is not None:
            failed = any(worse_beyond(c, self.margin) for c in self.changes)
            said = compared.verdicts(self.letters[1:], self.changes, self.margin)
            text.append(said, style="bold red" if failed else "green")
        text.rstrip()
        return text

    def by_function(self) -> Text:
        """Each reward function's change, as the reward's (a low terminal leaves it out: the figures have them)."""
        lines = [
            f"{letter} - A by function: {one_line(functions)}"
            for letter, change in zip(self.letters[1:], self.changes, strict=True)
            if (functions := compared.function_changes(change))
        ]
        return Text("\n".join(lines), style="dim")

    def on_mount(self) -> None:
        items = self.query_one("#items", DataTable)
        change = self.changes[0]
        drops, gains = (
            sum(1 for c in change.items if c.change < 0),
            sum(1 for c in change.items if c.change > 0),
        )
        items.border_title = (
            f"items by change, B - A, worst first ({change.paired} in both: {drops} dropped, "
            f"{gains} gained)"
        )
        items.add_columns("item", "A", "B", "change", "pass/fail")
        lost, gained = (
            (set(change.flips.lost), set(change.flips.gained)) if change.flips else (set(), set())
        )
        for c in change.items:
            style = "red" if c.change < 0 else "green" if c.change > 0 else ""
            flip = (
                Text("pass -> fail", style="red")
                if c.key in lost
                else Text("fail -> pass", style="green")
                if c.key in gained
                else ""
            )
            items.add_row(
                shown(c.key),
                number(c.before),
                number(c.after),
                Text(number(c.change, "+"), style=style),
                flip,
                key=c.key,
            )
        items.focus()
        self.open_item()

    def on_resize(self) -> None:
        self.call_after_refresh(self.fill_tables)  # once the tables are mounted

    def fill_tables(self) -> None:
        """The figures, and how the sources were made: beside them where the terminal is wide enough, else
        on top of them in the one table; each value cut to the room its column has."""
        setup = compared.setup_rows(self.summaries)
        differ = compared.differing(setup)
        said = f"how they differ: {', '.join(differ)}" if differ else "made alike"
        low, high, counts = histograms(self.summaries)
        rows = compared.figure_rows(self.summaries)
        span = (
            compared.reward_range(low, high)
            if high > low
            else f"({compared.histogram_span(low, high)})"
        )
        rows.insert(2, (f"histogram {span}", [compared.bars(c) for c in counts]))
        label = max(len(name) for name, _ in setup + rows)
        columns = [max(len(values[n]) for _, values in rows) for n in range(len(self.letters))]
        # its border, its scrollbar, a cell's padding each side: as wide as its figures, the rest beside
        wanted = label + sum(columns) + 2 * (len(columns) + 1) + 4
        narrow = self.size.width - wanted < SETUP_ROOM
        self.screen.set_class(narrow, "-one-table")
        width = self.size.width if narrow else wanted
        figures = self.query_one("#figures", DataTable)
        figures.styles.width = width
        about = "figures (± 95% interval over items)"
        figures.border_title = f"{said} · {about}" if narrow else about
        figures.clear(columns=True)
        figures.add_columns("", *self.letters)
        room = max(8, (width - label - 6) // len(self.letters) - 2)

        def add_setup(alike: bool) -> None:
            for name, values in setup:
                if narrow and (name in differ) != alike:
                    figures.add_row(
                        Text(name, style="dim" if alike else "bold"),
                        *(Text(compared.cut(one_line(v), room, name == "model")) for v in values),
                    )

        # in one table: what the sources differ in first, what they share after the figures
        add_setup(alike=False)
        for name, values in rows:  # a reward function's name is the environment's text
            figures.add_row(shown(name), *values)
        add_setup(alike=True)
        if not narrow:
            self.fill_setup(setup, differ, said, self.size.width - width - 4)

    def fill_setup(
        self, rows: list[tuple[str, list[str]]], differ: list[str], said: str, room: int
    ) -> None:
        """How the sources were made, beside the figures (``room`` columns inside its border and scrollbar):
        each fact they differ in, a line a source, then the facts they share in a line each."""
        setup = self.query_one("#setup", DataTable)
        setup.border_title = said
        label = max(len(name) for name, _ in rows)
        letters = max(len(self.letters) * 2 - 1, len(ALL))
        width = max(8, room - label - letters - 6)  # a cell's padding each side of 3 columns
        setup.clear(columns=True)
        setup.add_columns("fact", "of", "value")
        for name, values in sorted(rows, key=lambda row: row[0] not in differ):
            tail = name == "model"  # where checkpoints' ids differ
            if name not in differ:
                cell = Text(compared.cut(one_line(values[0]), width, tail), style="dim")
                setup.add_row(Text(name, style="dim"), Text(ALL, style="dim"), cell)
                continue
            for n, (letter, value) in enumerate(zip(self.letters, values, strict=True)):
                cell = Text(compared.cut(one_line(value), width, tail))
                setup.add_row(Text(name if n == 0 else "", style="bold"), letter, cell)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.open_item()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_next_rollout()  # enter on an item: its next rollout, as in the dashboard

    def action_next_rollout(self) -> None:
        self.rollout += 1
        self.show_sides()

    def action_help(self) -> None:
        """Every key from the bindings that hold it: the app's, the tables' and Textual's focus keys."""
        self.push_screen(HelpScreen(help_rows([*self.BINDINGS, *TABLE_KEYS])))

    def action_charts(self) -> None:
        from vftui.ui.screens.compare_charts import (  # textual-plot loads when first asked for
            CompareChartsScreen,
        )

        series = [source_series(s.source) for s in self.summaries]
        self.push_screen(CompareChartsScreen(self.letters, series))

    def highlighted(self) -> str | None:
        items = self.query_one("#items", DataTable)
        if not self.changes[0].items:
            return None
        return self.changes[0].items[min(items.cursor_row, len(self.changes[0].items) - 1)].key

    def open_item(self) -> None:
        """The highlighted item at the rollouts of A and B whose rewards differ most."""
        if (key := self.highlighted()) is not None:
            first, later = (s.source.items[key].rewards for s in self.summaries[:2])
            self.pair, self.rollout = widest_pair(first, later), 0
        self.show_sides()

    def show_sides(self) -> None:
        """The highlighted item's rollouts in A and in B, ``self.rollout`` on from the pair that differ most."""
        if (key := self.highlighted()) is None:
            return
        for letter, summary, start in zip(
            self.letters[:2], self.summaries[:2], self.pair, strict=True
        ):
            item = summary.source.items[key]
            n = (start + self.rollout) % len(item.rollouts)
            side = self.query_one(f"#side-{letter}", Static)
            side.border_title = one_line(
                f"{letter} · reward {number(item.rewards[n])} · rollout {n + 1}/{len(item.rollouts)} "
                f"· item {key}"
            )  # the reward first: a narrow side cuts the title's end
            side.update(rollout_text(item.rollouts[n]))
