"""Bytes the dashboard writes to its terminal, as an SSH link would carry them.

``vftui run`` collects from the simulated endpoint with no added latency (as fast as this
machine allows) in a tmux pane; ``tmux pipe-pane`` records what the app writes over a fixed
window while collecting, then while paused. Printed per size: KB/s for each.

    python bench/terminal_bytes.py [--seconds 10]
    python bench/terminal_bytes.py --quick   # one size, 1 s windows: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _machine import described
from _pane import PANE_ENV


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def wait_for(session: str, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in tmux("capture-pane", "-p", "-t", session):
        if time.monotonic() > deadline:
            sys.exit(f"{text!r} never appeared")
        time.sleep(0.2)


def recorded_bytes(session: str, path: Path, seconds: float) -> int:
    path.write_bytes(b"")
    tmux("pipe-pane", "-t", session, f"cat >> {path}")
    time.sleep(seconds)
    tmux("pipe-pane", "-t", session)  # stops recording
    time.sleep(0.2)
    return path.stat().st_size


def measure(width: int, height: int, seconds: float) -> tuple[float, float, str]:
    session = f"vftui-bytes-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        # tmux gives the pane its server's environment, not ours: pass what matters on
        command = (
            f"{PANE_ENV} HF_HUB_OFFLINE=1 WANDB_MODE=disabled PATH={os.environ['PATH']} "
            f"PYTHONPATH={os.environ.get('PYTHONPATH', '')} {sys.executable} -m vftui "
            f"run --steps 1000000 --group-size 4 --out {tmp}/groups.jsonl"
        )
        # started in the temporary folder: ``python -m`` puts the working folder first on the path, so the
        # tree PYTHONPATH names is measured, not the one the bench was started in
        size = ("-x", str(width), "-y", str(height))
        tmux("new-session", "-d", "-s", session, "-c", tmp, *size, command)
        try:
            wait_for(session, "running")
            time.sleep(3)  # past the first screenfuls
            collecting = recorded_bytes(session, Path(tmp) / "collecting.bytes", seconds)
            status = tmux("capture-pane", "-p", "-t", session).splitlines()[1].strip()
            tmux("send-keys", "-t", session, "space")
            wait_for(session, "paused")
            time.sleep(1)
            paused = recorded_bytes(session, Path(tmp) / "paused.bytes", seconds)
            tmux("send-keys", "-t", session, "q")
            time.sleep(0.5)
            tmux("send-keys", "-t", session, "y")
            time.sleep(3)
        finally:
            tmux("kill-session", "-t", session)
    return collecting / seconds / 1000, paused / seconds / 1000, status


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="one size, 1 s windows: checks that it runs, not its figures",
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.seconds = 1.0
    for width, height in ((80, 24),) if args.quick else ((80, 24), (120, 40)):
        collecting, paused, status = measure(width, height, args.seconds)
        print(
            f"{width}x{height}: {collecting:.1f} KB/s collecting, {paused:.2f} KB/s paused "
            f"(over {args.seconds:g} s each)"
        )
        print(f"  while: {status[:110]}")


if __name__ == "__main__":
    main()
