"""rl mode end to end on CPU: the real run-api, the simulated vLLM-style server, the real CLI.

The test is the trainer: it registers with the trajectory API and pulls batches, then
checks them against what the simulated inference server returned.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess

import httpx
import pytest
from transformers import AutoTokenizer

from tests.conftest import (
    Trainer,
    collector_process,
    free_port,
    json_events,
    read_jsonl,
    read_until,
    run_cli,
    screen_lines,
    sim_admin,
    start_cli,
    until,
    wait_until,
)
from tests.wandb_log import history
from vftui.collector.rl import api_process
from vftui.collector.rl.api_process import ApiProcess
from vftui.config import RunConfig
from vftui.errors import UserError
from vftui.events import FileProgress, RunState
from vftui.run_files.groupfile import GroupFile
from vftui.sim.server import TOKENIZER_DIR, BackgroundSimServer
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox
from vftui.ui.widgets.trajectory_panel import TrajectoryPanel

GROUP_SIZE, GROUPS = 4, 4


def finish(process, timeout: float = 240) -> tuple[int, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(
            f"the run did not finish in {timeout:g} s; its stderr:\n{err[-4000:]}"
        ) from None
    process.printed = out  # stdout: --json's events
    return process.returncode, err


def rl_args(sim, api_url: str, out) -> list[str]:
    return [
        "run",
        "--mode",
        "rl",
        "--no-ui",
        "--steps",
        str(GROUPS),
        "--group-size",
        str(GROUP_SIZE),
        "--base-url",
        sim.base_url,
        "--api-url",
        api_url,
        "--out",
        str(out),
        "--env-args",
        '{"max_turns": 3}',
    ]


def test_rl_batches_hold_one_sequence_per_rollout_with_the_servers_logprobs(sim, api, tmp_path):
    trainer = Trainer(api.api_url, batches=GROUPS // 2)
    out = tmp_path / "groups.jsonl"
    code, err = finish(start_cli(rl_args(sim, api.api_url, out), tmp_path))
    assert code == 0, err
    trainer.thread.join(timeout=60)
    saved = read_jsonl(out)
    assert len(saved) == GROUPS and len(trainer.groups) == GROUPS, (
        "every collected group reached the trainer"
    )
    assert sorted(map(str, (g["tokens"] for g in trainer.groups))) == sorted(
        map(str, (g["tokens"] for g in saved))
    )

    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    returned = [
        (tuple(o["ids"]), tuple(o["logprobs"]))
        for r in sim_admin(sim, "/sim/requests")["requests"]
        if r.get("path") == "/generate"
        for o in r["outputs"]
    ]
    for group in trainer.groups:
        for tokens, masks, logprobs, messages in zip(
            group["tokens"],
            group["masks"],
            group["inference_logprobs"],
            group["messages"],
            strict=True,
        ):
            assert len(tokens) == len(masks) == len(logprobs)
            assert sum(m["role"] == "assistant" for m in messages) == 3, "a 3-turn rollout"
            final = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=False
            )
            assert tokenizer.decode(tokens) == final, (
                "the sequence is exactly the final conversation"
            )
            spans = generated_spans(tokens, masks, logprobs)
            assert len(spans) == 3, "each turn's generation appears once"
            for span in spans:
                assert span in returned, "tokens and logprobs are the ones the server returned"
            assert all(lp == 1.0 for lp, m in zip(logprobs, masks, strict=True) if m == -100)
            assert all(m == t for t, m in zip(tokens, masks, strict=True) if m != -100)


def generated_spans(tokens, masks, logprobs) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """The runs of unmasked tokens, with their logprobs."""
    spans, ids, lps = [], [], []
    for token, mask, lp in [*zip(tokens, masks, logprobs, strict=True), (None, -100, None)]:
        if mask != -100:
            ids.append(token)
            lps.append(round(lp, 6))
        elif ids:
            spans.append((tuple(ids), tuple(lps)))
            ids, lps = [], []
    return spans


def test_rl_waits_for_an_api_that_is_down_at_start(sim, tmp_path):
    api_url = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "groups.jsonl"
    process = start_cli(rl_args(sim, api_url, out), tmp_path)
    for attempt in (
        "(attempt 1",
        "(attempt 2",
    ):  # a second report: still waiting for the API, not crashed
        read_until(
            process.stderr,
            f"trajectory API error {attempt}",
            f"the outage was not reported {attempt}",
        )
    assert process.poll() is None
    api = ApiProcess(api_url).start()
    try:
        trainer = Trainer(api_url, batches=GROUPS // 2)
        code, err = finish(process)
        trainer.thread.join(timeout=60)
    finally:
        api.stop()
    assert code == 0, err
    assert len(trainer.groups) == len(read_jsonl(out)) == GROUPS


def test_rl_rides_out_inference_server_errors(sim, api, tmp_path):
    # atroposlib retries each /generate 3 times itself: 12 failures outlast that for a group of 4
    sim_admin(sim, "/sim/faults", {"status": 503, "count": 12})
    trainer = Trainer(api.api_url, batches=GROUPS // 2)
    out = tmp_path / "groups.jsonl"
    code, err = finish(start_cli([*rl_args(sim, api.api_url, out), "--retries", "8"], tmp_path))
    trainer.thread.join(timeout=60)
    assert code == 0, err
    assert sim_admin(sim, "/sim/requests")["faults_left"] == 0, "every injected 503 was served"
    assert len(trainer.groups) == len(read_jsonl(out)) == GROUPS, "no group lost or sent twice"


def test_rl_survives_an_api_restart_mid_run(tmp_path):
    sim = BackgroundSimServer(seed=0, latency_s=0.2).start()
    api_url = f"http://127.0.0.1:{free_port()}"
    api = ApiProcess(api_url).start()
    steps = 6
    trainer = Trainer(
        api_url, batches=steps, groups_per_batch=1
    )  # every group is pulled as soon as it is sent
    out = tmp_path / "groups.jsonl"
    args = [*rl_args(sim, api_url, out), "--steps", str(steps)]
    process = start_cli(args, tmp_path)
    try:

        def pulled() -> bool:
            assert process.poll() is None, "the run ended"
            return (
                len(trainer.groups) >= 2
                and not httpx.get(f"{api_url}/status", timeout=5).json()["queue_size"]
            )

        wait_until(pulled, "no groups reached the trainer", 120)
        api.stop()  # run-api keeps its queue in memory: stop it when the trainer has pulled everything
        read_until(process.stderr, "trajectory API error", "the outage was not reported")
        api = ApiProcess(api_url).start()
        code, err = finish(process)
        trainer.thread.join(timeout=60)
    finally:
        api.stop()
        sim.stop()
    assert code == 0, err
    saved = read_jsonl(out)
    assert len(saved) == steps and len(trainer.groups) == steps, "every group arrived once"
    assert sorted(map(str, (g["tokens"] for g in trainer.groups))) == sorted(
        map(str, (g["tokens"] for g in saved))
    )


async def test_dashboard_shows_the_trajectory_api_in_rl_mode(sim, api, tmp_path):
    trainer = Trainer(api.api_url, batches=GROUPS // 2)
    config = RunConfig(
        mode="rl",
        base_url=sim.base_url,
        api_url=api.api_url,
        group_size=GROUP_SIZE,
        steps=GROUPS,
        out=tmp_path / "groups.jsonl",
    )
    inbox = Inbox()
    run = collector_process(config, inbox.put)
    run.start()
    app = VftuiApp(StartedRun(inbox, run))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(
                pilot=pilot, predicate=lambda: app.model.state is RunState.FINISHED, timeout=180
            )
            panel = app.query_one(TrajectoryPanel)
            await until(
                lambda: f"sent {GROUPS}" in str(panel.query_one("#api-text").render()), pilot=pilot
            )
            assert panel.display, "shown in rl mode"
            text = str(panel.query_one("#api-text").render())
            assert "trainer registered (batch size 8)" in text
            assert f"sent {GROUPS}" in text and "dropped" in text
            await pilot.press("q")
    finally:
        run.close()
    trainer.thread.join(timeout=60)
    assert len(trainer.groups) == GROUPS


def test_rl_on_the_embedded_default_starts_api_and_sim_trainer(tmp_path):
    out = tmp_path / "groups.jsonl"
    args = [
        "run",
        "--mode",
        "rl",
        "--no-ui",
        "--start-api",
        "--api-url",
        f"http://127.0.0.1:{free_port()}",
        "--steps",
        "2",
        "--group-size",
        str(GROUP_SIZE),
        "--out",
        str(out),
    ]
    code, err = finish(start_cli(args, tmp_path))
    assert code == 0, err
    assert "SIMULATION" in err and len(read_jsonl(out)) == 2


def test_an_rl_run_no_trainer_joins_says_how_to_start_one_and_stall_timeout_ends_it(
    sim, api, tmp_path
):
    """With a real server and no trainer it waited for ever, saying only 'waiting for a trainer to register'."""
    out = tmp_path / "groups.jsonl"
    args = [*rl_args(sim, api.api_url, out), "--stall-timeout", "3"]
    code, err = finish(start_cli(args, tmp_path), timeout=120)
    assert code == 4 and "Traceback" not in err, err
    said = f"waiting for a trainer to register at {api.api_url} (--stall-timeout bounds the wait)"
    assert said in err
    assert "--stall-timeout 3: no trainer registered with the trajectory API for" in err, err


def test_start_api_on_a_port_in_use_says_so(tmp_path, monkeypatch):
    """It said 'the trajectory API could not start on port N: INFO: Application shutdown complete.', uvicorn's
    last line; the port is looked at first, and a port taken after that is said as such too."""
    with socket.socket() as taken:  # listening, never answering: no trajectory API to use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = (
            f"port {port} is in use (another trajectory API?): free it, or give --api-url "
            "another port"
        )
        args = ["run", "--mode", "rl", "--no-ui", "--start-api", "--steps", "1"]
        done = run_cli([*args, "--api-url", f"http://127.0.0.1:{port}"], tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1] == f"vftui: error: {busy}"
        monkeypatch.setattr(api_process, "_in_use", lambda port: False)
        with pytest.raises(UserError) as refused:
            ApiProcess(f"http://127.0.0.1:{port}").start()
        assert str(refused.value) == busy


def test_rl_balances_several_inference_servers(sim, api, tmp_path):
    second = BackgroundSimServer(seed=1).start()
    try:
        trainer = Trainer(api.api_url, batches=GROUPS // 2)
        args = [
            *rl_args(sim, api.api_url, tmp_path / "groups.jsonl"),
            "--base-url",
            second.base_url,
        ]
        code, err = finish(start_cli(args, tmp_path))
        trainer.thread.join(timeout=60)
        served = [
            sum(r.get("path") == "/generate" for r in sim_admin(s, "/sim/requests")["requests"])
            for s in (sim, second)
        ]
    finally:
        second.stop()
    assert code == 0, err
    assert all(n > 0 for n in served), f"both servers generated: {served}"
    assert len(trainer.groups) == GROUPS


def test_groups_with_identical_scores_are_not_sent_and_are_counted(sim, api, tmp_path):
    process = start_cli(
        [*rl_args(sim, api.api_url, tmp_path / "groups.jsonl"), "--temperature", "0", "--json"],
        tmp_path,
    )
    Trainer(api.api_url, batches=1)
    read_until(process.stderr, "left out: identical scores", "no group was reported as dropped")
    process.send_signal(signal.SIGINT)
    code, err = finish(process)
    assert code == 130, err
    assert "groups were left out (not sent, not saved as data): " in err
    assert "identical scores, all high (too easy)" in err
    logged = [e["message"] for e in json_events(process.printed) if e["event"] == "LogRecord"]
    assert not [m for m in logged if "Scores are the same" in m], (
        "one line per drop: ours, which says why"
    )
    assert read_jsonl(tmp_path / "groups.jsonl") == [], (
        "at temperature 0 every group scores the same"
    )
    rate = re.search(r"identical-score rate (\S+) \((\d+)/(\d+) groups\)", err)
    assert rate and rate.group(1) == "1.000" and rate.group(2) == rate.group(3) != "0", (
        "every scored group counts, sent or not"
    )
    viewed: list = []
    summary = GroupFile(tmp_path / "groups.jsonl").read(viewed.append, str(TOKENIZER_DIR))
    progress = [e for e in viewed if isinstance(e, FileProgress)][-1]
    assert progress.totals.metrics()["metrics/identical_score_rate"] == 1.0, (
        "view counts the drops the run recorded"
    )
    assert progress.totals.groups_total == int(rate.group(3)), (
        "as many groups as the run counted live"
    )
    assert sum(summary.dropped.values()) == int(rate.group(3))


def test_a_template_that_rewrites_earlier_turns_drops_groups_then_fails_the_run(sim, api, tmp_path):
    """Like Qwen3's, this template drops the reasoning of earlier assistant turns, so a multi-turn
    rollout's final context is not what was generated: no such group may reach a trainer."""
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(TOKENIZER_DIR, tokenizer)
    template = tokenizer / "chat_template.jinja"
    plain = "{%- else -%}{{- '<|im_start|>' + message['role']"
    strips = (
        "{%- elif message['role'] == 'assistant' and not loop.last -%}{{- '<|im_start|>assistant\n' + "
        "(message['content'] or '').split('</think>')[-1].lstrip('\n') + '<|im_end|>\n' -}}"
    )
    assert plain in template.read_text()
    template.write_text(template.read_text().replace(plain, strips + plain))
    sim_admin(sim, "/sim/settings", {"think_words": 5})
    Trainer(api.api_url, batches=GROUPS)
    args = [
        *rl_args(sim, api.api_url, tmp_path / "groups.jsonl"),
        "--tokenizer",
        str(tokenizer),
        "--retries",
        "2",
    ]
    code, err = finish(start_cli(args, tmp_path))
    assert code == 1, err
    assert (
        "left out: building the token sequence failed: the chat template renders earlier turns"
        in err
    )
    assert "building the token sequence failed in 3 groups in a row" in err
    assert read_jsonl(tmp_path / "groups.jsonl") == [], (
        "nothing that does not match its generation is kept"
    )


