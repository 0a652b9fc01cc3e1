"""Run health: each signal from synthetic events (fast), then the simulated endpoint made to misbehave."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import types

import httpx
import pytest
from aiohttp import web
from rich.console import Console

from tests.conftest import (
    Trainer,
    collector_process,
    json_events,
    run_cli,
    serve_app,
    sim_admin,
    start_cli,
    until,
    wait_for_lines,
)
from vftui.collector.health import HealthMonitor
from vftui.collector.rl.server_watch import ServerWatch, parse_metrics
from vftui.config import RunConfig
from vftui.events import (
    WAITING_FOR_TRAINER,
    ApiStatus,
    GroupCollected,
    GroupDropped,
    RequestStats,
    RunState,
    RunStatus,
    ServerStatus,
)
from vftui.figures.signals import SIGNALS, parse_gates
from vftui.group_format import MASKED
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox
from vftui.ui.screens.health import HealthScreen

WEIGHTS = {"correct": 1.0, "format": 0.2}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def group(
    index, scores=(0.0, 1.0), length=10, finish="stop", correct=None, fmt=1.0
) -> GroupCollected:
    n = len(scores)
    correct = list(scores) if correct is None else [correct] * n
    return GroupCollected(
        index,
        index,
        None,
        list(scores),
        {"correct": correct, "format": [fmt] * n},
        [1] * n,
        [[1] * (length + 5)] * n,
        [[MASKED] * 5 + [1] * length] * n,
        [[]] * n,
        [finish] * n,
        1.0,
        0.0,
        0.1,
    )


def monitor(**kwargs) -> tuple[HealthMonitor, Clock]:
    clock = Clock()
    health = HealthMonitor(window=32, length_cap=100, weights=WEIGHTS, clock=clock, **kwargs)
    health.observe(RunStatus(RunState.RUNNING, 0, 100))
    return health, clock


def feed(health, groups) -> list:
    for g in groups:
        health.observe(g)
    return health.check()


@pytest.mark.unit
def test_truncation_starts_an_alert_and_clears_it():
    health, _ = monitor()
    figures, changes, tripped = feed(health, [group(i, finish="length") for i in range(10)])
    assert figures.signals["truncated"] == 1.0 and figures.finish_reasons == {"length": 20}
    assert [(a.name, a.active) for a in changes] == [("truncated", True)] and tripped is None
    assert "100% of recent rollouts were cut at --max-tokens" in changes[0].reason
    _, changes, _ = feed(health, [group(i) for i in range(10, 42)])
    assert [(a.name, a.active) for a in changes] == [("truncated", False)]


@pytest.mark.unit
def test_completion_length_collapse_and_runaway_towards_the_cap():
    health, _ = monitor()
    figures, _changes, _ = feed(
        health,
        [group(i, length=80) for i in range(16)] + [group(i, length=20) for i in range(16, 32)],
    )
    assert figures.signals["collapse"] == pytest.approx(0.75) and "collapse" in figures.active
    health, _ = monitor()
    figures, _, _ = feed(
        health,
        [group(i, length=40) for i in range(16)] + [group(i, length=98) for i in range(16, 32)],
    )
    assert figures.signals["runaway"] == pytest.approx(0.98) and "runaway" in figures.active


@pytest.mark.unit
def test_a_stall_counts_only_while_running_and_a_resume_restarts_it():
    health, clock = monitor(stall_timeout=30)
    feed(health, [group(0)])
    clock.now += 20
    health.observe(RunStatus(RunState.PAUSED, 1, 100))
    clock.now += 500
    figures, _, tripped = health.check()
    assert "stall" not in figures.signals and tripped is None, "paused is not stalled"
    health.observe(RunStatus(RunState.RUNNING, 1, 100))
    clock.now += 31
    figures, _changes, tripped = health.check()
    assert figures.signals["stall"] == pytest.approx(31) and tripped.name == "stall-timeout"
    assert "no group for 31 s" in tripped.sentence


@pytest.mark.unit
def test_reward_hacking_flags():
    health, _ = monitor()  # "correct" constant at 1 gives the whole weighted reward
    figures, _, _ = feed(health, [group(i, correct=1.0, fmt=0.0) for i in range(10)])
    assert figures.signals["dominance"] == 1.0 and "dominance" in figures.active
    health, _ = monitor()  # the total rises while "format" falls
    older = [group(i, scores=(0.2, 0.2 + i % 3 / 10), fmt=1.0) for i in range(16)]
    newer = [group(i, scores=(0.8, 0.8 + i % 3 / 10), fmt=0.5) for i in range(16, 32)]
    figures, _, _ = feed(health, older + newer)
    assert figures.signals["divergence"] == pytest.approx(0.5) and "divergence" in figures.active
    assert figures.signals["jump"] > 10 and "jump" in figures.active, (
        "a sudden change of the mean reward"
    )
    health, _ = monitor()  # reward at its best while completions shrink
    best = [group(i, scores=(1.0, 1.0), length=60) for i in range(16)]
    shorter = [group(i, scores=(1.0, 1.0), length=20) for i in range(16, 32)]
    figures, _, _ = feed(health, best + shorter)
    assert figures.signals["saturation"] == 1.0 and "saturation" in figures.active


@pytest.mark.unit
def test_drops_failed_requests_and_the_reward_a_trainer_learns_from():
    health, clock = monitor()
    health.observe(
        RequestStats(0, 8, 8, 0, 0.0, 0.0, None, None, False, requests_total=100, failed_total=0)
    )
    clock.now += 5
    health.observe(
        RequestStats(0, 8, 8, 0, 0.0, 0.0, 0.2, 0.5, False, requests_total=200, failed_total=30)
    )
    drops = [
        GroupDropped(i, "identical scores, all low (too hard)", [0.0, 0.0], {}, [1, 1])
        for i in range(4)
    ]
    figures, _, _ = feed(health, [group(i, scores=(0.5, 1.0)) for i in range(6)] + drops)
    assert figures.signals["errors"] == pytest.approx(0.3) and "errors" in figures.active
    assert figures.dropped == {"identical scores, all low (too hard)": 4}
    assert figures.reward_all == pytest.approx(0.45) and figures.reward_trainable == pytest.approx(
        0.75
    )


@pytest.mark.unit
def test_gates_trip_on_their_own_thresholds():
    health, _ = monitor(gates=parse_gates("identical>0.8, truncated>0.3"))
    _, _, tripped = feed(health, [group(i, scores=(1.0, 1.0)) for i in range(10)])
    assert (tripped.name, tripped.threshold) == (
        "identical",
        0.8,
    ) and "gate identical>0.8 tripped" in tripped.sentence
    for bad, said in (
        ("bogus>1", "NAME one of identical"),
        ("stall>x", "'x' is not a number"),
        ("stall", "NAME>VALUE"),
    ):
        with pytest.raises(ValueError, match=said):
            parse_gates(bad)


@pytest.mark.unit
def test_groups_of_one_rollout_never_trip_the_identical_gate_nor_count_as_trainable():
    """A group of one read as identical: an eval of one rollout an example tripped identical>0.8."""
    health, _ = monitor(gates=parse_gates("identical>0.8"))
    figures, _, tripped = feed(health, [group(i, scores=(1.0,)) for i in range(10)])
    assert tripped is None and "identical" not in figures.signals
    assert figures.reward_trainable is None, (
        "one rollout gives a trainer no advantage to learn from"
    )


def api_status(step: int, queue: int, allowed: int = 2, lag: int | None = None) -> ApiStatus:
    return ApiStatus(
        "http://127.0.0.1:1",
        True,
        True,
        8,
        step,
        queue,
        1.0,
        0,
        workers=0,
        workers_allowed=allowed,
        lag=lag,
    )


@pytest.mark.unit
def test_rl_lag_and_a_trainer_that_stops_stepping():
    health, clock = monitor(stall_timeout=60)
    health.observe(api_status(step=3, queue=4, lag=6))
    clock.now += 10
    health.observe(
        api_status(step=3, queue=4, allowed=0, lag=6)
    )  # the queue is full: no group is not a stall
    clock.now += 50
    figures, changes, tripped = health.check()
    assert figures.signals["lag"] == 6 and ("lag", True) in [(a.name, a.active) for a in changes]
    assert figures.signals["trainer_stall"] == pytest.approx(60) and figures.signals[
        "stall"
    ] == pytest.approx(50)
    assert tripped is None
    clock.now += 1
    _, _, tripped = health.check()
    assert (
        tripped is not None and "no trainer step with groups waiting for 61 s" in tripped.sentence
    )
    health.observe(api_status(step=4, queue=4))
    assert health.check()[0].signals["trainer_stall"] == 0, "a step restarts its clock"


@pytest.mark.unit
def test_rl_inference_servers_backlog_latency_and_retries():
    health, clock = monitor()
    health.observe(ServerStatus("http://a/v1", True, 100, 0, 0.2, 0.5, running=8, waiting=2))
    clock.now += 5
    health.observe(ServerStatus("http://a/v1", True, 150, 50, 0.3, 1.5, running=8, waiting=24))
    figures, _, _ = health.check()
    assert figures.signals["backlog"] == 3.0 and "backlog" in figures.active
    assert figures.signals["errors"] == pytest.approx(0.5), (
        "50 retries among 100 attempts since the first poll"
    )
    assert (figures.latency_p50_s, figures.latency_p95_s) == (0.3, 1.5)


VLLM_V0 = """# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 2.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
"""
VLLM_V1 = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
"""
SGLANG = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 9.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.4
"""


@pytest.mark.parametrize(
    "page, expected",
    [
        (VLLM_V0, {"running": 5.0, "waiting": 2.0, "kv_cache": 0.25}),
        (
            VLLM_V1,
            {"running": 7.0, "kv_cache": 0.75},
        ),  # engines add up; the KV cache is the fullest one's
        (SGLANG, {"running": 9.0, "waiting": 1.0, "kv_cache": 0.4}),
        ("# just a comment\nother_metric 1\n", {}),
    ],
)
@pytest.mark.unit
def test_prometheus_pages_of_vllm_and_sglang(page, expected):
    assert parse_metrics(page) == expected


# -- end to end, the simulated endpoint misbehaving on purpose ---------------------------------


def text_of(renderable) -> str:
    console = Console(width=110, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def events_of(stdout: str, kind: str) -> list[dict]:
    return [e for e in json_events(stdout) if e["event"] == kind]


def slow_run(sim, out, *extra) -> list[str]:
    """A headless run of the slow simulated endpoint; add --json only where its output is read at the end
    (a pipe nobody reads would fill and stop the run)."""
    return [
        "run",
        "--no-ui",
        "--steps",
        "2000",
        "--group-size",
        "2",
        "--concurrency",
        "4",
        "--base-url",
        sim.base_url,
        "--out",
        str(out),
        *extra,
    ]


def test_an_always_truncating_endpoint_trips_its_gate(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    result = run_cli(
        slow_run(slow_sim, out, "--json", "--max-tokens", "6", "--fail-on", "truncated>0.5"),
        tmp_path,
    )
    assert result.returncode == 3, result.stderr
    alert = next(a for a in events_of(result.stdout, "Alert") if a["name"] == "truncated")
    assert (
        alert["active"] is True
        and alert["threshold"] == SIGNALS["truncated"].threshold
        and alert["value"] > 0.5
    )
    assert "alert truncated: " in result.stderr and "cut at --max-tokens" in result.stderr
    assert (
        "run stopped by a gate" in result.stderr
        and "gate truncated>0.5 tripped: truncated is" in result.stderr
    )
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert saved["groups"] == len(out.read_text().splitlines()) > 0, (
        "stopped gracefully: whole, checkpointed"
    )


def test_a_stalled_endpoint_fails_the_run_with_its_own_code(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    proc = start_cli(slow_run(slow_sim, out, "--stall-timeout", "3"), tmp_path)
    wait_for_lines(out, 2, proc)
    sim_admin(slow_sim, "/sim/faults", {"stall_s": 120, "count": -1})
    _stdout, stderr = proc.communicate(timeout=90)
    sim_admin(slow_sim, "/sim/faults", {"count": 0})
    assert proc.returncode == 4, stderr
    assert "--stall-timeout 3: no group for" in stderr and "Traceback" not in stderr


def test_shrinking_completions_raise_the_collapse_flag_and_clear_it(tmp_path, slow_sim):
    # Slowed to ~10 groups/s, so the window's halves differ for a few of the once-a-second checks.
    sim_admin(slow_sim, "/sim/settings", {"think_words": 60, "latency_s": 0.2})
    out = tmp_path / "groups.jsonl"
    proc = start_cli(slow_run(slow_sim, out, "--max-tokens", "400", "--window", "40"), tmp_path)
    try:
        wait_for_lines(out, 25, proc)
        sim_admin(slow_sim, "/sim/settings", {"think_words": 0})
        wait_for_lines(out, 25 + 80, proc)
    finally:
        sim_admin(slow_sim, "/sim/settings", {"think_words": 0, "latency_s": 0.05})
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert "alert collapse: completions got" in stderr, stderr[-3000:]
    assert "alert collapse cleared" in stderr, stderr[-3000:]


DOMINATED_ENV = """
import verifiers as vf
from datasets import Dataset


