"""``vftui watch RUN_DIR``, ``status``, ``tokens`` and ``sim-prime-run`` run the way a user runs them, on
runs written in prime-rl's own formats (``vftui.sim.prime_run``): exit codes, the check-in, the worst
tokens against the files, the dashboard in Pilot and in tmux, and the browser tab's command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import (
    free_port,
    run_cli,
    screen_lines,
    start_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    until,
    wait_for_screen,
    wait_until,
)
from vftui.commands.serve import _what_to_run
from vftui.sim.prime_run import SimRun, write
from vftui.training import token_exports
from vftui.training.follow import Follower
from vftui.training.layout import find
from vftui.ui.training.app import TrainingApp
from vftui.ui.training.charts_screen import TrainingChartsScreen
from vftui.ui.training.tokens_screen import SequenceScreen, TokensScreen


def sim_run(tmp_path: Path, name: str = "run", **kwargs) -> Path:
    return write(SimRun(tmp_path / "out" / name, **kwargs))


def test_status_of_a_healthy_finished_run_exits_0_and_says_each_section(tmp_path):
    run = sim_run(tmp_path, steps=30)
    result = run_cli(["status", str(run)], tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "**Step**: 30 / 30 (finished)" in out and "**Health**: Healthy" in out
    for section in (
        "**Progress**: reward",
        "**Stability**: entropy",
        "**Performance**: trainer step",
    ):
        assert section in out
    assert "the orchestrator waits on the trainer" in out


def test_status_of_troubled_run_exits_3_naming_each_alert_with_its_figure(tmp_path):
    run = sim_run(
        tmp_path, steps=40, troubles=frozenset({"entropy_collapse", "grad_spike", "log_error"})
    )
    result = run_cli(["status", str(tmp_path / "out"), "--json"], tmp_path)
    assert result.returncode == 3, result.stderr
    said = json.loads(result.stdout)
    assert said["run"] == str(run) and said["health"] == "Degraded"
    alerts = {a["name"]: a for a in said["alerts"]}
    assert {"entropy_collapse", "grad_spike", "log_errors"} <= set(alerts)
    assert alerts["entropy_collapse"]["value"] > alerts["entropy_collapse"]["threshold"]
    assert said["logs"][0]["file"] == "trainer.log" and said["logs"][0]["level"] == "ERROR"
    assert "NaN loss" in said["logs"][0]["message"]


def test_a_stalled_run_is_down(tmp_path):
    run = sim_run(tmp_path, steps=20, ago_s=3600)
    result = run_cli(["status", str(run)], tmp_path)
    assert result.returncode == 3
    assert "**Health**: Down" in result.stdout and "stalled: no new step for" in result.stdout


def test_status_append_adds_entries_and_notify_runs_only_when_the_health_changes(tmp_path):
    run = sim_run(tmp_path, steps=30)
    status_md, calls = tmp_path / "STATUS.md", tmp_path / "calls"
    status_md.write_text("# my notes\n")
    notify = f"echo $VFTUI_PREVIOUS_HEALTH-$VFTUI_HEALTH >> {shlex.quote(str(calls))}"
    args = ["status", str(run), "--append", str(status_md), "--notify", notify]
    assert run_cli(args, tmp_path).returncode == 0
    assert run_cli(args, tmp_path).returncode == 0
    assert not calls.exists()  # Healthy twice: nothing changed
    (run / "logs" / "latest" / "trainer.log").open("a").write("12:00:00   ERROR boom\n")
    assert run_cli(args, tmp_path).returncode == 3
    assert calls.read_text() == "Healthy-Degraded\n"
    text = status_md.read_text()
    assert text.startswith("# my notes\n") and text.count("**Health**:") == 3


def test_notify_keeps_json_whole_and_a_webhooks_secrets_off_the_screen(tmp_path):
    """The probe's findings: the command's output broke ``--json``; a webhook's password and
    token were printed with its failure."""
    run = sim_run(tmp_path, steps=30)
    (run / "logs" / "latest" / "trainer.log").open("a").write("12:00:00   ERROR boom\n")
    first = run_cli(["status", str(run)], tmp_path)  # remembered: Degraded
    assert first.returncode == 3
    (run / "logs" / "latest" / "trainer.log").write_text("")
    said = run_cli(["status", str(run), "--json", "--notify", "echo from-the-command"], tmp_path)
    assert said.returncode == 0 and json.loads(said.stdout)["health"] == "Healthy"
    assert "from-the-command" in said.stderr
    (run / "logs" / "latest" / "trainer.log").write_text("12:00:00   ERROR boom\n")
    port = free_port()  # nothing listens there
    hook = f"http://user:SECRETPASS@127.0.0.1:{port}/hook?token=SECRETTOKEN"
    failed = run_cli(["status", str(run), "--notify", hook], tmp_path)
    assert failed.returncode == 3 and f"127.0.0.1:{port}/hook" in failed.stderr
    assert "SECRET" not in failed.stderr + failed.stdout


def test_status_says_one_sentence_for_what_is_not_a_run(tmp_path):
    (tmp_path / "empty").mkdir()
    for target, said in (
        (tmp_path / "empty", "is not a prime-rl run"),
        (tmp_path / "nothing", "does not exist"),
    ):
        result = run_cli(["status", str(target)], tmp_path)
        assert result.returncode == 2 and said in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_tokens_lists_the_worst_tokens_the_files_hold_decoded(tmp_path):
    run = sim_run(tmp_path, steps=12, troubles=frozenset({"mismatch_spike"}))
    spike = 10  # two steps before the end
    result = run_cli(["tokens", str(run), "--step", str(spike), "--worst", "2", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    lines = (run / "token_exports" / f"step_{spike}" / "rank_0.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    # the planted tokens: the file's own largest mismatch_kl among trained tokens
    trained = zip(first["mismatch_kl"], first["loss_mask"], strict=True)
    ranked = sorted(
        ((kl, i) for i, (kl, m) in enumerate(trained) if m), key=lambda t: (-t[0], t[1])
    )[:2]
    assert [(w["rank"], w["sequence"], w["position"]) for w in said["worst"]] == [
        (0, 0, i) for _, i in ranked
    ]
    assert [w["key"] for w in said["worst"]] == [kl for kl, _ in ranked]
    assert all(w["text"] for w in said["worst"])  # decoded with the run's own tokenizer
    assert said["mismatch_kl"]["max"] == ranked[0][0]
    text = run_cli(["tokens", str(run), "--step", str(spike), "--sequence", "0:0"], tmp_path)
    assert text.returncode == 0 and "worst 20 trained tokens by mismatch_kl" in text.stdout
    assert "sequence 0:0 of step 10" in text.stdout


def test_tokens_waits_for_a_step_still_being_written_and_names_what_is_missing(tmp_path):
    run = sim_run(tmp_path, steps=3)
    (run / "token_exports" / "step_3" / "STABLE").unlink()
    result = run_cli(["tokens", str(run), "--step", "3"], tmp_path)
    assert result.returncode == 2 and "still being written" in result.stderr
    newest = run_cli(["tokens", str(run), "--json"], tmp_path)
    assert newest.returncode == 0 and json.loads(newest.stdout)["step"] == 2
    missing = run_cli(["tokens", str(run), "--step", "99"], tmp_path)
    assert missing.returncode == 2 and "step 99 was not exported" in missing.stderr
    bad = run_cli(["tokens", str(run), "--sequence", "zero"], tmp_path)
    assert bad.returncode == 2 and "write RANK:SEQ" in bad.stderr and not bad.stdout


def test_tokens_without_the_runs_tokenizer_shows_ids_and_says_why(tmp_path):
    run = sim_run(tmp_path, steps=2)
    (run / "configs" / "rl.json").write_text(json.dumps({"model": {"name": "someone/not-here"}}))
    result = run_cli(["tokens", str(run), "--json"], tmp_path)
    assert result.returncode == 0
    said = json.loads(result.stdout)
    assert said["worst"][0]["text"] is None
    assert any("someone/not-here cannot be loaded here" in n for n in said["notes"])
    given = run_cli(["tokens", str(run), "--tokenizer", "someone/not-here"], tmp_path)
    assert given.returncode == 2 and "--tokenizer someone/not-here cannot be loaded" in given.stderr


def test_sim_prime_run_refuses_a_folder_in_use_and_unknown_trouble(tmp_path):
    run = sim_run(tmp_path, steps=1)
    used = run_cli(["sim-prime-run", str(run)], tmp_path)
    assert used.returncode == 2 and "is not empty" in used.stderr
    odd = run_cli(["sim-prime-run", str(tmp_path / "new"), "--trouble", "meteor"], tmp_path)
    assert odd.returncode == 2 and "--trouble meteor: not one of" in odd.stderr


def test_watch_headless_follows_a_growing_run_step_by_step(tmp_path):
    run = tmp_path / "out" / "run"
    writer = start_cli(["sim-prime-run", str(run), "--steps", "6", "--every", "0.5"], tmp_path)
    try:
        wait_until(lambda: (run / "metrics.jsonl").exists(), "the first step")
        watch = run_cli(["watch", str(run), "--no-ui", "--every", "0.5", "--count", "8"], tmp_path)
    finally:
        writer.wait(timeout=60)
    assert watch.returncode == 0, watch.stderr
    steps = [int(line.split()[1]) for line in watch.stdout.splitlines() if line.startswith("step ")]
    assert steps == sorted(steps) and steps[-1] > steps[0]


def test_serve_opens_watch_for_a_prime_rl_run_with_metrics_and_view_for_rollouts_only(tmp_path):
    run = sim_run(tmp_path, steps=1)
    assert _what_to_run([run]) == ["watch", str(run)]
    rollouts = tmp_path / "rollouts-only"
    (rollouts / "rollouts" / "step_0").mkdir(parents=True)
    assert _what_to_run([rollouts])[0] == "view"


async def test_the_dashboard_shows_health_figures_alerts_and_a_new_step_as_it_is_written(tmp_path):
    run = sim_run(tmp_path, steps=25, troubles=frozenset({"entropy_collapse", "log_error"}))
    (run / "configs" / "rl.json").write_text(json.dumps({"max_steps": 100}))
    app = TrainingApp(Follower(find(run)), every_s=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: "Degraded" in "\n".join(screen_lines(app)), pilot=pilot)
        shown = "\n".join(screen_lines(app))
        assert "step 25 / 100" in shown and "entropy_collapse" in shown
        assert "NaN loss" in shown  # the log's ERROR line, quoted
        from vftui.training.metrics_file import append_row

        append_row(run / "metrics.jsonl", 26, {"time/step": 8.0, "time/wait_for_batch": 0.1})
        await until(lambda: "step 26 / 100" in "\n".join(screen_lines(app)), pilot=pilot)
        await pilot.press("m")
        await until(lambda: "metrics: newest value" in "\n".join(screen_lines(app)), pilot=pilot)
        assert "optim/grad_norm" in "\n".join(screen_lines(app))
        await pilot.press("escape", "t")
        await until(
            lambda: isinstance(app.screen, TokensScreen) and app.screen.figures, pilot=pilot
        )
        screen = app.screen
        assert isinstance(screen, TokensScreen) and screen.figures is not None
        newest = token_exports.read_step(
            token_exports.steps(run / "token_exports")[-1], "mismatch_kl", 50
        )
        assert [t.key for t in screen.figures.worst] == [t.key for t in newest.worst]
        await pilot.press("enter")  # the worst token's sequence, colored
        await until(lambda: isinstance(app.screen, SequenceScreen), pilot=pilot)
        assert "red by mismatch_kl" in "\n".join(screen_lines(app))
        await pilot.press("q")


async def test_the_charts_overlay_the_with_runs_by_step_under_their_letters(tmp_path):
    main = sim_run(tmp_path, "main", steps=30)
    other = sim_run(tmp_path, "[bold]other", steps=12, troubles=frozenset({"entropy_collapse"}))
    app = TrainingApp(Follower(find(main)), every_s=0.1, others=[Follower(find(other))])
    async with app.run_test(size=(140, 40)) as pilot:
        await until(lambda: "step 30 / 30" in "\n".join(screen_lines(app)), pilot=pilot)
        await pilot.press("g")
        await until(lambda: isinstance(app.screen, TrainingChartsScreen), pilot=pilot)
        screen = app.screen
        assert isinstance(screen, TrainingChartsScreen)
        assert list(screen.curves) == ["A main", "B [bold]other"]
        entropy = screen.curves["B [bold]other"]["entropy"]
        assert [s for s, _ in entropy] == list(range(1, 13))
        await until(  # the name as written, not markup
            lambda: all(
                name in "\n".join(screen_lines(app)) for name in ("━━ A main", "━━ B [bold]other")
            ),
            pilot=pilot,
            timeout=10,
        )
        await pilot.press("escape", "q")


@pytest.mark.needs("tmux")
def test_watch_in_tmux_follows_the_run_and_quits_on_q(tmp_path):
    run = tmp_path / "out" / "run"
    writer = start_cli(["sim-prime-run", str(run), "--steps", "8", "--every", "0.7"], tmp_path)
    try:
        wait_until(lambda: (run / "metrics.jsonl").exists(), "the first step")
        command = tmux_cli_command(tmp_path, f"watch {shlex.quote(str(run))}") + "; sleep 60"
        with tmux_session(command, width=120, height=36) as session:
            wait_for_screen(session, "progress")
            wait_for_screen(session, "step 8 / 8 (finished)", timeout=120)
            tmux("send-keys", "-t", session, "q")
            wait_until(
                lambda: "progress" not in tmux("capture-pane", "-p", "-t", session),
                "the dashboard never closed on q",
                timeout=30,
            )
    finally:
        writer.wait(timeout=60)


def test_tokens_of_an_atropos_rl_groups_file_lists_the_least_likely_sampled_tokens(tmp_path):
    """A vftui rl run keeps the sampler's logprob of each token (1.0 on the masked prompt): the trained
    tokens it found least likely come first; masked ones never."""
    group = {
        "tokens": [[5, 6, 7, 8], [5, 6, 9, 10]],
        "masks": [[-100, -100, 7, 8], [-100, -100, 9, 10]],
        "scores": [1.0, 0.0],
        "inference_logprobs": [[1.0, 1.0, -0.1, -4.0], [1.0, 1.0, -2.5, -0.2]],
    }
    sft = {"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [1.0]}
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps(group) + "\n" + json.dumps(sft) + "\n{torn")
    result = run_cli(["tokens", str(path), "--worst", "3", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    assert said["by"] == "sampler_logprob" and said["trained"] == 4
    assert [(w["rank"], w["sequence"], w["position"]) for w in said["worst"]] == [
        (1, 0, 3),
        (1, 1, 2),
        (1, 1, 3),
    ]
    assert [w["values"]["inference_logprobs"] for w in said["worst"]] == [-4.0, -2.5, -0.2]
    assert any("1 groups carry no logprobs" in n for n in said["notes"])
    assert any("line 3: not a group" in n for n in said["notes"])
    wrong = run_cli(["tokens", str(path), "--by", "mismatch_kl"], tmp_path)
    assert wrong.returncode == 2 and "--by sampler_logprob" in wrong.stderr
    text = run_cli(["tokens", str(path), "--sequence", "1:0"], tmp_path)
    assert text.returncode == 0 and "group 1 rollout 0 pos 3" in text.stdout
    assert "sampler_logprob -4" in text.stdout


def test_tokens_of_what_is_not_a_run_and_a_busy_poll_are_refused(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    tokens = run_cli(["tokens", str(passwd)], tmp_path)
    assert tokens.returncode == 2 and "no rl group in it" in tokens.stderr
    run = sim_run(tmp_path, steps=3)
    busy = run_cli(["watch", str(run), "--no-ui", "--every", "1e-9"], tmp_path)
    assert busy.returncode == 2 and "--every takes 0.1 to 3600 seconds" in busy.stderr
