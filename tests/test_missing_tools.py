"""A test that drives a missing tool is skipped naming what to install, except under CI, where it fails: a
green CI run can never have tested less than it says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    ("ci", "outcome"), [(None, "1 skipped"), ("1", "1 error")], ids=["outside-ci", "ci"]
)
def test_a_test_whose_tool_is_missing_skips_outside_ci_and_fails_in_ci(tmp_path, ci, outcome):
    (tmp_path / "test_drives_tmux.py").write_text(
        "import pytest\n\n@pytest.mark.needs('tmux')\ndef test_drives_tmux():\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env.update(PATH=str(tmp_path / "empty"), PYTHONPATH=str(REPO), **({"CI": ci} if ci else {}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-rs",
            "-q",
            "test_drives_tmux.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome in done.stdout, done.stdout
    assert "tmux is not installed (apt-get install tmux; .ci/run installs it)" in done.stdout
    assert done.returncode == (0 if ci is None else 1)
