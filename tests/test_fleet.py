"""Runs on other machines through OpenSSH: an sshd on a loopback port stands in for two hosts and a third
that is down. Skipped where sshd is not installed (.ci/run installs it)."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    free_port,
    run_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    unavailable,
    wait_for_screen,
    wait_until,
)
from vftui.sim.server import BackgroundSimServer

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = [
    pytest.mark.needs("sshd"),
    pytest.mark.serial,
]


@pytest.fixture
def hosts(tmp_path):
    """``fleet-a`` and ``fleet-b``: one sshd on a loopback port, each alias with a data folder of its own;
    ``fleet-down``: a port nobody listens on. Yields the VFTUI_SSH command and each host's XDG_DATA_HOME."""
    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True
        )
    (keys / "authorized_keys").write_text((keys / "client_key.pub").read_text())
    port, down = free_port(), free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\nPidFile {keys / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "PermitRootLogin prohibit-password\nAcceptEnv XDG_DATA_HOME XDG_CONFIG_HOME\n"
    )
    data = {h: tmp_path / f"data-{h}" for h in ("fleet-a", "fleet-b")}
    config = [
        f"Host {h}\n  SetEnv XDG_DATA_HOME={d} XDG_CONFIG_HOME={d}\n" for h, d in data.items()
    ]
    config.append(
        f"Host fleet-*\n  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {keys / 'client_key'}\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n  BatchMode yes\n"
    )
    config.insert(0, f"Host fleet-down\n  HostName 127.0.0.1\n  Port {down}\n")
    (keys / "ssh_config").write_text("".join(config))
    Path("/run/sshd").mkdir(exist_ok=True)  # its privilege separation folder
    sshd = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(keys / "sshd_config")], stderr=subprocess.PIPE, text=True
    )
    ssh = f"ssh -F {keys / 'ssh_config'}"
    try:
        wait_until(
            lambda: (
                subprocess.run(
                    [*shlex.split(ssh), "fleet-a", "true"], capture_output=True
                ).returncode
                == 0
                or sshd.poll() is not None
            ),
            "sshd answered",
            timeout=30,
        )
        if sshd.poll() is not None:
            unavailable(f"sshd did not start here: {sshd.stderr.read()[-300:]}")
        yield ssh, data
    finally:
        sshd.terminate()
        sshd.wait(10)


def remote_vftui() -> str:
    """How the hosts run vftui: this interpreter, with this checkout first."""
    paths = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    )
    return (
        f"env PYTHONPATH={shlex.quote(paths)} HF_HUB_OFFLINE=1 WANDB_MODE=disabled "
        f"{shlex.quote(sys.executable)} -m vftui"
    )


def a_run_on(data: Path, tmp_path: Path, name: str) -> None:
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--out",
            str(tmp_path / name / "g.jsonl"),
        ],
        tmp_path,
        XDG_DATA_HOME=str(data),
        XDG_CONFIG_HOME=str(data),
    )
    assert done.returncode == 0, done.stderr


def test_runs_on_several_hosts_with_the_host_as_a_column_and_one_line_per_host_that_fails(
    hosts, tmp_path
):
    ssh, data = hosts
    a_run_on(data["fleet-a"], tmp_path, "on-a")
    a_run_on(data["fleet-b"], tmp_path, "on-b")
    args = ["runs", "--host", "fleet-a,fleet-b,fleet-down", "--remote-vftui", remote_vftui()]
    listed = run_cli([*args, "--json"], tmp_path, VFTUI_SSH=ssh)
    assert listed.returncode == 1, "a host failed"
    runs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {(r["host"], Path(r["path"]).parent.name) for r in runs} == {
        ("fleet-a", "on-a"),
        ("fleet-b", "on-b"),
    }
    assert all(r["state"] == "finished" and r["groups_done"] == 2 for r in runs)
    failed = [line for line in listed.stderr.splitlines() if line.startswith("vftui: fleet-down:")]
    assert len(failed) == 1 and "refused" in failed[0], listed.stderr
    table = run_cli(args, tmp_path, VFTUI_SSH=ssh).stdout.splitlines()
    assert table[0].split()[:3] == ["HOST", "ID", "STATE"] and {
        line.split()[0] for line in table[1:]
    } == {"fleet-a", "fleet-b"}


def test_a_host_name_ssh_would_read_as_an_option_is_refused(tmp_path):
    done = run_cli(["runs", "--host", "-oProxyCommand=touch /tmp/x"], tmp_path)
    assert done.returncode == 2 and "name hosts as ssh does" in done.stderr


