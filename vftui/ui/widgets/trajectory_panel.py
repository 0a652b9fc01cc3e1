"""The trajectory API as a trainer sees it: registered trainer, steps, queue, our groups."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui import stats
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.quiet_static import QuietStatic


def api_state(model: DashboardModel) -> tuple[str, str]:
    """The one-line state and its style, worst news first."""
    api = model.api
    if model.api_trouble is not None or (api is not None and not api.reachable):
        return "API unreachable (retrying)", "bold red"
    if model.trouble is not None:
        return "inference server unreachable (retrying)", "bold red"
    if api is None:
        return ("waiting for a trainer" if model.detail.startswith("waiting") else "connecting…"), "bold yellow"
    if not api.trainer_registered:
        return "waiting for a trainer", "bold yellow"
    return f"trainer registered · batch {api.batch_size}", "bold green"


def render_api(model: DashboardModel, live_run: bool) -> Text:
    state, style = api_state(model)
    text = Text(state, style=style)
    api = model.api
    if api is not None and api.reachable:
        text.append(f"\nstep {api.current_step}", style="bold").append("  (batches pulled)", style="dim")
        text.append(f"\nqueue {api.queue_size} groups")
        if api.env_weight is not None:
            text.append(f"  weight {api.env_weight:.2f}")
    if live_run:
        hard, easy = model.dropped.get(stats.TOO_HARD, 0), model.dropped.get(stats.TOO_EASY, 0)
        text.append(f"\nsent {model.groups_done}  dropped {sum(model.dropped.values())}")
        text.append(f" (identical: {hard} too hard, {easy} too easy)", style="yellow" if hard + easy else "dim")
    return text


class TrajectoryPanel(Vertical):
    def compose(self):
        yield QuietStatic(id="api-text")
        yield Sparkline([], id="queue-sparkline")

    def show(self, model: DashboardModel) -> None:
        live_run = model.started is not None
        text = render_api(model, live_run)
        self.query_one("#api-text", QuietStatic).show_if_changed(text.markup, lambda: text)
        self.query_one(Sparkline).data = list(model.queue_history)
