"""Hostile inputs (issue 15): nothing from outside drives the terminal.

The hostile endpoint is the simulated one behind a loopback proxy that lists a model id
full of escape sequences and appends more of them to every answer.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.conftest import (
    cli_env,
    dashboard_pid,
    hang_up,
    read_jsonl,
    recorded_pane,
    run_cli,
    serve_app,
    start_cli,
    tmux,
    tmux_cli_command,
    wait_for_lines,
    wait_for_screen,
    wait_until,
)
from vftui.sim.server import TOKENIZER_DIR
from vftui.text.printable import printable

TITLE_AND_CLIPBOARD = "\x1b]0;PWNTITLE\x07\x1b]52;c;UFdOQ0xJUA==\x07"
EVIL_MODEL = f"x{TITLE_AND_CLIPBOARD}"
EVIL_CONTENT = " \x1b[2J\x1b]0;PWNCONTENT\x07\x9b31m\u202eevil"


def hostile_proxy(upstream: str) -> web.Application:
    """/models lists EVIL_MODEL; every chat answer ends in EVIL_CONTENT."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": EVIL_MODEL, "object": "model"}]}
        )

    async def chat(request: web.Request) -> web.Response:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{upstream}/chat/completions", json=await request.json()) as answer,
        ):
            body = await answer.json()
        for choice in body.get("choices", []):
            if choice["message"].get("content"):
                choice["message"]["content"] += EVIL_CONTENT
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture
def hostile(sim) -> Iterator[str]:
    with serve_app(hostile_proxy(sim.base_url)) as base_url:
        yield base_url


def test_printable_shows_controls_and_keeps_the_rest():
    assert printable("a\x1b]0;t\x07b") == "a␛]0;t␇b"
    assert printable("\x9b31m \x7f \u202eabc") == "\\x9b31m ␡ \\u202eabc"
    text = "lines\n\ttabbed, ünïcode, 漢字, emoji 🙂"
    assert printable(text) is text


def test_headless_lines_carry_no_escape_and_the_file_stays_exact(tmp_path, hostile):
    out = tmp_path / "groups.jsonl"
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--verbose",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--base-url",
            hostile,
            "--tokenizer",
            str(TOKENIZER_DIR),
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    for control in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert control not in result.stderr
    assert (
        "x␛]0;PWNTITLE␇␛]52;c;UFdOQ0xJUA==␇" in result.stderr
    )  # the model id, shown for what it is
    groups = read_jsonl(out)
    assert groups[0]["vftui"]["model"] == EVIL_MODEL
    assert all(m[-1]["content"].endswith(EVIL_CONTENT) for g in groups for m in g["messages"])


@pytest.mark.needs("tmux")
def test_dashboard_and_view_show_escapes_without_obeying_them(tmp_path, hostile):
    out = tmp_path / "groups.jsonl"
    buffers_before = tmux("list-buffers", check=False)  # none: a server that is not there has none
    run = tmux_cli_command(
        tmp_path,
        f"run --steps 3 --group-size 2 --base-url {hostile} "
        f"--tokenizer {TOKENIZER_DIR} --out {shlex.quote(str(out))}",
    )
    with recorded_pane(tmp_path, f"{run}; echo EXIT=$?; sleep 600") as (session, raw):
        wait_for_screen(session, "x␛]0;PWNTITLE")
        wait_for_screen(session, "finished")
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "EXIT=0")
        title = tmux("display-message", "-p", "-t", session, "#{pane_title}")
    assert "PWN" not in title
    view = tmux_cli_command(tmp_path, f"view {shlex.quote(str(out))}")
    with recorded_pane(tmp_path, f"{view}; echo EXIT=$?; sleep 600") as (session, raw_view):
        wait_for_screen(session, "x␛]0;PWNTITLE")
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "EXIT=0")
        view_title = tmux("display-message", "-p", "-t", session, "#{pane_title}")
    assert "PWN" not in view_title
    buffers_after = tmux("list-buffers", check=False)
    assert buffers_after == buffers_before and "UFdOQ0xJUA" not in buffers_after
    for recording in (raw, raw_view):
        data = recording.read_bytes()
        assert b"PWNTITLE" in data  # the pane did show the id...
        assert b"\x1b]0;PWN" not in data and b"\x1b]52;" not in data  # ...as text
        assert data.count(b"\x07") == data.count(b"\x1b]22;"), (
            "a BEL that is not Textual's own pointer-shape OSC"
        )


