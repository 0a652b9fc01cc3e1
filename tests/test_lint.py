"""The code passes the lint rules in pyproject.toml (pyflakes, pycodestyle, isort, bugbear, simplify...) and
vftui/ its type checks (mypy), with the versions the test extras pin, so the result does not depend on whoever
runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit


PATHS = ["vftui", "tests", "bench"]


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


def test_mypy_finds_no_type_errors():
    """vftui/ type-checks under ``[tool.mypy]`` in pyproject.toml (its files, its untyped libraries), with the
    mypy version the test extras pin. Its cache (.mypy_cache) is checked against each file: a minute cold, seconds
    after."""
    command = [sys.executable, "-m", "mypy"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