def always(completion, **kwargs):
    return 1.0


def rarely(completion, **kwargs):
    return 0.01


def load_environment():
    rows = [{"question": f"Sort these names alphabetically: Zoe, Ada, Cy{i}", "answer": ""} for i in range(50)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[always, rarely]))
"""


def test_a_constant_reward_function_that_dominates_is_flagged(tmp_path, slow_sim):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "dominated.py").write_text(DOMINATED_ENV)
    result = run_cli(
        [
            *slow_run(slow_sim, tmp_path / "g.jsonl", "--json", "--env", "dominated"),
            "--steps",
            "40",
            "--fail-on",
            "dominance>0.95",
        ],
        tmp_path,
        PYTHONPATH=str(tmp_path / "envs"),
    )
    assert result.returncode == 3, result.stderr
    dominance = next(a for a in events_of(result.stdout, "Alert") if a["name"] == "dominance")
    assert dominance["value"] > 0.95 and "one reward function gives" in dominance["reason"]


async def test_the_dashboard_counts_active_alerts_and_the_health_screen_says_why(
    tmp_path, slow_sim
):
    config = RunConfig(
        base_url=slow_sim.base_url, group_size=2, steps=2000, max_tokens=6, out=tmp_path / "g.jsonl"
    )
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    try:
        app = VftuiApp(StartedRun(inbox, run))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(lambda: "truncated" in app.model.alerts, pilot=pilot)
            await until(lambda: "alert" in str(app.query_one("#status").render()), pilot=pilot)
            assert f"⚠ {len(app.model.alerts)} alert" in str(app.query_one("#status").render())
            await pilot.press("h")
            await until(lambda: isinstance(app.screen, HealthScreen), pilot=pilot)
            await until(
                lambda: (
                    "cut at --max-tokens" in text_of(app.screen.query_one("#health-body").render())
                ),
                pilot=pilot,
            )
            await pilot.press("escape")
            run.controls.stop()
            await until(lambda: app.result is not None, pilot=pilot)
            await pilot.press("q")
    finally:
        run.close()


# -- rl: a slow trainer, a full inference server, the off-policy lag ---------------------------


def rl_run(sim, api, out, *extra) -> list[str]:
    return [
        "run",
        "--mode",
        "rl",
        "--no-ui",
        "--json",
        "--steps",
        "500",
        "--group-size",
        "4",
        "--base-url",
        sim.base_url,
        "--api-url",
        api.api_url,
        "--out",
        str(out),
        *extra,
    ]


def test_a_trainer_that_stops_pulling_shows_backpressure_and_trips_its_gate(sim, api, tmp_path):
    Trainer(api.api_url, batches=1)  # pulls one batch, then never steps again
    out = tmp_path / "groups.jsonl"
    result = run_cli(rl_run(sim, api, out, "--fail-on", "trainer_stall>4"), tmp_path)
    assert result.returncode == 3, result.stderr
    assert "gate trainer_stall>4 tripped: trainer_stall is" in result.stderr
    statuses = events_of(result.stdout, "ApiStatus")
    assert statuses[-1]["workers_allowed"] == 0 and statuses[-1]["self_queue_size"] > 0, (
        "the queue is full"
    )
    assert all(s["lag"] is None or s["lag"] >= 0 for s in statuses)
    server = events_of(result.stdout, "ServerStatus")[-1]
    assert server["healthy"] and server["requests"] > 0 and server["latency_p50_s"] > 0
    assert server["running"] is not None and server["kv_cache"] is not None, (
        "read from the server's /metrics"
    )
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert saved["groups"] == len(out.read_text().splitlines()) > 0, (
        "stopped gracefully: whole, checkpointed"
    )


def test_groups_generated_steps_ago_raise_the_lag_gate(sim, api, tmp_path):
    Trainer(
        api.api_url, batches=300, groups_per_batch=1
    )  # steps at every group, while many are in flight
    result = run_cli(
        rl_run(sim, api, tmp_path / "groups.jsonl", "--concurrency", "64", "--fail-on", "lag>1"),
        tmp_path,
    )
    assert result.returncode == 3, result.stderr
    lags = [s["lag"] for s in events_of(result.stdout, "ApiStatus") if s["lag"] is not None]
    assert max(lags) > 1 and "gate lag>1 tripped" in result.stderr


async def test_a_full_inference_server_raises_the_backlog_alert_in_the_dashboard(
    sim, api, tmp_path
):
    sim_admin(
        sim, "/sim/settings", {"max_running": 1, "latency_s": 0.05}
    )  # the rest wait, as in a full batch
    Trainer(api.api_url, batches=300)
    config = RunConfig(
        mode="rl",
        base_url=sim.base_url,
        api_url=api.api_url,
        group_size=4,
        steps=500,
        concurrency=16,
        out=tmp_path / "g.jsonl",
    )
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    try:
        app = VftuiApp(StartedRun(inbox, run))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(lambda: "backlog" in app.model.alerts, pilot=pilot, timeout=90)
            await until(lambda: "workers" in str(app.query_one("#api-text").render()), pilot=pilot)
            await pilot.press("h")
            await until(lambda: isinstance(app.screen, HealthScreen), pilot=pilot)

            def body() -> str:
                return text_of(app.screen.query_one("#health-body").render())

            await until(
                lambda: "it is full" in body() and "waiting" in body() and "KV cache" in body(),
                pilot=pilot,
            )
            assert sim.base_url in body() and "trainer" in body()
            await pilot.press("escape")
            run.controls.stop()
            await until(lambda: app.result is not None, pilot=pilot, timeout=90)
            await pilot.press("q")
    finally:
        run.close()


class AtroposServer:
    """What ServerWatch reads of an atroposlib server object: its URL, health and request timings."""

    def __init__(self, base_url: str) -> None:
        self.config = types.SimpleNamespace(base_url=base_url)
        self.server_healthy = True
        self.request_timings: list[float] = []
        self.attempts_list: list[int] = []


def metrics_pages() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        kind = request.match_info["kind"]
        if kind == "missing":
            raise web.HTTPNotFound()
        body = {
            "html": "<html><body>metrics</body></html>",
            "huge": "x" * (5 * 1024**2),
            "odd": VLLM_V0.replace("5.0", "NaN") + "vllm:num_requests_waiting -3\n",
        }[kind]
        return web.Response(text=body)

    app = web.Application()
    app.router.add_get("/{kind}/metrics", page)
    return app


async def test_server_watch_folds_atroposlib_timings_and_shrugs_off_bad_metrics_pages():
    with serve_app(metrics_pages()) as base:
        root = base.removesuffix("/v1")
        servers = {
            kind: AtroposServer(f"{root}/{kind}/v1") for kind in ("html", "missing", "huge", "odd")
        }
        watches = {kind: ServerWatch(server) for kind, server in servers.items()}
        odd = servers["odd"]
        odd.request_timings += [0.1, 0.2, 0.3]
        odd.attempts_list += [1, 3, 1]
        async with httpx.AsyncClient(timeout=5) as client:
            first = {kind: await watch.status(client) for kind, watch in watches.items()}
            odd.request_timings[:], odd.attempts_list[:] = (
                [0.4],
                [2],
            )  # atroposlib's wandb step emptied them
            odd.server_healthy = False
            again = await watches["odd"].status(client)
    assert first["html"].metrics_note == "/metrics is not Prometheus text"
    assert (
        first["missing"].metrics_note == "no /metrics"
        and first["huge"].metrics_note == "/metrics too large"
    )
    assert (first["odd"].running, first["odd"].kv_cache) == (None, 0.25), (
        "NaN and negative values are left out"
    )
    assert (first["odd"].requests, first["odd"].retries, first["odd"].latency_p50_s) == (3, 2, 0.2)
    assert (again.requests, again.retries, again.healthy) == (4, 3, False)


@pytest.mark.unit
def test_trend_alerts_wait_for_a_window_worth_comparing():
    health, _ = monitor()
    low, high = (
        [group(i, scores=(0.1, 0.2)) for i in range(8)],
        [group(i, scores=(0.9, 1.0)) for i in range(8, 16)],
    )
    figures, changes, _ = feed(health, low + high)
    assert "jump" not in figures.signals and not changes, "16 groups in: too early to call a trend"
    figures, changes, _ = feed(health, [group(i, scores=(0.9, 1.0)) for i in range(16, 32)])
    assert "jump" in figures.signals


def test_waiting_for_a_trainer_alerts_after_a_minute_saying_how_to_start_one():
    health, clock = monitor()
    health.observe(RunStatus(RunState.STARTING, 0, 4, f"{WAITING_FOR_TRAINER} at http://api"))
    clock.now += 61
    figures, alerts, tripped = health.check()
    assert tripped is None and [a.name for a in alerts if a.active] == ["trainer_wait"]
    assert "vftui sim-trainer --api-url URL" in alerts[0].reason
    assert "stall" not in figures.signals, "no group while no trainer wants one is no stall"


def test_a_gate_never_measured_is_not_said_to_have_held():
    """A probe's find: 'gates held: truncated>0.99 (no value)' after four groups, too few to measure it."""
    from vftui.collector.run import gates_held
    from vftui.events import Health

    health = Health(
        8, {"stop": 32}, 20.0, 30.0, {}, 0.5, 0.5, 0.2, 0.4, 900.0, {"identical": 0.25}, []
    )
    assert gates_held("identical>0.9,truncated>0.99", health, None) == (
        "identical>0.9 held (identical 0.25); truncated>0.99 never measured"
    )


