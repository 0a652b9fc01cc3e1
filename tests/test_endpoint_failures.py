"""Endpoint trouble during a run: retried with backoff, reported, and bounded."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from tests.conftest import (
    json_events,
    read_jsonl,
    read_until,
    run_cli,
    serve_app,
    sim_admin,
    start_cli,
    wait_for_lines,
)
from vftui.sim.server import TOKENIZER_DIR, BackgroundSimServer


def run_against(sim, tmp_path, *extra: str, steps: int = 4):
    out = tmp_path / "groups.jsonl"
    args = [
        "run",
        "--no-ui",
        "--json",
        "--steps",
        str(steps),
        "--group-size",
        "4",
        "--base-url",
        sim.base_url,
        "--out",
        str(out),
        *extra,
    ]
    result = run_cli(args, tmp_path)
    troubles = [e for e in json_events(result.stdout) if e["event"] == "EndpointTrouble"]
    return result, out, troubles


@pytest.mark.parametrize(
    "fault",
    [{"status": 500, "count": 6}, {"malformed": True, "count": 4}],
    ids=["5xx", "malformed"],
)
def test_transient_failures_are_retried_and_reported(sim, tmp_path, fault):
    sim_admin(sim, "/sim/faults", fault)
    result, out, troubles = run_against(sim, tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(out)) == 4
    assert troubles and troubles[0]["attempt"] == 1 and troubles[0]["max_attempts"] == 6
    assert "endpoint error (attempt 1/6)" in result.stderr


def test_429s_are_absorbed_by_the_client_and_counted(sim, tmp_path):
    """A rate limit is not a failure: the rejected request waits and goes again; no group restarts."""
    sim_admin(sim, "/sim/faults", {"status": 429, "count": 5})
    result, out, troubles = run_against(sim, tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(out)) == 4
    assert troubles == []
    stats = [e for e in json_events(result.stdout) if e["event"] == "RequestStats"]
    assert stats and stats[-1]["rate_limited_total"] == 5
    assert sim_admin(sim, "/sim/requests")["total"] == 4 * 4 + 5, (
        "each rejected request sent once more, nothing else"
    )


def test_stalled_requests_time_out_and_are_retried(sim, tmp_path):
    sim_admin(sim, "/sim/faults", {"stall_s": 4, "count": 4})
    result, out, troubles = run_against(sim, tmp_path, "--timeout", "1")
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(out)) == 4
    assert any("Timeout" in t["error"] or "timed out" in t["error"].lower() for t in troubles), (
        troubles
    )


def test_an_endpoint_that_keeps_failing_fails_the_run_clearly(sim, tmp_path):
    sim_admin(sim, "/sim/faults", {"status": 503, "count": -1})
    result, out, troubles = run_against(sim, tmp_path, "--retries", "2")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "the endpoint failed 3 times in a row" in result.stderr
    assert troubles and {t["attempt"] for t in troubles} <= {1, 2}, (
        "each group in flight retries on its own"
    )
    assert {t["max_attempts"] for t in troubles} == {3}
    summary = next(e for e in json_events(result.stdout) if e["event"] == "RunSummary")
    assert summary["state"] == "failed" and summary["groups_done"] == 0
    assert out.exists() and read_jsonl(out) == []


def test_connection_refused_mid_run_is_survived(tmp_path):
    first = BackgroundSimServer(seed=0, latency_s=0.05).start()
    port = first.port
    out = tmp_path / "groups.jsonl"
    proc = start_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--steps",
            "40",
            "--group-size",
            "4",
            "--concurrency",
            "4",
            "--base-url",
            first.base_url,
            "--out",
            str(out),
        ],  # one group at a time, so the run is still going when the server goes
        tmp_path,
    )
    second = None
    try:
        wait_for_lines(out, 2, proc)
        first.stop()
        before = read_until(
            proc.stdout, '"EndpointTrouble"', "the run never said the endpoint failed"
        )
        second = BackgroundSimServer(seed=0, latency_s=0.05, port=port).start()
        stdout, stderr = proc.communicate(timeout=120)
        stdout = before + stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        if second is not None:
            second.stop()
    assert proc.returncode == 0, stderr
    assert len(read_jsonl(out)) == 40
    troubles = [e for e in json_events(stdout) if e["event"] == "EndpointTrouble"]
    assert troubles and any(
        "Connect" in t["error"] or "connection" in t["error"].lower() for t in troubles
    ), troubles


FAILING_REWARD_ENV = """
import verifiers as vf
from datasets import Dataset


