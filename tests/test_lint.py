"""The code passes the lint rules in pyproject.toml (pyflakes, pycodestyle, isort, bugbear, simplify...) with
the version the test extras pin, so the result does not depend on whoever runs it (mypy: test_types.py). Not in
the unit lane: ruff runs in a process of its own (the pre-commit hooks run it before each commit)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

PATHS = ["vftui", "tests", "bench", "scripts"]


def ruff(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ruff", *args, "--no-cache", *PATHS]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ruff_finds_nothing():
    done = ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_formatted_by_ruff():
    """One layout for every file, so a diff shows a change, never a re-wrapping."""
    done = ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
