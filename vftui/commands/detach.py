"""``vftui run --detach``: the run in the background, on its own, for ``vftui attach``.

The run is a headless run (``--no-ui``) in a session of its own, so no terminal's hang-up
reaches it; what it prints goes to its log beside the jsonl. This command waits until the
run is prepared and listening (or refused: its one sentence and exit code come back
here), then says how to attach.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from vftui import safe_files
from vftui.config import RunConfig
from vftui.errors import UserError
from vftui.live.client import ask_status
from vftui.live.process import vftui_command
from vftui.live.server import RunInfo
from vftui.run_files.files import RunFiles
from vftui.text import wording
from vftui.text.printable import say

POLL_S = 0.2


def run_detached(run_args: list[str], config: RunConfig) -> int:
    """``run_args``: the ``vftui run`` flags as given, ``--detach`` taken out."""
    args = [arg for arg in run_args if arg != "--detach"]
    if config.resume is not None:
        files = RunFiles.to_resume(config.resume)
    else:
        files = RunFiles.new(config.out, config.env)
        if config.out is None:
            args += ["--out", str(files.jsonl)]
        # taken, the run would move to another name than the one watched here
        elif (taken := files.taken_by) is not None:
            raise UserError(
                f"--out {files.jsonl}: {taken} exists; a background run needs a new path "
                f"(or --resume {shlex.quote(str(files.jsonl))})"
            )
    files.folder.mkdir(parents=True, exist_ok=True)
    log_path = files.log
    try:
        log = open(safe_files.open_append(log_path), "ab")  # noqa: SIM115 - closed below, once the child has it
    except OSError as e:
        raise UserError(f"cannot write the run's log {log_path}: {e.strerror}") from e
    with log:
        child = subprocess.Popen(
            vftui_command("run", *args, "--no-ui"),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    say(
        f"vftui: starting a run in the background (pid {child.pid}); its output goes to {log_path}",
        sys.stderr,
    )
    while child.poll() is None:
        if isinstance(ask_status(files.socket), RunInfo):
            say(wording.left_running(child.pid, files.jsonl), sys.stderr)
            return 0
        time.sleep(POLL_S)
    say(
        [
            f"vftui: the background run ended before it was ready (exit {child.returncode}):",
            *_last_lines(log_path),
        ],
        sys.stderr,
    )
    return child.returncode


def _last_lines(path: Path, count: int = 3) -> list[str]:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return []
    return [f"  {line}" for line in lines[-count:]]