@pytest.mark.needs("tmux")
def test_attach_host_run_opens_that_runs_dashboard_through_ssh(hosts, tmp_path):
    ssh, data = hosts
    sim = BackgroundSimServer(seed=0, latency_s=0.3).start()
    out = tmp_path / "live" / "g.jsonl"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vftui",
            "run",
            "--no-ui",
            "--steps",
            "2000",
            "--group-size",
            "2",
            "--base-url",
            sim.base_url,
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env={
            **os.environ,
            "XDG_DATA_HOME": str(data["fleet-a"]),
            "XDG_CONFIG_HOME": str(data["fleet-a"]),
            "HF_HUB_OFFLINE": "1",
            "WANDB_MODE": "disabled",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: out.with_suffix(".sock").exists(), "the run listens", timeout=90)
        command = (
            f"export VFTUI_SSH={shlex.quote(ssh)} && "
            + tmux_cli_command(
                tmp_path, f"attach fleet-a:{out} --remote-vftui {shlex.quote(remote_vftui())}"
            )
            + "; echo EXIT=$?; sleep 30"
        )
        with tmux_session(command, 120, 40) as session:
            wait_for_screen(session, "running")
            tmux("send-keys", "-t", session, "q")
            wait_for_screen(session, "leave it running")
            tmux("send-keys", "-t", session, "l")
            wait_for_screen(session, "EXIT=0")
            assert run.poll() is None, "the run goes on after its remote dashboard left"
    finally:
        run.terminate()
        run.wait(60)
        sim.stop()


def viewed_there(ssh: str, tmp_path: Path, target: str, *flags: str) -> str:
    """``vftui view TARGET FLAGS`` through ssh in tmux: its screen once the view has read the file (then
    quit, exit 0)."""
    command = (
        f"export VFTUI_SSH={shlex.quote(ssh)} && "
        + tmux_cli_command(
            tmp_path,
            shlex.join(["view", target, *flags, "--remote-vftui", remote_vftui()]),
        )
        + "; echo EXIT=$?; sleep 30"
    )
    with tmux_session(command, 120, 40) as session:
        screen = wait_for_screen(session, "finished")
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "EXIT=0")
    return screen


def test_view_host_path_shows_a_verifiers_eval_folder_there_through_ssh(hosts, tmp_path):
    """A v1 eval (or a prime-rl run) on another machine, read by the vftui there, drawn here."""
    ssh, _ = hosts
    folder = Path(__file__).parent / "data" / "v1_eval"
    assert "view" in viewed_there(ssh, tmp_path, f"fleet-a:{folder}", "--order", "item")


def test_a_remote_path_under_home_is_the_home_there(hosts, tmp_path):
    """``view h1:~/PATH``: the ``~/`` is left for the host's shell, the rest quoted."""
    ssh, _ = hosts
    home = Path.home() / f"vftui-fleet-{tmp_path.name}"
    home.mkdir()
    try:
        shutil.copy(Path(__file__).parent / "data" / "groups.jsonl", home / "it's here.jsonl")
        viewed_there(ssh, tmp_path, f"fleet-a:~/{home.name}/it's here.jsonl")
    finally:
        shutil.rmtree(home)


def test_what_view_and_attach_send_a_host_keeps_targets_and_values_that_start_with_a_dash(tmp_path):
    """The remote vftui read 'h1:--tokenizer=/evil' as a flag, and '--tokenizer=-x' lost its value; a
    trailing slash of h1:~/ was dropped (a file named '~' there)."""
    said = tmp_path / "ssh-args"
    fake = tmp_path / "fake-ssh"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(said))}\n')
    fake.chmod(0o755)
    cases = {
        ("view", "h1:--tokenizer=/evil", "--tokenizer=-x"): (
            "vftui view --tokenizer=-x --identical-alert=0.5 --order=file -- --tokenizer=/evil"
        ),
        ("view", "u@h1:~/"): "vftui view --identical-alert=0.5 --order=file -- ~/''",
        ("attach", "h1:-x", "--theme=-t"): "vftui attach --theme=-t -- -x",
    }
    for args, sent in cases.items():
        done = run_cli(list(args), tmp_path, VFTUI_SSH=str(fake))
        assert done.returncode == 0, done.stderr
        assert said.read_text().splitlines()[-1] == sent, (args, said.read_text())
    local = run_cli(["view", "./nope:x"], tmp_path, VFTUI_SSH=str(fake))
    assert local.returncode == 2 and "nope:x" in local.stderr, "a path written as one stays local"
