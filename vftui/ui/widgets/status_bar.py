"""The header: what runs where, its state, progress and speed, on two lines."""

from __future__ import annotations

import math

from rich.text import Text

from vftui.events import TRAJECTORY_API, EndpointTrouble, RequestStats, RunState
from vftui.text.printable import one_line
from vftui.text.wording import (
    PAUSED_AT_START,
    SIMULATION,
    clock,
    ended_as,
    groups_rate,
    in_flight,
    traffic_parts,
)
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import ChangedLines

STATE_STYLE = {
    RunState.STARTING: "bold",
    RunState.RUNNING: "bold green",
    RunState.PAUSING: "bold yellow",
    RunState.PAUSED: "bold yellow",
    RunState.STOPPING: "bold magenta",
    RunState.FINISHED: "bold cyan",
    RunState.FAILED: "bold red",
}
MIN_PATH = 12  # cells: less than this of a path tells nothing
ATTACHED = "ATTACHED"  # a run that lives on its own: quitting this dashboard may leave it running
STATE_LABEL = {RunState.PAUSING: "pausing…", RunState.STOPPING: "stopping…"}


class StatusBar(ChangedLines):
    """Attributes down: the app calls ``show`` with the model after each batch."""

    def show(self, model: DashboardModel) -> None:
        self.draw(render_status(model, self.content_size.width or 200))


def trouble_label(trouble: EndpointTrouble) -> str:
    return "API unreachable" if trouble.service == TRAJECTORY_API else "endpoint errors"


def temperature_text(model: DashboardModel) -> str:
    """The run's temperature now; a viewed file's range when its groups ran at several."""
    spread = model.rows.temperatures() if model.rows is not None else None
    if spread is not None and spread[0] != spread[1]:
        return f"{spread[0]:.2f}–{spread[1]:.2f}"
    known = model.temperature is not None and not math.isnan(model.temperature)
    return f"{model.temperature:.2f}" if known else "-"


def shorten_left(text: str, width: int) -> str:
    """``…/runs/x/groups.jsonl``: a path's end is what tells runs apart."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def shorten_path(path: str, width: int) -> str:
    """A run's path in ``width`` cells, its run folder (the run's id) kept whole where it fits:
    ``…/runs/<run>/groups.jsonl``, then ``…/<run>/…``; else its end, as ``shorten_left``."""
    if len(path) <= width:
        return path
    folder, _, name = path.rpartition("/")
    run = folder.rpartition("/")[2]
    if not run or len(f"…/{run}/{name}") <= width:
        return shorten_left(path, width)
    short = f"…/{run}/…"
    return short if len(short) <= width else shorten_left(path, width)


def run_id_cells(path: str) -> int:
    """The cells the path needs to show its run folder (``…/<run>/…``), or all of it if shorter."""
    run = path.rpartition("/")[0].rpartition("/")[2]
    return min(len(path), len(f"…/{run}/…"))


def traffic_that_fits(requests: RequestStats, width: int) -> str:
    """The traffic's figures that fit in ``width`` cells, most telling first; at least the requests in flight."""
    parts = traffic_parts(requests)
    fitting = (" · ".join(parts[:n]) for n in range(len(parts), 0, -1))
    return next((text for text in fitting if len(text) <= width), in_flight(requests))


def what_runs(model: DashboardModel) -> Text:
    """The header's first line: mode, env, model, marks (simulation, attached), temperature, endpoint."""
    s = model.run_started
    line1 = Text()
    if s is None:
        line1.append("vftui ", style="bold").append("starting…")
    else:
        label = (
            "view" if model.rows is not None else s.mode
        )  # a file is viewed, whatever mode wrote it
        line1.append(f"{label} ", style="bold").append(f"{s.env}  ").append(s.model, style="italic")
        if s.simulated:
            line1.append(f"  {SIMULATION}", style="bold reverse yellow")
    if model.attached:
        line1.append(f"  {ATTACHED}", style="bold reverse cyan")
    line1.append("  T=")
    line1.append(temperature_text(model), style="bold")
    if s is not None:
        line1.append(f"  {s.endpoint}", style="dim")  # last: the first thing a narrow terminal cuts
    return line1


def render_status(model: DashboardModel, width: int = 200) -> Text:
    s = model.run_started
    line1 = what_runs(model)
    line2 = Text()
    viewing = model.rows is not None  # a file: no speed, and its own detail
    label = STATE_LABEL.get(model.state, model.state.value)
    state_style = STATE_STYLE[model.state]
    if model.pause_asked and model.state is RunState.STARTING:
        label, state_style = PAUSED_AT_START, STATE_STYLE[RunState.PAUSED]
    if model.summary is not None:  # how it ended, as its summary and its controls say
        label = ended_as(model.summary.state, model.summary.groups_done, model.summary.groups_total)
    trouble = model.trajectory_trouble or model.endpoint_trouble
    if trouble is not None and model.state in (
        RunState.STARTING,
        RunState.RUNNING,
        RunState.PAUSING,
    ):
        line2.append(f"{trouble_label(trouble)} (retrying)", style="bold red")
    else:
        line2.append(label, style=state_style)
    if model.detail and model.state in (RunState.PAUSING, RunState.STOPPING):
        line2.append(
            f" ({model.detail})", style=STATE_STYLE[model.state]
        )  # "finishing 3 groups in flight"
    if model.alerts:
        line2.append(
            f"  ⚠ {len(model.alerts)} alert{'s' if len(model.alerts) != 1 else ''} (h)",
            style="bold yellow",
        )
    line2.append(f"  {model.groups_done}/{model.groups_total} groups")
    requests = model.requests if model.state not in (RunState.FINISHED, RunState.FAILED) else None
    if not viewing and model.state not in (
        RunState.FINISHED,
        RunState.FAILED,
    ):  # a rate is of a run that goes on
        groups_s, tokens_s = model.rates()
        line2.append(
            f"  {groups_rate(groups_s)}" + (f"  {tokens_s:,.0f} tok/s" if requests is None else "")
        )
    line2.append(f"  {clock(model.elapsed_s)}")
    detail = model.detail and (
        viewing or model.state in (RunState.FAILED, RunState.FINISHED, RunState.STARTING)
    )
    if requests is not None:  # its tok/s replaces the groups' own; it leaves the path its run id
        path_share = run_id_cells(one_line(s.out_path)) + len("  → ") if s is not None else 0
        room = width - line2.cell_len - path_share - 2 - (len(model.detail) + 2 if detail else 0)
        line2.append(
            f"  {traffic_that_fits(requests, room)}",
            style="bold yellow" if requests.rate_limited else "",
        )
    if detail:
        line2.append(f"  {model.detail}", style="red" if model.state is RunState.FAILED else "dim")
    room = width - line2.cell_len - len("  → ")
    if (
        s is not None and room >= MIN_PATH
    ):  # last, in the room the counters leave: never pushes them out
        line2.append(f"  → {shorten_path(one_line(s.out_path), room)}", style="dim")
    status = Text("\n").join([line1, line2])
    status.no_wrap, status.overflow = (
        True,
        "ellipsis",
    )  # a long line is cut at its end, never pushes line 2 off
    return status
