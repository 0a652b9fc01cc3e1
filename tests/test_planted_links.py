"""A hostile neighbour (issue 24): links planted where a run writes, a shared socket folder, links in
answers, a password in a URL, SIGHUP, newlines in paths, a stopped run.

Someone who can write in the folder of a run's output (a shared /tmp, a team's folder) plants
symbolic links at the names the run will write; a run must refuse them or replace them, never
write through them. The "victim" is a file the link points to, outside the run's folder.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import signal
import socket
import stat
import sys
import time
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
from vftui import safe_files
from vftui.errors import UserError
from vftui.events import GroupDropped
from vftui.live.client import STATUS_TIMEOUT_S
from vftui.run_files import store
from vftui.run_files.drops import DropLog
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import NOT_ANSWERING, RunLine, all_runs
from vftui.run_files.lock import RunLock
from vftui.sim.server import TOKENIZER_DIR
from vftui.text.printable import say
from vftui.text.redact import scrub

SECRET = "the victim's own content\n"
needs_tmux = pytest.mark.needs("tmux")
LISTING_BOUND_S = 20 * STATUS_TIMEOUT_S
"""A stopped run costs ``vftui runs`` STATUS_TIMEOUT_S; the bound tells that from a listing that waits on it for
as long as it is stopped (for ever), far above what a loaded machine adds, so load never fails it."""


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file outside the run's folder, and the folder it is in, which a run must leave as they are."""
    folder = tmp_path / "victim"
    folder.mkdir()
    target = folder / "passwd"
    target.write_text(SECRET)
    return target


def untouched(victim: Path, dangling: Path | None = None) -> None:
    assert victim.read_text() == SECRET, "the run wrote through a link"
    assert sorted(p.name for p in victim.parent.iterdir()) == sorted(
        [victim.name] + ([dangling.name] if dangling is not None and dangling.exists() else [])
    ), "the run made files in the link's folder"
    if dangling is not None:
        assert not dangling.exists(), "the run created a dangling link's target"


def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


# -- 1. links at the output path and at its side files --------------------------------------------


def test_a_link_at_out_is_refused_whether_its_target_exists_or_not(tmp_path, victim):
    folder = run_dir(tmp_path)
    (folder / "groups.jsonl").symlink_to(victim)
    dangling = victim.parent / "made-by-the-run"
    (folder / "dangling.jsonl").symlink_to(dangling)
    for name in ("groups.jsonl", "dangling.jsonl"):
        result = run_cli(
            ["run", "--no-ui", "--steps", "1", "--group-size", "1", "--out", str(folder / name)],
            tmp_path,
        )
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"vftui: error: --out {folder / name} is a symbolic link" in result.stderr, (
            result.stderr
        )
    untouched(victim, dangling)
    assert sorted(p.name for p in folder.iterdir()) == ["dangling.jsonl", "groups.jsonl"], (
        "nothing left beside"
    )


def test_a_background_run_refuses_a_link_at_out_before_writing_its_log(tmp_path, victim):
    folder = run_dir(tmp_path)
    (folder / "groups.jsonl").symlink_to(tmp_path / "victim" / "new.jsonl")
    result = run_cli(
        ["run", "--detach", "--steps", "1", "--out", str(folder / "groups.jsonl")], tmp_path
    )
    assert result.returncode == 2 and "is a symbolic link" in result.stderr, result.stderr
    untouched(victim)


def test_a_link_at_the_resumed_file_is_refused(tmp_path, victim):
    out = run_dir(tmp_path) / "groups.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--steps", "2", "--group-size", "1", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    victim.write_bytes(out.read_bytes()[:-5])  # a torn last line, which a resume would cut
    original = victim.read_bytes()
    out.unlink()
    out.symlink_to(victim)
    result = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "3"], tmp_path)
    assert result.returncode == 2 and f"--resume {out} is a symbolic link" in result.stderr, (
        result.stderr
    )
    assert victim.read_bytes() == original


