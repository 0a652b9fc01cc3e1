"""The v1 tests, core runs, the view and the dashboard, on verifiers 0.4 (v1 only): the suite itself runs
on 0.3, which runs both kinds of environment. The 0.4 environment is made with uv beside the repository
(``.venv-verifiers04``, kept between runs) from the project's own requirements, resolved from the package
registry as it was on the tests' ``REGISTRY_DATE`` (so the same versions on any machine and in any month),
and installed again only when pyproject.toml or that date changes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tomllib
from importlib.metadata import version

import pytest

from tests.conftest import REPO, cli_env
from tests.verifiers_reference import REGISTRY_DATE, pinned

pytestmark = [pytest.mark.long, pytest.mark.timeout(1500)]
VENV = REPO / ".venv-verifiers04"
VERIFIERS = "verifiers>=0.4,<0.5"
TESTS = [
    "tests/test_v1.py",
    # its wire and its pool's arguments differ from 0.3's: a spawned pool's round trip, the temperature on the
    # wire (a server at an address speaks the same wire; vftui's own handling is tested on 0.3 alone)
    "tests/test_env_server.py::test_a_spawned_pool_writes_the_groups_the_in_process_runner_writes",
    "tests/test_e2e_sft.py",
    "tests/test_screens.py::test_snapshot_main_screen",
    "tests/test_screens.py::test_view_filter_shows_only_matching_groups_and_reports_bad_lines",
    "tests/test_dashboard.py::test_token_preview_counts_equal_the_masks",
    "tests/test_dashboard.py::test_quit_leaves_a_complete_jsonl_and_a_checkpoint",
]
"""v1 (loading, tools, failures, verifiers' own eval, its env servers), core runs line by line, the view and
the dashboard."""
LEFT_OUT = [
    # the scripted-turns comparison with verifiers' own eval (~25 CPU-s of its harness) is run on 0.3 alone;
    # on 0.4 the tool-calling one runs, which goes through most of verifiers' v1 over several turns
    "tests/test_v1.py::test_rewards_equal_verifiers_own_eval_of_the_same_conversations[scripted-turns]",
]


def requirements() -> list[str]:
    """The test extras as pyproject names them, without the classic extra's verifiers 0.3."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    return [r for r in extras if not r.startswith("vftui[")]


def uv(*args: str) -> None:
    """uv, kept off the environment the suite runs in (an active one is VIRTUAL_ENV's: the paths name the other),
    held to the registry as it was on ``REGISTRY_DATE``."""
    env = pinned({k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
    done = subprocess.run(
        [sys.executable, "-m", "uv", *args], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]


INSTALL = ("--quiet", "--upgrade")
"""--upgrade: what the date resolves to, not what an earlier run (or an earlier date) left installed."""


def installed_for() -> str:
    """What the environment depends on: the project's requirements, the registry's date, how it is made."""
    how = f"{VERIFIERS} {REGISTRY_DATE} {INSTALL}"
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes() + how.encode()).hexdigest()


def test_the_v1_core_view_and_dashboard_tests_pass_on_verifiers_04(tmp_path):
    python = VENV / "bin" / "python"
    stamp = VENV / ".vftui-installed-for"
    if not python.exists():
        uv("venv", "--python", sys.executable, str(VENV))
    ours = version("verifiers")
    if not stamp.exists() or stamp.read_text() != installed_for():
        uv(
            "pip",
            "install",
            *INSTALL,
            "--python",
            str(python),
            "-e",
            str(REPO),
            VERIFIERS,
            *requirements(),
        )
        stamp.write_text(installed_for())  # the same requirements on the same date resolve the same
    assert version("verifiers") == ours, "the suite's own environment is left as it was"
    theirs = subprocess.run(
        [str(python), "-c", "import verifiers; print(verifiers.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert theirs.startswith("0.4"), theirs
    env = {**cli_env(tmp_path), "PATH": os.pathsep.join([str(VENV / "bin"), os.environ["PATH"]])}
    # uv writes no .pyc: the inner suite's first imports write them, for the modules it uses, where a machine
    # that forbids them (PYTHONDONTWRITEBYTECODE) had every process compile its libraries again (imports
    # 7.8 s, not 3.8); compiling all of site-packages after each install instead cost 49 CPU-s
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # one process (-n 0): two workers each imported the libraries and started their own servers of imported
    # modules, 120 CPU-s where one takes 98 (and 94 s, not 85: it starts first, beside the rest of the suite)
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *TESTS]
        + [f"--deselect={test}" for test in LEFT_OUT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-6000:]
    assert "passed" in summary and "skipped" in summary, (
        summary
    )  # the classic cases skip, with their reason
    # a renamed test would leave its --deselect matching nothing, and the run longer, silently
    assert f"{len(LEFT_OUT)} deselected" in summary, summary