NAN_REWARD_ENV = '''
import math

import verifiers as vf
from datasets import Dataset


def exact(completion, info, **kwargs):
    return {"nan": math.nan, "inf": -math.inf}.get(info["kind"], 1.0)


class OwnTotal(vf.Rubric):
    """A rubric of its own that writes a NaN total, past any reward function."""

    async def score_rollout(self, state):
        await super().score_rollout(state)
        if state["info"]["kind"] == "total":
            state["reward"] = math.nan

    async def score_group(self, states):
        await super().score_group(states)
        for state in states:
            if state["info"]["kind"] == "total":
                state["reward"] = math.nan


def load_environment(kinds="ok nan ok inf total ok"):
    rows = [{"question": "Sort these names alphabetically: Zoe, Ada", "answer": "", "info": {"kind": k}}
            for k in kinds.split()]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=OwnTotal(funcs=[exact]))
'''


def read_view(path):
    """What ``vftui view`` reads from ``path``: its events, and how many lines it skipped."""
    from vftui.run_files.groupfile import GroupFile

    events, rows = [], GroupFile(path)
    rows.read(events.append, str(TOKENIZER_DIR))
    return events, rows.skipped


def strict_json(line: str):
    def refuse(name):
        raise AssertionError(f"{name} in {line[:200]}")

    return json.loads(line, parse_constant=refuse)


def test_a_non_finite_reward_drops_its_group_naming_the_function_and_json_stays_strict(
    tmp_path, sim
):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "nan_reward.py").write_text(NAN_REWARD_ENV)
    out = tmp_path / "groups.jsonl"
    base = [
        "run",
        "--no-ui",
        "--json",
        "--env",
        "nan-reward",
        "--group-size",
        "2",
        "--base-url",
        sim.base_url,
    ]
    result = run_cli(
        [*base, "--steps", "3", "--out", str(out)], tmp_path, PYTHONPATH=str(tmp_path / "envs")
    )
    assert result.returncode == 0, result.stderr
    events = [strict_json(line) for line in result.stdout.splitlines()]
    dropped = {e["item"]: e["reason"] for e in events if e["event"] == "GroupDropped"}
    assert dropped == {
        1: "reward function 'exact' failed: ValueError: returned nan, not a finite number",
        3: "reward function 'exact' failed: ValueError: returned -inf, not a finite number",
        4: "the rubric's total reward failed: nan, not a finite number",
    }
    assert "group of item 1 left out: reward function 'exact' failed" in result.stderr
    groups = [strict_json(line) for line in out.read_text().splitlines()]
    assert {g["vftui"]["item"] for g in groups} == {0, 2, 5} and all(
        s == 1.0 for g in groups for s in g["scores"]
    )

    always = run_cli(
        [
            *base,
            "--env-args",
            '{"kinds": "total total total total"}',
            "--steps",
            "4",
            "--retries",
            "1",
            "--out",
            str(tmp_path / "always.jsonl"),
        ],
        tmp_path,
        PYTHONPATH=str(tmp_path / "envs"),
    )
    assert always.returncode == 1 and "Traceback" not in always.stderr
    assert "the rubric's total reward failed in 2 groups in a row" in always.stderr


def test_view_skips_lines_with_nan_or_infinity_and_names_them(tmp_path):
    good = {"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [0.5]}
    path = tmp_path / "groups.jsonl"
    lines = [
        json.dumps(good),
        json.dumps({**good, "scores": [math.nan]}),
        json.dumps({**good, "scores": [math.inf]}),
    ]
    path.write_text("\n".join(lines) + "\n")
    events, skipped = read_view(path)
    assert skipped == 2
    problems = [e.message for e in events if type(e).__name__ == "LogRecord"]
    assert problems == [
        "groups.jsonl line 2 skipped: not strict JSON (NaN is not JSON)",
        "groups.jsonl line 3 skipped: not strict JSON (Infinity is not JSON)",
    ]
    assert [e.totals.rewards.count for e in events if type(e).__name__ == "FileProgress"][-1] == 1


# -- files: one owner, whole lines, nothing half-written ------------------------------------


def test_a_second_run_or_a_resume_of_a_live_run_is_refused_naming_its_process(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    first = start_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "1000",
            "--group-size",
            "2",
            "--concurrency",
            "2",
            "--base-url",
            slow_sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
    )
    try:
        wait_for_lines(out, 1, first)
        second = run_cli(["run", "--no-ui", "--steps", "2", "--out", str(out)], tmp_path)
        resume = run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path)
    finally:
        first.terminate()
        first.communicate(timeout=60)
    for refused in (second, resume):
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert f"{out} is being written by another vftui run (pid {first.pid})" in refused.stderr
    assert "choose another --out" in second.stderr and "stop it before resuming it" in resume.stderr
    lines = read_jsonl(out)
    assert len({g["vftui"]["item"] for g in lines}) == len(lines), "no item written twice"
    assert not out.with_suffix(".lock").exists(), "the lock goes with its run"
    assert not out.with_name("groups_1.jsonl").exists()


