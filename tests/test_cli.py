"""The command line as a user meets it: help, headless output, the standalone sim-server."""

from __future__ import annotations

import importlib.metadata
import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from openai import OpenAI

from tests.conftest import REPO, cli_env, free_port, read_jsonl, run_cli, start_cli, wait_until
from vftui.cli import build_parser, main
from vftui.config import FLAG_OF_FIELD, RunConfig
from vftui.errors import STOP_SIGNALS
from vftui.sim.server import BackgroundSimServer


@pytest.mark.unit
def test_help_explains_every_flag():
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for field in set(RunConfig.model_fields) - {
        "extra_base_urls"
    }:  # the second and later --base-url
        flag = FLAG_OF_FIELD[field]
        assert flag in run_help, flag
    for action in build_parser()._subparsers._group_actions[0].choices["run"]._actions:
        assert action.help and len(action.help) > 10, action.option_strings
    top = build_parser().format_help()
    assert "run" in top and "sim-server" in top and "SIMULATION" in top


def test_json_mode_keeps_stdout_pure_and_says_why_it_is_headless(tmp_path):
    result = run_cli(
        ["run", "--json", "--steps", "2", "--group-size", "2", "--out", str(tmp_path / "g.jsonl")],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "RunStatus" and kinds[-1] == "RunSummary"
    assert kinds.count("GroupCollected") == 2 and "RunStarted" in kinds and "MetricsWindow" in kinds
    started = next(e for e in events if e["event"] == "RunStarted")
    assert started["simulated"] is True and started["endpoint"] == "simulated"
    assert "stdout is not a terminal; running headless" in result.stderr


def test_groups_of_one_rollout_have_no_identical_score_rate_in_any_figure(tmp_path):
    """Each group of one read as identical: the summary said 1.000 (6/6), compare said 0.0%."""
    out = tmp_path / "g.jsonl"
    run = run_cli(
        ["run", "--no-ui", "--steps", "3", "--group-size", "1", "--out", str(out)], tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert "identical-score rate - (no group of two or more rollouts)" in run.stdout + run.stderr
    progress = [line for line in run.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 3 and all(" identical -  " in line for line in progress), progress
    shown = run_cli(["compare", "--json", str(out), str(out)], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert [s["identical"] for s in json.loads(shown.stdout)["sources"]] == [None, None]


def test_python_dash_m_and_version(tmp_path):
    result = run_cli(["--version"], tmp_path)
    installed = importlib.metadata.version("vftui")
    assert result.returncode == 0 and result.stdout == f"vftui {installed}\n", result.stdout


def test_sim_server_on_its_own_speaks_openai(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vftui",
            "sim-server",
            "--port",
            str(port),
            "--seed",
            "3",
            "--rate-limit",
            "20",
        ],
        env=cli_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def up() -> bool:
            assert proc.poll() is None, proc.communicate()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).is_success
            except httpx.HTTPError:
                return False

        wait_until(up, "the sim-server did not answer")
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY")
        assert [m.id for m in client.models.list()] == ["vftui-sim"]
        reply = client.chat.completions.create(
            model="vftui-sim",
            messages=[
                {"role": "user", "content": "Sort these names alphabetically: Zoe, Ada, Mira"}
            ],
            temperature=0.0,
            max_tokens=64,
        )
        assert (
            reply.choices[0].message.content
            == "<alphabetical_sorted>\nAda\nMira\nZoe\n</alphabetical_sorted>"
        )
        assert reply.choices[0].finish_reason == "stop"
        assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 0
        short = client.chat.completions.create(
            model="vftui-sim",
            messages=[{"role": "user", "content": "Sort these names alphabetically: Zoe, Ada"}],
            max_tokens=3,
        )
        assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 3

        def ask(_: int) -> httpx.Response:
            body = {"messages": [{"role": "user", "content": "hi"}]}
            return httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30)

        with ThreadPoolExecutor(
            max_workers=60
        ) as pool:  # far over 20 a second, however busy the machine
            burst = list(pool.map(ask, range(240)))
        rejected = [r for r in burst if r.status_code == 429]
        assert (
            rejected
            and float(rejected[0].headers["retry-after-ms"]) > 0
            and rejected[0].headers["retry-after"]
        )
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "simulated endpoint (not a real model)" in out and "at most 20 requests/s" in out


def test_sim_answers_can_be_as_long_as_a_reasoning_models():
    server = BackgroundSimServer(think_words=1500).start()
    try:
        client = OpenAI(base_url=server.base_url, api_key="EMPTY")
        reply = client.chat.completions.create(
            model="vftui-sim",
            messages=[{"role": "user", "content": "Sort these names alphabetically: Zoe, Ada"}],
            temperature=0.0,
        )
    finally:
        server.stop()
    text = reply.choices[0].message.content
    assert text.startswith("<think>\n") and text.endswith(
        "<alphabetical_sorted>\nAda\nZoe\n</alphabetical_sorted>"
    )
    assert reply.usage.completion_tokens > 1500


def test_json_into_a_reader_that_stops_early_ends_the_run_quietly(tmp_path):
    """``vftui run --json | head -1``: no BrokenPipeError traceback, the groups so far kept."""
    out = tmp_path / "groups.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vftui",
            "run",
            "--no-ui",
            "--json",
            "--steps",
            "200",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its line
    stderr = proc.stderr.read()
    proc.wait(timeout=120)
    assert (
        json.loads(first)["event"] and "Traceback" not in stderr and "BrokenPipe" not in stderr
    ), stderr
    assert proc.returncode in (0, 130) and "run stopped" in stderr, stderr


def test_sim_latency_slows_the_embedded_endpoint_only(tmp_path):
    out = tmp_path / "slow.jsonl"
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--sim-latency",
            "0.4",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert all(g["vftui"]["elapsed_s"] >= 0.4 for g in read_jsonl(out)), (
        "each request took the latency asked for"
    )
    refused = run_cli(
        ["run", "--no-ui", "--sim-latency", "1", "--base-url", "http://127.0.0.1:9/v1"], tmp_path
    )
    assert (
        refused.returncode == 2 and "--sim-latency slows the embedded simulation" in refused.stderr
    )


@pytest.mark.parametrize(
    ("table", "code"), [(["--json"], 141), (["--no-ui"], 0)], ids=["json", "table"]
)
def test_output_whose_reader_went_away_ends_quietly_as_a_pipe_writer_should(tmp_path, table, code):
    """``vftui compare A B --json | head -1``: the reader closes the pipe; no traceback. JSON ends with the SIGPIPE
    exit code; lines for a person are dropped, as for a terminal that hung up."""
    data = str(REPO / "tests" / "data" / "groups.jsonl")
    process = start_cli(["compare", data, data, *table], tmp_path)
    process.stdout.close()  # before it writes a byte
    said = process.stderr.read()
    assert process.wait(timeout=120) == code and said == "", said


def test_a_run_in_a_callers_own_process_gives_the_stop_signals_back(tmp_path, monkeypatch, capsys):
    """The CLI's own process ignores them as it ends; a caller's would have passed SIG_IGN to what it starts next."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    found = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    assert (
        main(
            [
                "run",
                "--no-ui",
                "--steps",
                "1",
                "--group-size",
                "2",
                "--out",
                str(tmp_path / "g.jsonl"),
            ]
        )
        == 0
    )
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == found
