"""Time to the dashboard's first frame, and to a running run, from the command's start.

``vftui run`` on the embedded default in a tmux pane; the pane's shell notes the time
just before starting it, and the pane is read every 10 ms. Printed: the median over
``--runs`` starts of the first frame (anything of the app on screen) and of "running"
(the run prepared and collecting), and their ratio.

    python bench/first_frame.py [--runs 5] [--size 100x30]
    python bench/first_frame.py --quick   # one start: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def one_start(width: int, height: int) -> tuple[float, float]:
    session = f"vftui-first-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        t0_file = Path(tmp) / "t0"
        env = (f"env HF_HUB_OFFLINE=1 WANDB_MODE=disabled XDG_DATA_HOME={tmp}/data XDG_CONFIG_HOME={tmp}/config "
               f"PATH={os.environ['PATH']} PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
        command = (f"date +%s.%N > {t0_file}; {env} {sys.executable} -m vftui run --steps 100000 "
                   f"--out {tmp}/groups.jsonl")
        tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command)
        first = running = None
        try:
            deadline = time.monotonic() + 120
            while running is None and time.monotonic() < deadline:
                screen = tmux("capture-pane", "-p", "-t", session)
                now = time.time()
                if first is None and ("vftui" in screen or "SIMULATED" in screen):
                    first = now
                if " running " in screen:
                    running = now
                time.sleep(0.01)
            t0 = float(t0_file.read_text())
        finally:
            tmux("send-keys", "-t", session, "q")
            time.sleep(0.5)
            tmux("send-keys", "-t", session, "y")
            time.sleep(2)
            tmux("kill-session", "-t", session)
    if first is None or running is None:
        sys.exit("the dashboard never showed the run running")
    return first - t0, running - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", default="100x30")
    parser.add_argument("--quick", action="store_true", help="one start: checks that it runs, not its figures")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    width, height = map(int, args.size.split("x"))
    starts = [one_start(width, height) for _ in range(args.runs)]
    first = statistics.median(s[0] for s in starts)
    ready = statistics.median(s[1] for s in starts)
    print(f"{args.size}, median of {args.runs} starts: first frame {first:.2f} s, running {ready:.2f} s "
          f"(first frame at {first / ready:.2f} of the time to running)")
    print("  each start (first frame, running):", ", ".join(f"({a:.2f}, {b:.2f})" for a, b in starts))


if __name__ == "__main__":
    main()
