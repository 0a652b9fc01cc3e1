"""Key-to-screen latency as a person sees it: the dashboard in a real (tmux) terminal.

``vftui run`` collects from the simulated endpoint with no added latency (the collector
as busy as it gets) while ``+``/``-`` go in through ``tmux send-keys``; each latency is from
sending the key to ``capture-pane`` showing the new temperature, so it includes tmux and
the polling, and is an upper bound on the app's own.

    python bench/key_latency_tmux.py [--presses 40]
    python bench/key_latency_tmux.py --quick   # three presses: that it runs and prints (CI)
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

from _machine import described
from _pane import PANE_ENV

from vftui.sim.server import BackgroundSimServer


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument(
        "--quick", action="store_true", help="three presses: checks that it runs, not its figures"
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.presses = 3
    session = f"vftui-lat-{uuid.uuid4().hex[:8]}"
    sim = BackgroundSimServer().start()
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        command = (
            f"{PANE_ENV} HF_HUB_OFFLINE=1 WANDB_MODE=disabled PATH={os.environ['PATH']} "
            f"PYTHONPATH={os.environ.get('PYTHONPATH', '')} {sys.executable} -m vftui run "
            f"--steps 1000000 --base-url {sim.base_url} --out {tmp}/groups.jsonl"
        )
        tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", command)
        try:
            deadline = time.monotonic() + 120
            while "running" not in tmux("capture-pane", "-p", "-t", session):
                if time.monotonic() > deadline:
                    sys.exit("the dashboard did not start")
                time.sleep(0.2)
            time.sleep(1 if args.quick else 5)  # let the window fill
            temperature = 1.0
            for _ in range(args.presses):
                key = "+" if temperature < 1.9 else "-"
                temperature = round(temperature + (0.1 if key == "+" else -0.1), 2)
                start = time.perf_counter()
                tmux("send-keys", "-t", session, key)
                while f"T={temperature:.2f}" not in tmux("capture-pane", "-p", "-t", session):
                    time.sleep(0.002)  # each poll is a process start; leave the run some CPU
                latencies.append((time.perf_counter() - start) * 1000)
                time.sleep(0.1)
            status = tmux("capture-pane", "-p", "-t", session).splitlines()[1].strip()
            tmux("send-keys", "-t", session, "q")
            time.sleep(0.5)
            tmux("send-keys", "-t", session, "y")
            deadline = time.monotonic() + 60  # the run stops and flushes before the endpoint goes
            while (
                subprocess.run(
                    ["tmux", "has-session", "-t", session], capture_output=True
                ).returncode
                == 0
            ):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        finally:
            tmux("kill-session", "-t", session)
            sim.stop()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"key-to-screen in tmux over {len(latencies)} presses: p50 {statistics.median(latencies):.1f} ms, "
        f"p99 {p99:.1f} ms; slowest {', '.join(f'{x:.0f}' for x in latencies[-5:])} ms"
    )
    print(f"while: {status[:100]}")


if __name__ == "__main__":
    main()