def test_rl_evaluates_every_s_trainer_steps_beside_training_and_logs_eval_to_wandb(tmp_path):
    out = tmp_path / "run" / "groups.jsonl"
    args = [
        "run",
        "--mode",
        "rl",
        "--no-ui",
        "--json",
        "--start-api",
        "--api-url",
        f"http://127.0.0.1:{free_port()}",
        "--steps",
        "16",
        "--group-size",
        str(GROUP_SIZE),
        "--eval-every",
        "2",
        "--num-examples",
        "5",
        "--rollouts-per-example",
        "2",
        "--wandb",
        "--out",
        str(out),
    ]
    result = run_cli(args, tmp_path, WANDB_MODE="offline")
    assert result.returncode == 0, result.stderr
    reports = [e for e in json_events(result.stdout) if e["event"] == "EvalReport"]
    assert len(reports) >= 2, "an eval every 2 trainer steps"
    steps = [r["step"] for r in reports]
    assert steps == sorted(set(steps)) and all(r["final"] and r["items"] == 5 for r in reports)
    assert all(r["rollouts_per_item"] == 2 and "pass@2" in r["figures"] for r in reports)
    assert len(read_jsonl(out)) == 16, "training went on while it evaluated"
    (run_file,) = (out.parent / "wandb").glob("offline-run-*/run-*.wandb")
    logged = [row for row in history(run_file) if "eval/pass@1" in row]
    assert len(logged) == len(reports)
    assert [row["eval/pass@1"] for row in logged] == pytest.approx(
        [r["figures"]["pass@1"]["mean"] for r in reports]
    )
    assert [row["eval/trainer_step"] for row in logged] == steps, "each eval a row of its own"
    assert all(row["_step"] >= r["step"] for row, r in zip(logged, reports, strict=True))


