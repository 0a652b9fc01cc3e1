"""``h``: the run's health, live: its alerts and their reasons first, then length and truncation, drops,
requests, the trainer and the inference servers."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from vftui.events import ServerStatus
from vftui.figures.signals import SIGNALS
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import ChangedLines


def fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def server_line(server: ServerStatus) -> Text:
    """One inference server: atroposlib's health check, its requests, and its /metrics where it has them."""
    text = Text("up" if server.healthy else "DOWN", style="green" if server.healthy else "bold red")
    text.append(
        f", {server.requests} requests, {server.retries} retries, latency p50 "
        f"{fmt(server.latency_p50_s, '.2f')} s p95 {fmt(server.latency_p95_s, '.2f')} s"
    )
    if server.running is not None or server.waiting is not None:
        text.append(f", running {fmt(server.running, 'g')} waiting {fmt(server.waiting, 'g')}")
    if server.kv_cache is not None:
        text.append(f", KV cache {server.kv_cache:.0%}")
    if server.metrics_note:
        text.append(f" ({server.metrics_note})", style="dim")
    return text


def render_health(model: DashboardModel) -> Table | Text:
    health = model.health
    if health is None:
        return Text("no health figures yet: a live run sends them once a second", style="dim")

    def signal(name: str, spec: str) -> str:
        """The signal's value and, beside it, the threshold its alert starts above."""
        limit = health.thresholds.get(name)
        beside = f" (alert > {format(limit, spec)})" if limit is not None else ""
        return fmt(health.signals.get(name), spec) + beside

    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    # the alerts first: the rows below grow with the servers and can run past a short screen
    if not model.alerts:
        table.add_row(Text("alerts", style="bold green"), Text("none", style="green"))
    for alert in model.alerts.values():
        now = health.signals.get(
            alert.name
        )  # said with today's value: the one it fired at is stale
        reason = (
            SIGNALS[alert.name].reason.format(value=now, threshold=alert.threshold)
            if now is not None and alert.name in SIGNALS
            else alert.reason
        )
        table.add_row(Text(f"⚠ {alert.name}", style="bold yellow"), Text(reason, style="yellow"))
    table.add_row("", "")
    finishes = (
        ", ".join(f"{reason} {count}" for reason, count in sorted(health.finish_reasons.items()))
        or "-"
    )
    signals = health.signals
    table.add_row("window", f"{health.groups} groups")
    table.add_row("finish reasons", finishes)
    table.add_row("truncated", signal("truncated", ".1%"))
    table.add_row("identical scores", signal("identical", ".1%"))
    table.add_row(
        "completion tokens",
        f"mean {health.completion_mean:g}, p95 {health.completion_p95:g}, "
        f"fell by {signal('collapse', '.0%')}",
    )
    table.add_row(
        "reward", f"all scored {fmt(health.reward_all)}, trainable {fmt(health.reward_trainable)}"
    )
    dropped = (
        "; ".join(f"{count} {reason}" for reason, count in sorted(health.dropped.items())) or "none"
    )
    table.add_row("dropped", Text(dropped))
    table.add_row(
        "requests",
        f"failed {signal('errors', '.1%')}, "
        f"latency p50 {fmt(health.latency_p50_s, '.2f')} s "
        f"p95 {fmt(health.latency_p95_s, '.2f')} s, {fmt(health.tokens_per_s, ',.0f')} tok/s",
    )
    table.add_row("since the last group", f"{signal('stall', '.0f')} s")
    api = model.api_status
    if api is not None and api.reachable and api.workers_allowed is not None:
        table.add_row(
            "trainer",
            f"step {api.current_step}, {fmt(signals.get('trainer_stall'), '.0f')} s since it "
            f"stepped with groups waiting, lag {fmt(signals.get('lag'), '.0f')} steps, "
            f"workers {api.workers}/{api.workers_allowed}",
        )
    for server in model.servers.values():
        table.add_row(Text(server.url, overflow="ellipsis"), server_line(server))
    hacking = ", ".join(
        f"{name} {signal(name, '.2f')}"
        for name in ("dominance", "divergence", "saturation", "jump")
    )
    table.add_row("reward hacking", hacking)
    return table


class ModelScreen(ModalScreen[None]):
    """A screen over the dashboard that the app hands the model on every tick once it is composed (a tick
    between its push and its compose found none of its widgets)."""

    def __init__(self, model: DashboardModel) -> None:
        super().__init__()
        self._model = model
        # once its widgets are there: ``is_mounted`` comes before they are (under load)
        self.drawn = False

    def on_mount(self) -> None:
        self.show(self._model)
        self.drawn = True

    def show(self, model: DashboardModel) -> None:
        raise NotImplementedError


class HealthScreen(ModelScreen):
    """Shown over the dashboard; the app redraws it with the model on every tick."""

    BINDINGS = [Binding("escape,h,q", "dismiss", "close")]

    def compose(self):
        with Vertical(id="health-box"):
            yield Static(
                "[b]run health[/b]  (over the recent window; esc closes)", id="health-title"
            )
            yield ChangedLines(id="health-body")

    def show(self, model: DashboardModel) -> None:
        self.query_one(ChangedLines).draw(render_health(model))
