"""A run's log (``collector.captured``): what the environment said is kept, even a line it did not end."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO
from vftui.run_files.files import RunFiles

# In a process of its own: capturing points this process's descriptors 1 and 2 at the log.
SAYS_WITHOUT_A_NEWLINE = """
import sys, tempfile
from pathlib import Path
from vftui.collector import captured
from vftui.run_files.files import RunFiles

early = captured.capture(tempfile.TemporaryFile("w+"))
log = captured.switch_to_log(RunFiles(Path(sys.argv[1])), early, print)
print("closing, no newline", end="")  # as a library might while the run closes
captured.remove_if_empty(log)
"""


def test_a_log_holding_only_an_unended_line_is_kept(tmp_path):
    out = tmp_path / "groups.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", SAYS_WITHOUT_A_NEWLINE, str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    log = RunFiles(out).log
    assert log.exists(), "the line still buffered counts: the log is not empty"
    assert log.read_text() == "closing, no newline"