def test_an_eval_in_flight_at_a_stop_is_finished_reported_and_logged(sim, tmp_path):
    """atroposlib runs an eval as a task of its own, which outlived the serve loop: its report came
    after wandb's last row, or never."""
    out = tmp_path / "run" / "groups.jsonl"
    args = [
        *("run", "--mode", "rl", "--no-ui", "--json", "--wandb", "--out", str(out)),
        *("--start-api", "--sim-trainer", "--api-url", f"http://127.0.0.1:{free_port()}"),
        *("--base-url", sim.base_url, "--steps", "400", "--group-size", str(GROUP_SIZE)),
        *("--eval-every", "2", "--num-examples", "40", "--rollouts-per-example", "2"),
    ]
    process = start_cli(args, tmp_path, WANDB_MODE="offline")
    wait_until(
        lambda: any("path" not in r for r in sim_admin(sim, "/sim/requests")["requests"]),
        "an eval's first request (chat, not /generate)",
        timeout=120,
    )
    sim_admin(
        sim, "/sim/settings", {"latency_s": 0.5}
    )  # what is left of the eval outlasts the stop
    process.send_signal(signal.SIGINT)
    code, err = finish(process)
    assert code == 130, err
    reports = [e for e in json_events(process.printed) if e["event"] == "EvalReport"]
    assert reports and reports[-1]["items"] == 40, "the eval in flight at the stop was finished"
    (run_file,) = (out.parent / "wandb").glob("offline-run-*/run-*.wandb")
    logged = [row for row in history(run_file) if "eval/pass@1" in row]
    assert [row["eval/trainer_step"] for row in logged] == [r["step"] for r in reports]


async def test_dashboard_draws_the_eval_curve_over_trainer_steps(tmp_path):
    config = RunConfig(
        mode="rl",
        start_api=True,
        api_url=f"http://127.0.0.1:{free_port()}",
        group_size=GROUP_SIZE,
        steps=16,
        eval_every=2,
        num_examples=4,
        out=tmp_path / "groups.jsonl",
    )
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    app = VftuiApp(StartedRun(inbox, run))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(
                pilot=pilot, predicate=lambda: app.model.state is RunState.FINISHED, timeout=180
            )
            await pilot.pause(0.3)
            curve = app.model.eval_curve
            assert len(curve) >= 2 and [step for step, _ in curve] == sorted(
                step for step, _ in curve
            )
            assert app.dashboard.has_class("-evals") and app.query_one("#eval").display
            assert app.query_one("#eval-curve").data == [reward for _, reward in curve]
            assert f"step {curve[-1][0]}" in "\n".join(screen_lines(app))
            assert app.query_one("#identical").display, "rl keeps its identical-score panel"
            await pilot.press("q")
    finally:
        run.close()