def test_two_runs_started_at_once_on_one_out_one_writes_and_the_other_is_refused_naming_it(
    tmp_path,
):
    """Neither waits for the other to be under way: whichever takes the file first writes it, the other is
    refused naming its pid, and no ``groups_1.jsonl`` appears (that is for a finished file, README)."""
    out = tmp_path / "groups.jsonl"
    args = [
        "run",
        "--no-ui",
        "--steps",
        "200",
        "--group-size",
        "2",
        "--sim-latency",
        "0.5",
        "--out",
        str(out),
    ]
    runs = [start_cli(args, tmp_path), start_cli(args, tmp_path)]
    try:
        refused = wait_until(
            lambda: next((r for r in runs if r.poll() is not None), None),
            "neither was refused",
            120,
        )
        writing = runs[1 - runs.index(refused)]
        assert writing.poll() is None, "the other goes on"
    finally:
        for run in runs:
            run.terminate()
        outputs = [run.communicate(timeout=60) for run in runs]
    said = outputs[runs.index(refused)][1]
    assert refused.returncode == 2 and "Traceback" not in said
    assert (
        f"{out} is being written by another vftui run (pid {writing.pid}); wait for it to end"
        in said
    )
    assert not out.with_name("groups_1.jsonl").exists()


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    from vftui.run_files.files import RunFiles

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    folders = {RunFiles.new(None, "owner/env").folder for _ in range(3)}
    assert len(folders) == 3 and all(f.is_dir() for f in folders)


def test_the_lock_refuses_a_second_holder_and_is_free_again_after_release(tmp_path):
    from vftui.errors import UserError
    from vftui.run_files.files import RunFiles
    from vftui.run_files.lock import RunLock

    out = RunFiles(tmp_path / "g.jsonl")
    held = RunLock(out).acquire("hint")
    with pytest.raises(UserError, match=rf"pid {os.getpid()}\); hint"):
        RunLock(out).acquire("hint")
    held.release()
    RunLock(out).acquire("hint").release()
    assert not (tmp_path / "g.lock").exists()


def limited_file_size(limit: int):
    def apply() -> None:  # in the child: writes past ``limit`` fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def run_limited(args: list[str], tmp_path, limit: int | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vftui", *args],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=limited_file_size(limit) if limit else None,
    )


def test_a_full_disk_ends_the_run_with_one_sentence_and_whole_lines(tmp_path):
    out = tmp_path / "run" / "groups.jsonl"
    args = ["run", "--no-ui", "--steps", "30", "--group-size", "2"]
    full = run_limited([*args, "--out", str(out)], tmp_path, limit=20_000)
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr
    assert "reason: cannot write " in full.stderr and "File too large" in full.stderr
    written = [strict_json(line) for line in out.read_text().splitlines()]  # whole lines only
    assert 0 < len(written) < 30 and out.read_bytes().endswith(b"\n")
    assert not list(out.parent.glob("*.tmp")), "nothing half-written left behind"
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert saved["done_below"] + len(saved["done_above"]) <= len(written), (
        "the checkpoint never claims more"
    )

    again = run_limited(["run", "--no-ui", "--resume", str(out)], tmp_path, limit=20_000)
    assert (
        again.returncode == 1 and "Traceback" not in again.stderr and "cannot write" in again.stderr
    )
    assert out.read_bytes().endswith(b"\n") and not list(out.parent.glob("*.tmp"))

    done = run_limited(["run", "--no-ui", "--resume", str(out)], tmp_path, limit=None)
    assert done.returncode == 0, done.stderr
    items = [g["vftui"]["item"] for g in read_jsonl(out)]
    assert sorted(items) == list(range(30)), "no gap and no duplicate after the full disk"


