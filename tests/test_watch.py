"""``vftui watch`` against a live run-api, headless and in the app."""

from __future__ import annotations

import threading

import httpx

from tests.conftest import Trainer, run_cli, start_cli, until, wait_until
from vftui.commands.watch import watch
from vftui.sim.trainer import REGISTRATION
from vftui.ui.inbox import Inbox
from vftui.ui.watch_app import WatchApp
from vftui.ui.widgets.trajectory_panel import TrajectoryPanel


def register_trainer(api_url: str, batch_size: int = 8) -> None:
    httpx.post(
        f"{api_url}/register", json={**REGISTRATION, "batch_size": batch_size}, timeout=10
    ).raise_for_status()
    httpx.get(f"{api_url}/batch", timeout=10).raise_for_status()


def test_watch_headless_lines_follow_the_api(api, tmp_path):
    before = run_cli(
        ["watch", "--api-url", api.api_url, "--no-ui", "--count", "1", "--every", "0.2"], tmp_path
    )
    assert before.returncode == 0, before.stderr
    assert "waiting for a trainer" in before.stdout
    register_trainer(api.api_url)
    after = run_cli(
        ["watch", "--api-url", api.api_url, "--no-ui", "--count", "2", "--every", "0.2"], tmp_path
    )
    lines = after.stdout.strip().splitlines()
    assert len(lines) == 2 and all(
        "trainer registered (batch size 8) · step 0 · queue 0 groups" in x for x in lines
    )


def test_watch_reports_an_unreachable_api(tmp_path):
    result = run_cli(
        ["watch", "--api-url", "http://127.0.0.1:9", "--no-ui", "--count", "1"], tmp_path
    )
    assert result.returncode == 0 and "unreachable: ConnectError" in result.stdout


async def test_watch_app_shows_trainer_and_queue(api):
    register_trainer(api.api_url)
    inbox, stop = Inbox(), threading.Event()
    poller = threading.Thread(target=watch, args=(api.api_url, inbox.put, stop, 0.2), daemon=True)
    app = WatchApp(inbox, api.api_url)
    poller.start()
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            panel = app.query_one(TrajectoryPanel)
            await until(
                pilot=pilot,
                predicate=lambda: (
                    "trainer registered (batch size 8)"
                    in str(panel.query_one("#api-text").render())
                ),
            )
            assert "step 0" in str(panel.query_one("#api-text").render())
            label = panel.query_one("#queue-label")  # the sparkline under it was unlabelled
            assert label.display and str(label.render()) == "queue (groups), its last 240 polls:"
            spark = panel.query_one("#queue-sparkline").region
            assert label.region.y < spark.y and spark.height == 2, spark
            assert any("trainer registered" in r.message for r in app.model.logs)
            await pilot.press("q")
    finally:
        stop.set()


def test_watch_lists_our_runs_that_send_to_the_api_as_they_see_it(sim, api, tmp_path):
    Trainer(
        api.api_url, batches=1
    )  # then it stops pulling: the queue fills and atroposlib allows no worker
    out = tmp_path / "groups.jsonl"
    run = start_cli(
        [
            "run",
            "--mode",
            "rl",
            "--no-ui",
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
        ],
        tmp_path,
    )
    watch = ["watch", "--api-url", api.api_url, "--no-ui", "--count", "1"]
    try:

        def full_queue_line() -> str | None:
            text = run_cli(watch, tmp_path).stdout
            return text if "queue full" in text else None

        line = wait_until(
            full_queue_line, "the run's own view of the API in watch's line", timeout=120, every=0.5
        )
        assert f"{out}: env 0, weight 1.00," in line and "workers 0/0" in line and "lag " in line
    finally:
        run.terminate()
        run.communicate(timeout=60)