def test_links_planted_at_the_side_files_are_replaced_never_written_through(tmp_path, victim):
    folder = run_dir(tmp_path)
    out = folder / "groups.jsonl"
    temporaries = [".checkpoint.json.tmp", ".run.json.tmp", ".html.tmp"]
    for suffix in temporaries:
        Path(f"{folder / 'groups'}{suffix}").symlink_to(victim)
    result = run_cli(
        ["run", "--no-ui", "--steps", "3", "--group-size", "2", "--out", str(out)], tmp_path
    )
    assert result.returncode == 0, result.stderr
    untouched(victim)
    for name in ("groups.checkpoint.json", "groups.run.json", "groups.html"):
        assert not (folder / name).is_symlink() and (folder / name).stat().st_size > 0, name
    assert json.loads((folder / "groups.checkpoint.json").read_text())["groups"] == 3
    # a link at a side file itself: a new run takes the next name and leaves the link as it was
    out.with_suffix(".checkpoint.json").unlink()
    out.with_suffix(".checkpoint.json").symlink_to(victim)
    out.unlink()
    result = run_cli(["run", "--no-ui", "--steps", "1", "--out", str(out)], tmp_path)
    assert result.returncode == 0 and "groups_1.jsonl instead" in result.stderr, result.stderr
    assert out.with_suffix(".checkpoint.json").is_symlink() and not out.exists()
    untouched(victim)


