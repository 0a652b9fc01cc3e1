"""The fork server that runs most CLI tests answers as ``python -m vftui`` in a subprocess does."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, free_port, read_jsonl, run_cli
from tests.forked_cli import ForkServer, forkable
from vftui import __version__


def _subprocess(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vftui", *args],
        cwd=tmp_path,
        env=cli_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["run", "--no-such-flag"],
        ["runs", "--json"],
        ["view", "missing.jsonl"],
        ["eval", "--steps", "2"],
    ],
    ids=["version", "bad-flag", "runs", "missing-file", "eval-says"],
)
def test_a_forked_command_prints_and_exits_as_its_own_process_does(
    args: list[str], tmp_path: Path
) -> None:
    forked, started = run_cli(args, tmp_path), _subprocess(args, tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        started.returncode,
        started.stdout,
        started.stderr,
    )


def test_a_forked_run_writes_what_a_started_one_writes(tmp_path: Path) -> None:
    """The whole run path: the built-in environment, the simulated endpoint, the files, the summary."""
    args = ["run", "--no-ui", "--steps", "2", "--group-size", "2", "--seed", "3"]
    forked = run_cli([*args, "--out", "forked.jsonl"], tmp_path, VFTUI_TEMPERATURE="0.5")
    started = _subprocess([*args, "--out", "started.jsonl"], tmp_path, VFTUI_TEMPERATURE="0.5")
    assert forked.returncode == started.returncode == 0, forked.stderr + started.stderr
    assert "at temperature 0.5" in forked.stderr  # the command's own environment, not the server's
    written = sorted(p.name.replace("forked", "started") for p in tmp_path.glob("forked*"))
    assert written == sorted(p.name for p in tmp_path.glob("started*"))
    groups = [read_jsonl(tmp_path / f"{name}.jsonl") for name in ("forked", "started")]
    assert [sorted(g) for g in groups[0]] == [sorted(g) for g in groups[1]]
    assert len(groups[0]) == 2


def test_a_forked_command_imports_from_the_folders_its_pythonpath_adds(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "added_env.py").write_text(
        "raise RuntimeError('added_env was imported')\n"
    )
    args = ["run", "--no-ui", "--env", "added-env", "--steps", "1"]
    forked = run_cli(args, tmp_path, PYTHONPATH=str(tmp_path / "envs"))
    started = _subprocess(args, tmp_path, PYTHONPATH=str(tmp_path / "envs"))
    assert forked.returncode == started.returncode == 2
    assert "added_env was imported" in forked.stderr
    assert forked.stderr == started.stderr


def test_a_forked_command_runs_in_its_folder_with_modules_there_importable(
    tmp_path: Path,
) -> None:
    """``-m`` puts the working folder first on the path: an environment module beside the user is found."""
    (tmp_path / "my_env.py").write_text("raise RuntimeError('my_env was imported')\n")
    forked = run_cli(["run", "--no-ui", "--env", "my_env", "--steps", "1"], tmp_path)
    assert forked.returncode == 2
    assert "my_env was imported" in forked.stderr


def test_a_forked_command_is_a_process_of_its_own_that_signals_end(tmp_path: Path) -> None:
    server = ForkServer(cli_env(tmp_path))
    try:
        # the simulated endpoint serves until it is stopped
        serving = server.start(
            ["sim-server", "--port", str(free_port())], tmp_path, cli_env(tmp_path)
        )
        with pytest.raises(subprocess.TimeoutExpired):
            serving.communicate(timeout=2)
        serving.kill()
        serving.communicate()
        assert serving.returncode == -signal.SIGKILL
        version = server.start(["--version"], tmp_path, cli_env(tmp_path))
        assert version.communicate(timeout=60) == (f"vftui {__version__}\n", "")
    finally:
        server.close()
    assert server.process.returncode == 0  # gone with its client


@pytest.mark.unit
def test_only_environments_read_when_called_are_forked() -> None:
    base = {"PATH": "/bin", "HF_HUB_OFFLINE": "1"}
    assert forkable({**base, "VFTUI_STEPS": "2", "WANDB_MODE": "offline"}, base)
    assert forkable({"PATH": "/bin", "HF_HUB_OFFLINE": "1", "XDG_DATA_HOME": "/x"}, base)
    assert forkable({**base, "PYTHONPATH": "/envs"}, base)  # a test's own environments, added
    with_path = {**base, "PYTHONPATH": "/repo"}
    assert forkable({**with_path, "PYTHONPATH": "/envs:/repo"}, with_path)
    assert not forkable({**with_path, "PYTHONPATH": "/envs"}, with_path)  # /repo dropped
    assert not forkable({"PATH": "/bin"}, base)  # HF_HUB_OFFLINE is read on import
    assert not forkable({**base, "HF_HUB_OFFLINE": "0"}, base)
    proxied = {
        "HTTP_PROXY": "http://p:1",
        "no_proxy": "h",
        "NETRC": "/n",
    }  # read as a client is made
    assert forkable({**base, **proxied}, base)
    assert not forkable(
        {**base, "HOME": "/elsewhere"}, base
    )  # verifiers keeps its cache by it, on import


@pytest.mark.unit
def test_a_pythonpath_with_start_up_code_is_not_forked(tmp_path: Path) -> None:
    """sitecustomize runs when Python starts, which a fork does not."""
    (tmp_path / "sitecustomize.py").write_text("")
    assert not forkable({"PYTHONPATH": str(tmp_path)}, {})
    assert forkable({"PYTHONPATH": str(tmp_path / "elsewhere")}, {})
