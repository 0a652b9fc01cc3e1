"""How each fact is said, once, for every view: headless lines, the dashboard's log and panels, ``watch``.

A fact said in several lines is a list of them (``printable.say`` prints each as one line).
"""

from __future__ import annotations

import math
import shlex

from vftui.events import (
    Alert,
    ApiStatus,
    EndpointTrouble,
    EnvShare,
    EvalReport,
    Figure,
    GroupDropped,
    GroupsDumped,
    RequestStats,
    RunState,
)

SIMULATION = "SIMULATION"  # the one word for the embedded endpoint, in every view and the README
SIMULATION_NOTE = f"{SIMULATION}: built-in endpoint and tokenizer, not a real model"

WAITING_FOR_TRAINER = "waiting for a trainer"
LOADING_LIBRARIES = "loading the collector's libraries"


def clock(seconds: float) -> str:
    """``1:02:03``: a run's time, the same in the header and in ``vftui runs``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def trainer_state(status: ApiStatus) -> str:
    """``trainer registered (batch size 8)``, or that none is yet."""
    return (
        f"trainer registered (batch size {status.batch_size})"
        if status.trainer_registered
        else WAITING_FOR_TRAINER
    )


def workers(running: int | None, allowed: int | None) -> str:
    """Our groups being collected over how many atroposlib allows now (none: backpressure)."""
    text = f"workers {running}/{allowed}"
    return text + " (queue full: waiting for the trainer)" if allowed == 0 else text


def lag(steps: int | None) -> str:
    return "lag -" if steps is None else f"lag {steps} step{'' if steps == 1 else 's'}"


def env_share(share: EnvShare) -> str:
    """A run of ours that sends to the API, as ``vftui watch`` lists it."""
    return (
        f"{share.run}: env {share.env_id}, weight {share.weight:.2f}, {share.queued} queued, "
        f"{workers(share.workers, share.workers_allowed)}, {lag(share.lag)}"
    )


def api_reachability(status: ApiStatus) -> str:
    return (
        "trajectory API reachable"
        if status.reachable
        else f"trajectory API unreachable: {status.error}"
    )


def trouble(event: EndpointTrouble) -> str:
    """``3/6`` attempts, or just ``3`` for what is retried as long as the run goes on."""
    attempts = f"{event.attempt}/{event.max_attempts}" if event.max_attempts else str(event.attempt)
    return f"{event.service} error (attempt {attempts}): {event.error}; retrying in {event.retry_in_s:.1f} s"


def traffic(stats: RequestStats) -> str:
    """The endpoint's traffic on one line for a status bar or a progress line, the same in every view."""
    return " · ".join(traffic_parts(stats))


def in_flight(stats: RequestStats) -> str:
    """The requests in flight over the most allowed: the traffic's shortest form."""
    return f"in flight {stats.in_flight}/{stats.ceiling}"


def traffic_parts(stats: RequestStats) -> list[str]:
    """The traffic's figures, most telling first: a narrow header keeps a prefix of them."""
    groups = f"{stats.groups_in_flight} group{'s' if stats.groups_in_flight != 1 else ''}"
    parts = [f"{in_flight(stats)} in {groups}"]
    if stats.rate_limited:
        parts.append(f"rate-limited to {stats.limit}")
    parts.append(f"{stats.requests_per_s:.1f} req/s")
    if stats.latency_p50_s is not None and stats.latency_p95_s is not None:
        parts.append(f"p50 {stats.latency_p50_s:.2f} s p95 {stats.latency_p95_s:.2f} s")
    parts.append(f"{stats.tokens_per_s:,.0f} tok/s")
    return parts


def dropped(event: GroupDropped) -> str:
    """A group that is no data: rl does not send it, sft and eval do not save it (an eval counts it an error)."""
    return f"group of item {event.item} left out: {event.reason}"