def finished_run(tmp_path: Path, out: Path) -> list[str]:
    """A run of one group at ``out``, and the command that resumes it for one more: a new run never takes a
    name where something is at its lock, so the lock's refusals are a resume's."""
    done = run_cli(
        ["run", "--no-ui", "--steps", "1", "--group-size", "2", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    return ["run", "--no-ui", "--steps", "2", "--resume", str(out)]


def test_a_link_at_the_lock_is_refused_with_one_sentence(tmp_path, victim):
    folder = run_dir(tmp_path)
    resume = finished_run(tmp_path, folder / "groups.jsonl")
    (folder / "groups.lock").symlink_to(victim)
    result = run_cli(resume, tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"cannot lock {folder / 'groups.lock'}: it is a symbolic link" in result.stderr, (
        result.stderr
    )
    untouched(victim)


@pytest.mark.parametrize("kind", ["a FIFO", "a folder"])
def test_a_fifo_or_folder_at_the_lock_is_refused_with_one_sentence(tmp_path, kind):
    """Each was a traceback (ftruncate on the FIFO, open of the folder); prune's note was '[Errno 22] Invalid
    argument'."""
    folder = (
        tmp_path / "xdg-data" / "vftui" / "runs" / "20260101-000000-x"
    )  # where --prune deletes an empty run
    folder.mkdir(parents=True)
    out = folder / "groups.jsonl"
    resume = finished_run(tmp_path, out)
    lock = folder / "groups.lock"
    os.mkfifo(lock) if kind == "a FIFO" else lock.mkdir()
    said = f"cannot lock {lock}: it is {kind}, not a regular file; remove it first"
    result = run_cli(resume, tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert said in result.stderr.strip().splitlines()[-1], result.stderr
    out.write_bytes(b"")  # a run that collected nothing, for --prune
    for emptied in ("groups.dropped.jsonl", "groups.checkpoint.json"):
        (folder / emptied).unlink(missing_ok=True)
    pruned = run_cli(["runs", "--prune", "--json"], tmp_path)
    assert pruned.returncode == 0 and f"vftui: note: {said}" in pruned.stderr, pruned.stderr
    assert (folder / "groups.jsonl").exists(), "prune leaves a run it cannot lock"


@pytest.mark.unit
def test_an_atomic_write_never_writes_through_a_planted_temporary(tmp_path, victim):
    path = tmp_path / "state.json"
    Path(f"{path}.tmp").symlink_to(victim)
    store.write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1} and not path.is_symlink()
    untouched(victim)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.tmp", "victim"]


@pytest.mark.unit
def test_the_lock_refuses_a_link_and_the_drop_log_does_not_follow_one(tmp_path, victim):
    out = tmp_path / "groups.jsonl"
    out.with_suffix(".lock").symlink_to(victim)
    with pytest.raises(UserError, match=r"groups\.lock: it is a symbolic link"):
        RunLock(RunFiles(out)).acquire("")
    out.with_suffix(".dropped.jsonl").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        DropLog(RunFiles(out)).add(GroupDropped(0, "all equal", [1.0, 1.0], {}, [1, 1]))
    untouched(victim)


@pytest.mark.unit
def test_a_dump_skips_a_dangling_link_at_its_name(tmp_path, victim):
    dangling = victim.parent / "dumped-here"
    (tmp_path / "dump.jsonl").symlink_to(dangling)
    window = store.GroupWindow(4)
    window.add(b'{"scores": [1]}\n')
    path, count, _ = window.dump(tmp_path / "dump.jsonl")
    assert (
        path == tmp_path / "dump_1.jsonl"
        and count == 1
        and path.read_bytes() == b'{"scores": [1]}\n'
    )
    untouched(victim, dangling)


@pytest.mark.unit
def test_an_appender_and_a_repair_refuse_a_link(tmp_path, victim):
    link = tmp_path / "groups.jsonl"
    link.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        store.JsonlAppender(link)
    with pytest.raises(OSError, match="symbolic link"):
        store.repair_tail(link)
    untouched(victim)
    assert os.path.islink(link)


# -- 2. the control socket's folder in $TMPDIR ---------------------------------------------------


def long_out(tmp_path: Path) -> Path:
    """An output whose socket path is too long to sit beside it: the socket goes to $TMPDIR/vftui-<uid>."""
    return tmp_path / ("d" * 60) / ("e" * 60) / "groups.jsonl"


def test_a_socket_folder_others_may_enter_is_refused(tmp_path):
    shared = tmp_path / "tmp"
    folder = shared / f"vftui-{os.getuid()}"
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    result = run_cli(
        ["run", "--no-ui", "--steps", "1", "--group-size", "1", "--out", str(long_out(tmp_path))],
        tmp_path,
        TMPDIR=str(shared),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert (
        f"the folder for the run's control socket, {folder}, is not this user's alone (it is a folder of mode "
        "0755, which others may enter); remove it, or set TMPDIR to another folder"
    ) in result.stderr
    assert list(folder.iterdir()) == [], "no socket made in it"


@pytest.mark.unit
def test_a_private_folder_is_made_0700_and_a_link_or_another_users_folder_is_refused(tmp_path):
    made = safe_files.own_folder(tmp_path / "fresh", private=True)
    assert stat.S_IMODE(made.lstat().st_mode) == 0o700
    assert safe_files.own_folder(made, private=True) == made
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(PermissionError, match="it is a symbolic link"):
        safe_files.own_folder(tmp_path / "link", private=True)
    if os.getuid() == 0:  # only root can give a folder away
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(PermissionError, match=r"another user's \(uid 65534\)"):
            safe_files.own_folder(theirs, private=True)


# -- 3. smaller ones -------------------------------------------------------------------------------


@pytest.mark.unit
def test_a_urls_password_is_hidden_wherever_text_is_scrubbed():
    shown = scrub("asking https://ann:s3cr@t:x@gpu1:9001/v1 for its models")
    assert shown == "asking https://ann:***@gpu1:9001/v1 for its models"
    assert (
        scrub("http://gpu1:9001/v1 and http://ann@gpu1/v1")
        == "http://gpu1:9001/v1 and http://ann@gpu1/v1"
    )


def basic_auth_proxy(upstream: str, user: str, password: str) -> web.Application:
    """The endpoint at ``upstream``, answering only requests that carry the user and password (HTTP basic)."""
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    async def forward(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.json_response({"error": {"message": "who are you?"}}, status=401)
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                upstream + request.path.removeprefix("/v1"),
                data=await request.read(),
                headers={"Content-Type": "application/json"},
            ) as answer,
        ):
            return web.Response(
                body=await answer.read(), status=answer.status, content_type="application/json"
            )

    app = web.Application()
    app.router.add_route("*", "/v1/{tail:.*}", forward)
    return app


def test_a_password_in_base_url_is_used_but_never_shown_or_saved(tmp_path, sim):
    password = "hunter2-in-the-url"
    out = tmp_path / "groups.jsonl"
    with serve_app(basic_auth_proxy(sim.base_url, "ann", password)) as base_url:
        url = base_url.replace("http://", f"http://ann:{password}@")
        result = run_cli(
            [
                "run",
                "--no-ui",
                "--json",
                "--verbose",
                "--steps",
                "2",
                "--group-size",
                "2",
                "--base-url",
                url,
                "--tokenizer",
                str(TOKENIZER_DIR),
                "--out",
                str(out),
            ],
            tmp_path,
        )
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(out)) == 2, "the requests carried the password"
    shown = base_url.replace("http://", "http://ann:***@")
    assert f"endpoint {shown}" in result.stderr
    saved = out.with_suffix(".run.json").read_text()
    assert (
        json.loads(saved)["config"]["base_url"] == shown and json.loads(saved)["endpoint"] == shown
    )
    for text in (
        result.stderr,
        result.stdout,
        saved,
        out.with_suffix(".checkpoint.json").read_text(),
    ):
        assert password not in text
    again = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "3"], tmp_path)
    assert (
        again.returncode == 2
        and (
            "vftui: error: --resume: the run's --base-url had a password, which vftui "
            "does not save; give --base-url again"
        )
        in again.stderr
    ), again.stderr