def test_a_gate_list_with_an_empty_term_or_a_gate_twice_is_refused():
    """A probe's find: ',' meant no gate at all, and 'identical>0.9,identical>0.1' kept both."""
    from vftui.figures.signals import read_gates

    for text, said in (
        (",", "missing between its commas"),
        ("identical>0.9,,", "missing between its commas"),
        ("identical>0.9,identical>0.1", "names identical> twice"),
    ):
        with pytest.raises(ValueError, match=said):
            read_gates(text)
    assert read_gates("") == read_gates(None) == []
    assert [g.name for g in read_gates(" identical>0.9 , truncated>0.3 ")] == [
        "identical",
        "truncated",
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("identical>2", "identical is a share from 0 to 1, so this gate would never trip"),
        ("truncated>1", "truncated is a share from 0 to 1, so this gate would never trip"),
        ("errors>-0.1", "errors is a share from 0 to 1, so this gate would always trip"),
        ("pass@1<0", "pass@1 is a share from 0 to 1, so this gate would never trip"),
        ("accuracy<1.5", "accuracy is a share from 0 to 1, so this gate would always trip"),
        ("stall>-5", "stall is never below 0, so this gate would always trip"),
        ("lag>-1", "lag is never below 0, so this gate would always trip"),
    ],
)
def test_a_gate_on_a_share_past_either_end_is_refused(text, said):
    """``identical>2`` could never trip and passed silently (a low of issue 42); a share's gate must lie
    within 0 to 1, figures with no such bound (stall seconds, the reward) take any number."""
    from vftui.figures.signals import read_gates

    with pytest.raises(ValueError, match=re.escape(said)):
        read_gates(text)
    assert [g.threshold for g in read_gates("identical>0,stall>500,reward>7,pass@1<1")] == [
        0.0,
        500.0,
        7.0,
        1.0,
    ]
    # a fall that was a rise is below 0: those may be gated there; -0 is said as 0
    assert [str(g.threshold) for g in read_gates("divergence>-0.1,identical>-0.0")] == [
        "-0.1",
        "0.0",
    ]


@pytest.mark.unit
def test_one_early_failed_request_is_no_errors_alert():
    """The first request failing read as 100% of requests failing, an alert at once (a low of issue
    42): the share waits for ``MIN_REQUESTS`` requests in its window."""
    from vftui.collector.health import MIN_REQUESTS

    health, clock = monitor()
    stats = [
        RequestStats(0, 8, 8, 0, 0.0, 0.0, None, None, False, requests_total=0, failed_total=0)
    ]
    stats.append(dataclasses.replace(stats[0], requests_total=1, failed_total=1))
    stats.append(dataclasses.replace(stats[0], requests_total=MIN_REQUESTS, failed_total=2))
    for n, event in enumerate(stats):
        health.observe(event)
        clock.now += 1
        figures, changes, _ = health.check()
        if n == 1:
            assert "errors" not in figures.signals and not changes
    assert figures.signals["errors"] == pytest.approx(2 / MIN_REQUESTS)
    assert "errors" in figures.active