def test_view_reports_lines_that_are_not_utf8_and_shows_the_rest(tmp_path):
    good = json.dumps({"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [0.5]}).encode()
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(good + b"\n" + b'{"tokens": "\xff\xfe\x00binary"}\n' + good + b"\n")
    events, skipped = read_view(path)
    assert skipped == 1
    assert [e.message for e in events if type(e).__name__ == "LogRecord"] == [
        "mixed.jsonl line 2 skipped: not UTF-8 text"
    ]
    assert events[-1].groups_done == 2


def test_the_html_page_shows_model_markup_as_text(tmp_path):
    from vftui.report.run_page import RunPage
    from vftui.run_files.files import RunFiles

    script = "<script>alert(document.domain)</script>"
    group = {
        "tokens": [[1]],
        "masks": [[1]],
        "scores": [1.0],
        "messages": [
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": f"ok {script} <b>x</b>"},
            ]
        ],
    }
    jsonl = tmp_path / "groups.jsonl"
    jsonl.write_text(json.dumps(group) + "\n")
    page = RunPage.open(RunFiles(jsonl)).finish().read_text()
    assert "<script>alert" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(document.domain)&lt;/script&gt;" in page
    assert "<details>" in page and ">assistant" in page, "each rollout folded, each message's role"
    assert json.loads(jsonl.read_text())["messages"][0][1]["content"].endswith(
        f"{script} <b>x</b>"
    ), "the jsonl is exact"


# -- signals: a graceful stop, the terminal restored, the summary printed ------------------


def test_sighup_stops_a_headless_run_gracefully(tmp_path, slow_sim):
    out = tmp_path / "groups.jsonl"
    proc = start_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "1000",
            "--group-size",
            "2",
            "--concurrency",
            "4",
            "--base-url",
            slow_sim.base_url,
            "--out",
            str(out),
        ],
        tmp_path,
    )
    wait_for_lines(out, 2, proc)
    proc.send_signal(signal.SIGHUP)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert (
        "stopping after the groups in flight" in stderr
        and "run stopped: " in stderr
        and "Traceback" not in stderr
    )
    groups = read_jsonl(out)
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert saved["groups"] == len(groups) and len({g["vftui"]["item"] for g in groups}) == len(
        groups
    )


@pytest.mark.needs("tmux")
def test_sigterm_to_the_dashboard_restores_the_terminal_and_prints_the_summary(tmp_path, slow_sim):
    out = tmp_path / "sigterm-groups.jsonl"
    run = tmux_cli_command(
        tmp_path,
        f"run --steps 1000 --group-size 2 --base-url {slow_sim.base_url} "
        f"--out {shlex.quote(str(out))}",
    )
    with recorded_pane(tmp_path, f"{run}; echo EXIT=$?; sleep 600") as (session, _):
        wait_for_screen(session, "running")
        os.kill(dashboard_pid(out), signal.SIGTERM)
        screen = wait_for_screen(session, "EXIT=")
        flags = tmux(
            "display-message",
            "-p",
            "-t",
            session,
            "#{alternate_on} #{mouse_any_flag} #{cursor_flag}",
        )
    assert "EXIT=130" in screen and "run stopped: " in screen and "Traceback" not in screen, screen
    assert flags.split() == ["0", "0", "1"], (
        "alternate screen off, mouse tracking off, cursor shown"
    )
    assert read_jsonl(out), "the groups collected before the signal are saved"


@pytest.mark.needs("tmux")
def test_a_dropped_terminal_stops_the_dashboards_run_gracefully_and_nothing_is_left_running(
    tmp_path, slow_sim
):
    """An SSH session that drops takes the terminal: the app and its collector still finish and exit."""
    out = tmp_path / "hangup-groups.jsonl"
    run = tmux_cli_command(
        tmp_path,
        f"run --steps 1000 --group-size 2 --base-url {slow_sim.base_url} "
        f"--out {shlex.quote(str(out))}",
    )
    with recorded_pane(tmp_path, run) as (session, _):
        wait_for_screen(session, "running")
        wait_until(lambda: len(read_jsonl(out)) >= 2, "no groups were written")
        app = str(dashboard_pid(out))
        tree = [
            app,
            *subprocess.run(["pgrep", "-P", app], capture_output=True, text=True).stdout.split(),
        ]
        hang_up(session)
        wait_until(
            lambda: not any(Path(f"/proc/{pid}").exists() for pid in tree),
            "the dashboard or its collector still runs after its terminal hung up",
            timeout=60,
        )
    groups = read_jsonl(out)
    saved = json.loads(out.with_suffix(".checkpoint.json").read_text())
    assert 2 <= len(groups) < 1000 and saved["groups"] == len(groups), (
        "stopped early, every group saved"
    )