@needs_tmux
def test_sighup_to_a_dashboard_whose_terminal_is_there_stops_it_as_sigterm_does(tmp_path, slow_sim):
    """``kill -HUP``: the terminal still answers, so it is restored and the summary printed; exit 130."""
    out = tmp_path / "sighup-groups.jsonl"
    run = tmux_cli_command(
        tmp_path,
        f"run --steps 1000 --group-size 2 --base-url {slow_sim.base_url} "
        f"--out {shlex.quote(str(out))}",
    )
    with recorded_pane(tmp_path, f"{run}; echo EXIT=$?; sleep 600") as (session, _):
        wait_for_screen(session, "running")
        os.kill(dashboard_pid(out), signal.SIGHUP)
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


FORWARD_HANGUP = """
import signal, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGHUP, lambda *_: child.send_signal(signal.SIGHUP))  # as a login shell does on a hang-up
code = child.wait()
open(sys.argv[1], "w").write(str(code))
"""


@needs_tmux
def test_a_real_hang_up_stops_the_dashboards_run_with_exit_130(tmp_path, slow_sim):
    """The terminal goes (the pane is killed): its session leader forwards SIGHUP as a login shell does; nothing
    can be drawn, and the dashboard still ends as a graceful stop."""
    out = tmp_path / "hangup-groups.jsonl"
    forwarder, exit_file = tmp_path / "forward.py", tmp_path / "exit-code"
    forwarder.write_text(FORWARD_HANGUP)
    python = shlex.quote(sys.executable)
    run = tmux_cli_command(
        tmp_path,
        f"run --steps 1000 --group-size 2 --base-url {slow_sim.base_url} "
        f"--out {shlex.quote(str(out))}",
    )
    run = run.replace(f"{python} -m vftui", f"{python} {forwarder} {exit_file} {python} -m vftui")
    with recorded_pane(tmp_path, f"exec {run}") as (session, _):
        wait_for_screen(session, "running")
        pid = dashboard_pid(out)
        hang_up(session)
        wait_until(
            lambda: not Path(f"/proc/{pid}").exists(),
            "the dashboard outlived its terminal",
            timeout=60,
        )
    assert (
        wait_until(exit_file.exists, "the forwarder saw no exit") and exit_file.read_text() == "130"
    )


