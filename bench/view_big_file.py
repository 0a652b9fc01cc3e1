"""``vftui view`` on a big groups file, as a person sees it in a real (tmux) terminal.

Writes a file of many small groups, opens it with ``vftui view`` in tmux at 120x40 and
prints: the time to the first frame and to the first group row on screen, the time until the background
pass has read every line, the view's RSS (now and peak) once it has, and key-to-screen
times for End (to the last group) and a few j/k presses.

    python bench/view_big_file.py [--groups 200000]
    python bench/view_big_file.py --quick   # 2,000 groups: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def wait_for(session: str, pattern: str, timeout: float) -> float:
    """Seconds until ``pattern`` (a regex) is on screen."""
    start = time.perf_counter()
    while not re.search(pattern, screen(session)):
        if time.perf_counter() - start > timeout:
            sys.exit(f"{pattern!r} never appeared; the screen was:\n{screen(session)}")
        time.sleep(0.02)  # each poll is a process start: leave the view its core
    return time.perf_counter() - start


def write_file(path: Path, groups: int) -> int:
    """Groups of 2 rollouts with short token lists: about 520 bytes a line."""
    rng = random.Random(0)
    with path.open("w") as f:
        for i in range(groups):
            scores = [rng.choice([0.0, 0.5, 1.0]) for _ in range(2)]
            line = {
                "tokens": [[rng.randrange(100, 500) for _ in range(12)] for _ in range(2)],
                "masks": [[-100] * 6 + [1] * 6 for _ in range(2)],
                "scores": scores,
                "messages": [
                    [{"role": "user", "content": "sort"}, {"role": "assistant", "content": "a b"}]
                ]
                * 2,
                "vftui": {
                    "item": i,
                    "metrics": {"ok": scores},
                    "turns": [1, 1],
                    "temperature": 1.0,
                    "started_at": 1.7e9 + i,
                    "elapsed_s": 0.5,
                },
            }
            f.write(json.dumps(line) + "\n")
    return path.stat().st_size


def rss_mb(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    values = {k: int(v.split()[0]) / 1024 for k, v in re.findall(r"(VmRSS|VmHWM):\s+(.+)", status)}
    return values["VmRSS"], values["VmHWM"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=200_000)
    parser.add_argument(
        "--quick", action="store_true", help="2,000 groups: checks that it runs, not its figures"
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.groups = 2_000
    session = f"vftui-view-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        size = write_file(path, args.groups)
        os.sync()  # the file's write-back would otherwise compete with the view for the disk and a core
        time.sleep(2)
        command = (
            f"{PANE_ENV} HF_HUB_OFFLINE=1 PATH={os.environ['PATH']} "
            f"PYTHONPATH={os.environ.get('PYTHONPATH', '')} {sys.executable} -m vftui view {path}"
        )
        started = time.perf_counter()
        tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
        try:
            wait_for(session, r"rewards", 120)
            frame = time.perf_counter() - started
            wait_for(session, r"│\s*\d+\s+\d+\s+[▁▂▃▄▅▆▇█]", 120)
            first = time.perf_counter() - started
            wait_for(session, rf"{args.groups}/{args.groups} groups", 600)
            read_all = time.perf_counter() - started
            pid = int(
                subprocess.run(
                    ["pgrep", "-f", f"^{sys.executable} -m vftui view {path}"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()[0]
            )
            rss, peak = rss_mb(pid)
            start = time.perf_counter()
            tmux("send-keys", "-t", session, "End")
            wait_for(session, rf"│\s*{args.groups}\s+{args.groups - 1}\s", 60)
            end_key = time.perf_counter() - start
            moves = []
            for n in range(10):
                key = "k" if n % 2 == 0 else "j"
                shown = args.groups - 1 if key == "k" else args.groups
                start = time.perf_counter()
                tmux("send-keys", "-t", session, key)
                wait_for(session, rf"group {shown} · rollout", 30)
                moves.append(time.perf_counter() - start)
            tmux("send-keys", "-t", session, "q")
        finally:
            tmux("kill-session", "-t", session)
    print(f"vftui view of {args.groups:,} groups ({size / 1e6:.0f} MB) in tmux at 120x40:")
    print(
        f"  first frame: {frame:.2f} s; with a group row: {first:.2f} s; every line read: {read_all:.2f} s"
    )
    print(f"  RSS after the read: {rss:.0f} MB (peak {peak:.0f} MB)")
    print(
        f"  End to the last group on screen: {end_key * 1000:.0f} ms; j/k to its preview: "
        f"p50 {statistics.median(moves) * 1000:.0f} ms, max {max(moves) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