def exact(completion, info, **kwargs):
    if info["fail"]:
        raise KeyError("judge_score")
    return 1.0


def load_environment(fail_every: int = 0):
    rows = [{"question": "Sort these names alphabetically: Zoe, Ada", "answer": "",
             "info": {"fail": bool(fail_every) and i % fail_every == 1 % fail_every}} for i in range(20)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[exact]))
"""


def test_a_raising_reward_function_reports_its_group_and_the_run_goes_on(sim, tmp_path):
    """verifiers scores a raising reward function 0; training on that 0 would be silently wrong."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "failing_reward.py").write_text(FAILING_REWARD_ENV)
    out = tmp_path / "groups.jsonl"
    base = [
        "run",
        "--no-ui",
        "--json",
        "--env",
        "failing-reward",
        "--group-size",
        "2",
        "--base-url",
        sim.base_url,
    ]
    result = run_cli(
        [*base, "--env-args", '{"fail_every": 10}', "--steps", "4", "--out", str(out)],
        tmp_path,
        PYTHONPATH=str(tmp_path / "envs"),
    )
    assert result.returncode == 0, result.stderr
    dropped = [e for e in json_events(result.stdout) if e["event"] == "GroupDropped"]
    assert [(d["item"], d["reason"]) for d in dropped] == [
        (1, "reward function 'exact' failed: KeyError: 'judge_score'")
    ]
    groups = read_jsonl(out)
    assert len(groups) == 4 and 1 not in {g["vftui"]["item"] for g in groups}
    assert all(score == 1.0 for g in groups for score in g["scores"]), (
        "no group trained on the failure's 0"
    )

    always = run_cli(
        [
            *base,
            "--env-args",
            '{"fail_every": 1}',
            "--steps",
            "4",
            "--retries",
            "2",
            "--out",
            str(tmp_path / "always.jsonl"),
        ],
        tmp_path,
        PYTHONPATH=str(tmp_path / "envs"),
    )
    assert always.returncode == 1 and "Traceback" not in always.stderr
    assert (
        "reward function 'exact' failed in 3 groups in a row; last error: KeyError: 'judge_score'"
        in always.stderr
    )


def hostile_app(body: str) -> web.Application:
    """An OpenAI-compatible endpoint whose chat answers never end, or trickle a byte a second."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "hostile", "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk, pause = (b" " * 1024**2, 0.0) if body == "endless" else (b" ", 1.0)
        try:
            for _ in range(100_000):  # bounded: ends on its own if the client never gives up
                await response.write(chunk)
                await asyncio.sleep(pause)
        except ConnectionError:
            pass  # the client gave up, as it should
        return response

    app = web.Application()
    app.add_routes([web.get("/v1/models", models), web.post("/v1/chat/completions", chat)])
    return app


@pytest.mark.parametrize("body", ["endless", "trickle"])
def test_an_endless_or_trickling_body_is_a_bounded_failed_attempt(tmp_path, body):
    with serve_app(hostile_app(body)) as base_url:
        started = time.monotonic()
        # --max-tokens so high that --max-response-mb, not what the request asked for, bounds the body
        result = run_cli(
            [
                "run",
                "--no-ui",
                "--steps",
                "1",
                "--group-size",
                "1",
                "--base-url",
                base_url,
                "--timeout",
                "3",
                "--retries",
                "1",
                "--max-response-mb",
                "8",
                "--max-tokens",
                "100000",
                "--tokenizer",
                str(TOKENIZER_DIR),
                "--out",
                str(tmp_path / "g.jsonl"),
            ],
            tmp_path,
            timeout=120,
        )
        took = time.monotonic() - started
    assert result.returncode == 1 and "Traceback" not in result.stderr
    reason = {
        "endless": "the response body passed 8,388,608 bytes (--max-response-mb)",
        "trickle": "the request took longer than 3 s",
    }
    assert (
        "the endpoint failed 2 times in a row" in result.stderr and reason[body] in result.stderr
    ), result.stderr
    assert took < 60, f"two attempts bounded by --timeout 3 took {took:.0f} s"