FORGED = "vftui: run finished: 1000/1000 groups"


@pytest.mark.unit
def test_a_line_printed_for_a_person_stays_one_line_and_several_are_a_list():
    err = io.StringIO()
    say(f"output: /tmp/a\n{FORGED}\x1b]0;t\x07", err)
    say(["run stopped", "  output: /tmp/b\nc"], err)
    assert err.getvalue().splitlines() == [
        f"output: /tmp/a␊{FORGED}␛]0;t␇",
        "run stopped",
        "  output: /tmp/b␊c",
    ]


def test_a_newline_in_a_path_or_a_vftui_value_forges_no_line_of_headless_output(tmp_path):
    out = tmp_path / f"x\n{FORGED}" / "groups.jsonl"
    result = run_cli(
        ["run", "--no-ui", "--steps", "1", "--group-size", "1", "--out", str(out)], tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"x␊{FORGED}" in result.stderr and not any(
        line.startswith(FORGED) for line in result.stderr.splitlines()
    ), result.stderr
    refused = run_cli(["run", "--no-ui", "--steps", "1"], tmp_path, VFTUI_ENV=f"nope\n{FORGED}")
    assert refused.returncode == 2 and f"nope␊{FORGED}" in refused.stderr, refused.stderr
    assert not any(line.startswith(FORGED) for line in refused.stderr.splitlines()), refused.stderr


@pytest.mark.serial  # the running one must answer within STATUS_TIMEOUT_S, which a loaded machine can stop
def test_a_stopped_run_is_listed_as_not_answering_without_holding_up_the_others(
    tmp_path, slow_sim, monkeypatch
):
    outs = [tmp_path / name / "groups.jsonl" for name in ("stopped", "going")]
    runs = [
        start_cli(
            [
                "run",
                "--no-ui",
                "--steps",
                "5000",
                "--group-size",
                "2",
                "--base-url",
                slow_sim.base_url,
                "--out",
                str(out),
            ],
            tmp_path,
        )
        for out in outs
    ]
    queue: list[socket.socket] = []
    try:
        for out, run in zip(outs, runs, strict=True):
            wait_for_lines(out, 1, run)
        runs[0].send_signal(signal.SIGSTOP)
        monkeypatch.setenv(
            "XDG_DATA_HOME", cli_env(tmp_path)["XDG_DATA_HOME"]
        )  # where the CLI's runs are listed

        def listed() -> tuple[float, dict[Path, RunLine]]:
            started = time.monotonic()
            lines = {line.out_path: line for line in all_runs()}
            return time.monotonic() - started, lines

        took, lines = listed()  # it accepts, and says nothing
        assert took < LISTING_BOUND_S, f"vftui runs waited {took:.1f} s"
        assert (lines[outs[0]].state, lines[outs[0]].pid) == (NOT_ANSWERING, runs[0].pid)
        assert lines[outs[1]].state == "running" and lines[outs[1]].pid == runs[1].pid
        for _ in range(
            40
        ):  # its queue full, as after many refreshes of the runs screen: it accepts no one
            queue.append(socket.socket(socket.AF_UNIX))
            queue[-1].setblocking(False)
            queue[-1].connect_ex(str(outs[0].with_suffix(".sock")))
        took, lines = listed()
        assert (
            took < LISTING_BOUND_S
            and lines[outs[0]].state == NOT_ANSWERING
            and lines[outs[1]].state == "running"
        )
        attach = run_cli(["attach", str(outs[0])], tmp_path, timeout=60)
        assert (
            attach.returncode == 2
            and "does not answer: it is stopped (Ctrl-Z; kill -CONT" in attach.stderr
        )
    finally:
        for sock in queue:
            sock.close()
        for run in runs:
            run.send_signal(signal.SIGCONT)
            run.send_signal(signal.SIGTERM)
        for run in runs:
            run.communicate(timeout=120)
