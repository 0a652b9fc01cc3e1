"""The trajectory API as a trainer sees it: registered trainer, steps, queue, our groups."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from vftui import stats
from vftui.text import wording
from vftui.text.printable import printable
from vftui.text.wording import WAITING_FOR_TRAINER, trainer_state
from vftui.ui.model import HISTORY, DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel


def api_state(model: DashboardModel) -> tuple[str, str]:
    """The one-line state and its style, worst news first."""
    api = model.api_status
    if model.trajectory_trouble is not None or (api is not None and not api.reachable):
        return "API unreachable (retrying)", "bold red"
    if model.endpoint_trouble is not None:
        return "inference server unreachable (retrying)", "bold red"
    if api is None:
        return (
            WAITING_FOR_TRAINER if model.detail.startswith("waiting") else "connecting…"
        ), "bold yellow"
    return trainer_state(api), "bold green" if api.trainer_registered else "bold yellow"


def api_figures(model: DashboardModel) -> tuple:
    """What the panel shows: the state, the API's counters when it answers, our groups in a live run."""
    api = model.api_status
    counters = None
    if api is not None and api.reachable:
        counters = (
            api.current_step,
            api.queue_size,
            api.env_weight,
            api.self_queue_size,
            api.workers,
            api.workers_allowed,
            api.lag,
            tuple(printable(wording.env_share(e)) for e in api.envs),
        )
    ours = None
    if model.run_started is not None:
        dropped = model.dropped
        ours = (
            model.groups_done,
            sum(dropped.values()),
            dropped.get(stats.TOO_HARD, 0),
            dropped.get(stats.TOO_EASY, 0),
        )
    return api_state(model), counters, ours


def render_api(figures: tuple) -> Text:
    (state, style), counters, ours = figures
    text = Text(state, style=style)
    if counters is not None:
        step, queue, weight, ours_queued, workers, allowed, lag, runs = counters
        text.append(f"\nstep {step}", style="bold").append("  (batches pulled)", style="dim")
        text.append(f"\nqueue {queue} groups")
        if weight is not None:
            text.append(f"  weight {weight:.2f}")
        if ours_queued is not None:
            text.append(f"\nours queued {ours_queued}")
        if allowed is not None:
            text.append(
                f"  {wording.workers(workers, allowed)}", style="yellow" if allowed == 0 else ""
            )
        if lag is not None:
            text.append(f"\n{wording.lag(lag)}").append("  (off-policy)", style="dim")
        for run in runs:
            text.append(f"\n{run}")
    if ours is not None:
        sent, dropped, hard, easy = ours
        text.append(f"\nsent {sent}  dropped {dropped}")
        text.append(
            f"\nidentical: {hard} too hard, {easy} easy", style="yellow" if hard + easy else "dim"
        )
    return text


class ApiText(FiguresPanel[tuple]):
    def render_figures(self, figures: tuple) -> Text:
        return render_api(figures)


class TrajectoryPanel(Vertical):
    BORDER_TITLE = "trajectory API"

    def compose(self):
        yield ApiText(id="api-text")
        yield Static(f"queue (groups), its last {HISTORY} polls:", id="queue-label")
        yield Sparkline([], id="queue-sparkline")

    def show(self, model: DashboardModel) -> None:
        self.query_one(ApiText).figures = api_figures(model)
        self.query_one(Sparkline).data = list(model.queue_history)
