"""A test that drives a missing tool is skipped naming what to install, except under CI, where it fails: a
green CI run can never have tested less than it says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

MISSING = {  # what the inner pytest says of each missing tool
    "tmux": "tmux is not installed (apt-get install tmux; .ci/run installs it)",
    "playwright": "playwright is not installed (pip install -e '.[test]'; .ci/run installs it)",
}


@pytest.mark.parametrize("tool", list(MISSING))
@pytest.mark.parametrize(
    ("ci", "outcome"), [(None, "1 skipped"), ("1", "1 error")], ids=["outside-ci", "ci"]
)
def test_a_test_whose_tool_is_missing_skips_outside_ci_and_fails_in_ci(tmp_path, ci, outcome, tool):
    """tmux off PATH; playwright (a Python package, which ``importorskip`` skipped even in CI) shadowed by a
    package of that name that cannot be imported."""
    (tmp_path / "test_drives_it.py").write_text(
        f"import pytest\n\n@pytest.mark.needs({tool!r})\ndef test_drives_it():\n    pass\n"
    )
    shadow = tmp_path / "shadow" / "playwright"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed here')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env.update(
        PATH=str(tmp_path / "empty") if tool == "tmux" else env.get("PATH", ""),
        PYTHONPATH=os.pathsep.join(
            [*([str(shadow.parent)] if tool == "playwright" else []), str(REPO)]
        ),
        **({"CI": ci} if ci else {}),
    )
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
            "test_drives_it.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome in done.stdout, done.stdout
    assert MISSING[tool] in done.stdout
    assert done.returncode == (0 if ci is None else 1)
