"""vftui/ type-checks under mypy with the version the test extras pin. Not in the unit lane: ~20 s
cold, a quarter of that lane's budget."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_mypy_finds_no_type_errors():
    """vftui/ type-checks under ``[tool.mypy]`` in pyproject.toml (its files, its untyped libraries), with the
    mypy version the test extras pin. Its cache (.mypy_cache) is checked against each file: ~20 s cold, seconds
    after."""
    command = [sys.executable, "-m", "mypy"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
