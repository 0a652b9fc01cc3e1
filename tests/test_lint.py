"""The code passes the lint rules in pyproject.toml (pyflakes, pycodestyle, isort, bugbear, simplify...),
with the ruff version the test extras pin, so the result does not depend on whoever runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "vftui", "tests", "bench"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