def counted(n: int, noun: str) -> str:
    """``1 group``, ``2 groups``: a count and its noun, which takes an s for any count but one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def dumped(event: GroupsDumped) -> str:
    if event.where:
        return (
            f"dumped the {event.groups:,} of {counted(event.of, 'group')} in memory that "
            f"'{event.where}' shows to {event.path}"
        )
    return f"dumped {counted(event.groups, 'group')} to {event.path}"


def number(value: float, sign: str = "") -> str:
    """Three decimals, or the exponent form where those would be dozens of digits (rewards of 1e100 are scores)."""
    return f"{value:{sign}.3f}" if abs(value) < 1e6 else f"{value:{sign}.3e}"


def figure(value: Figure) -> str:
    """``0.625 ± 0.084`` (the farther end of its 95% interval: Wilson's is lopsided near 0 and 1, and half
    its width put ``0.000 ± 0.397`` on [0, 0.793]), or the mean alone while there is no interval;
    ``± n/a`` where every item scored the same (a t interval of no spread says nothing)."""
    mean, low, high = value["mean"], value["ci_low"], value["ci_high"]
    if mean is None or not math.isfinite(mean):
        return "-"
    if low is None or high is None or not math.isfinite(high - low):
        return number(mean)
    if low == high:
        return f"{number(mean)} ± n/a"  # every item scored the same: a t interval says nothing
    return f"{number(mean)} ± {number(max(mean - low, high - mean))}"


def eval_report(report: EvalReport) -> list[str]:
    """An eval's figures as printed at its end: one line each, with the 95% interval over items."""
    at = f" at trainer step {report.step}" if report.step is not None else ""
    lines = [
        f"eval{at}: {report.items}/{report.items_total} items x {report.rollouts_per_item} rollouts "
        f"(pass at reward >= {report.threshold:g}; ± is a 95% interval over items)"
    ]
    if report.errors:
        lines.append(
            f"  errors: {report.errors} of the {report.items + report.errors} examples done failed to score "
            "(a reward raised or was no number); the figures are over the others"
        )
    width = max(map(len, [*report.figures, *report.functions]), default=0)
    lines += [f"  {name:<{width}}  {figure(value)}" for name, value in report.figures.items()]
    lines += [f"  {name:<{width}}  {figure(value)}" for name, value in report.functions.items()]
    return lines


def groups_rate(groups_per_s: float) -> str:
    """A rate as the dashboard and ``vftui runs`` say it: ``0.00 g/s`` while paused, never a dash."""
    return f"{groups_per_s:.2f} g/s"


def ended_as(state: RunState, done: int, total: int) -> str:
    """What a run that has ended is called: one that finished short of its groups was stopped (a stop, a gate)."""
    return "stopped" if state is RunState.FINISHED and done < total else state.value


def temperature_changed(temperature: float) -> str:
    return f"temperature -> {temperature:g} (from the next group)"


PAUSED_AT_START = "paused before the first group"


def pause_at_start(paused: bool) -> str:
    """A pause (or its undoing) taken while the run starts: said before the run can answer it."""
    if paused:
        return f"{PAUSED_AT_START}: no group starts until space resumes"
    return "resumed: groups start as soon as the run is ready"


def run_state(state: RunState, detail: str) -> str:
    return f"run {state.value}" + (f": {detail}" if detail else "")


def left_running(pid: int | None, out_path: object) -> list[str]:
    """What a dashboard that leaves a run running (or starts one in the background) says of it; the command
    shell-quoted, so it pastes as it is whatever the path holds (spaces, quotes, ``$``)."""
    return [
        f"vftui: the run goes on in the background (pid {pid}): {out_path}",
        f"  vftui attach {shlex.quote(str(out_path))}   shows it again, with every key",
        "  vftui runs                lists the runs",
    ]


def alert(event: Alert) -> str:
    """An alert as it starts (its reason) or clears, the same in every view."""
    if event.active:
        return f"alert {event.name}: {event.reason}"
    return f"alert {event.name} cleared ({event.value:.3g}, threshold {event.threshold:g})"
