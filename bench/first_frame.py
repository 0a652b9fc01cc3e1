"""Time to the dashboard's first frame, to a running run and to its first group, from the command's start.

``vftui run`` on the embedded default in a tmux pane; the pane's shell notes the time
just before starting it, and the pane is read every 10 ms. Printed: the median over
``--runs`` starts of the first frame (anything of the app on screen), of "running" (the run
prepared and collecting) and of the first group counted in the status line; then, in fresh
interpreters in the same run, the import floor: what the libraries sft needs take to import
(each alone, then all in one interpreter, shared dependencies once, with the cyclic collector
paused as a run pauses it while they load), which vftui cannot shorten; and vftui's own share,
the time to the first group less that floor.

    python bench/first_frame.py [--runs 5] [--size 100x30]
    python bench/first_frame.py --quick   # one start: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
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


FIRST_GROUP = re.compile(r"running .*\b[1-9]\d*/\d+ groups")
SFT_NEEDS = {
    "atroposlib.envs.base (the collector's core)": "import atroposlib.envs.base",
    "verifiers.v1 (the built-in v1 environment's)": "import verifiers.v1",
    "transformers' AutoTokenizer": "from transformers import AutoTokenizer",
}
"""The libraries an sft run of the embedded default imports, in the order a run does."""


def import_s(statement: str) -> float:
    """Seconds a fresh interpreter takes to run ``statement``, less its own start."""

    def timed(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return time.perf_counter() - start

    return timed(statement) - timed("pass")


def one_start(width: int, height: int) -> tuple[float, float, float]:
    session = f"vftui-first-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        t0_file = Path(tmp) / "t0"
        env = (
            f"{PANE_ENV} HF_HUB_OFFLINE=1 WANDB_MODE=disabled XDG_DATA_HOME={tmp}/data XDG_CONFIG_HOME={tmp}/config "
            f"PATH={os.environ['PATH']} PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
        )
        command = (
            f"date +%s.%N > {t0_file}; {env} {sys.executable} -m vftui run --steps 100000 "
            f"--out {tmp}/groups.jsonl"
        )
        tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command)
        first = running = grouped = None
        try:
            deadline = time.monotonic() + 120
            while grouped is None and time.monotonic() < deadline:
                screen = tmux("capture-pane", "-p", "-t", session)
                now = time.time()
                if first is None and "vftui" in screen:
                    first = now
                if running is None and "running " in screen:
                    running = now
                if FIRST_GROUP.search(screen):
                    grouped = now
                time.sleep(0.01)
            t0 = float(t0_file.read_text())
        finally:
            tmux("send-keys", "-t", session, "q")
            time.sleep(0.5)
            tmux("send-keys", "-t", session, "y")
            time.sleep(2)
            tmux("kill-session", "-t", session)
    if first is None or running is None or grouped is None:
        sys.exit("the dashboard never showed the run's first group")
    return first - t0, running - t0, grouped - t0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", default="100x30")
    parser.add_argument(
        "--quick", action="store_true", help="one start: checks that it runs, not its figures"
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.runs = 1
    width, height = map(int, args.size.split("x"))
    starts = [one_start(width, height) for _ in range(args.runs)]
    first = statistics.median(s[0] for s in starts)
    ready = statistics.median(s[1] for s in starts)
    grouped = statistics.median(s[2] for s in starts)
    print(
        f"{args.size}, median of {args.runs} starts: first frame {first:.2f} s, running {ready:.2f} s, "
        f"first group {grouped:.2f} s (first frame at {first / grouped:.2f} of the time to the first group)"
    )
    print(
        "  each start (first frame, running, first group):",
        ", ".join(f"({a:.2f}, {b:.2f}, {c:.2f})" for a, b, c in starts),
    )
    imports = {what: import_s(statement) for what, statement in SFT_NEEDS.items()}
    floor = statistics.median(
        import_s("; ".join(["import gc", "gc.disable()", *SFT_NEEDS.values()]))
        for _ in range(args.runs)
    )  # shared dependencies (openai, pydantic) once
    print(
        "  imports, each alone in a fresh interpreter: "
        + ", ".join(f"{w} {s:.2f} s" for w, s in imports.items())
    )
    print(
        f"first group {grouped:.2f} s = import floor of what sft needs {floor:.2f} s (median of "
        f"{args.runs}, all in one interpreter, no cyclic collection) + vftui's own share {grouped - floor:.2f} s"
    )


if __name__ == "__main__":
    main()
