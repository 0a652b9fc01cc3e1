"""The training dashboard's section panels: one row per figure, its newest value and a sparkline over steps."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from vftui.text.printable import one_line
from vftui.training.check_in import engine_lines, figure
from vftui.training.follow import Snapshot
from vftui.training.overview import SECTIONS, Figure


class FigureRow(Horizontal):
    """One figure: ``label value`` and its values over the window."""

    def __init__(self, label: str) -> None:
        super().__init__(classes="figure-row")
        self.label = label

    def compose(self) -> ComposeResult:
        yield Static(self.label, classes="figure-text")
        yield Sparkline([], classes="figure-chart")

    def show(self, found: Figure | None, values: list[float], alerting: bool) -> None:
        self.display = found is not None
        if found is None:
            return
        text = Text(figure(found), style="bold yellow" if alerting else "")
        self.query_one(".figure-text", Static).update(text)
        self.query_one(Sparkline).data = values


class SectionPanel(Vertical):
    """Progress, stability or performance: its figures in prime-rl's overview order."""

    def __init__(self, section: str) -> None:
        super().__init__(id=section, classes="section")
        self.section = section
        self.border_title = section

    def compose(self) -> ComposeResult:
        for label in SECTIONS[self.section]:
            yield FigureRow(label)
        yield Static(classes="section-extra")

    def show(self, snap: Snapshot, charts: dict[str, list[float]], alerting: set[str]) -> None:
        figures = {f.label: f for f in getattr(snap.overview, self.section)}
        for row in self.query(FigureRow):
            found = figures.pop(row.label, None)
            values = charts.get(found.name, []) if found else []
            row.show(found, values, row.label in alerting)
        extra = Text()
        for found in figures.values():  # eval scores: names vary with envs and k
            extra.append(one_line(figure(found)) + "\n")
        if self.section == "performance" and snap.overview.waits:
            extra.append(snap.overview.waits, style="italic")
        self.query_one(".section-extra", Static).update(extra)


class InferencePanel(Static):
    def __init__(self) -> None:
        super().__init__(id="inference", classes="section")
        self.border_title = "inference"

    def show(self, snap: Snapshot) -> None:
        if not snap.engines:
            self.update(
                Text("no engines read: pass --inference-metrics URL (vLLM's /metrics)", style="dim")
            )
            return
        self.update("\n".join(engine_lines(snap)))
