"""Groups/s of atroposlib's own process mode vs vftui headless and with its dashboard.

All collect from the same simulated endpoint (in this process, on loopback) with the
same environment, group size and tokenizer. "bare" is atroposlib's ``process`` command
driving the VerifiersEnv with no vftui runner; "vftui" is ``vftui run --no-ui``; "tui" is
``vftui run`` with the live dashboard in a detached tmux terminal (skipped without
tmux). The rate is read from each group's timestamps in the jsonl, so interpreter
start-up is excluded.

    python bench/throughput.py [--groups 200] [--group-size 8] [--repeats 3] [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from vftui.sim.server import MODEL, TOKENIZER_DIR, BackgroundSimServer


def groups_per_second(path: Path) -> float:
    metas = [json.loads(line)["vftui"] for line in path.read_text().splitlines() if line.strip()]
    start = metas[0]["started_at"]
    end = metas[-1]["started_at"] + metas[-1]["elapsed_s"]
    return len(metas) / (end - start)


def run(cmd: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"benchmark command failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-2000:]}")


def bare(base_url: str, out: Path, groups: int, group_size: int) -> list[str]:
    return [
        sys.executable, "-m", "vftui.collector.env", "process",
        "--env.vf_env_name", "alphabet-sort", "--env.tokenizer_name", str(TOKENIZER_DIR),
        "--env.group_size", str(group_size), "--env.total_steps", str(groups),
        "--env.data_path_to_save_groups", str(out),
        "--openai.base_url", base_url, "--openai.model_name", MODEL, "--openai.api_key", "x",
    ]


def vftui(base_url: str, out: Path, groups: int, group_size: int) -> list[str]:
    return [
        sys.executable, "-m", "vftui", "run", "--no-ui", "--steps", str(groups), "--group-size", str(group_size),
        "--base-url", base_url, "--out", str(out),
    ]


def tui(base_url: str, out: Path, groups: int, group_size: int) -> list[str]:
    return [arg for arg in vftui(base_url, out, groups, group_size) if arg != "--no-ui"]


def run_in_tmux(cmd: list[str], env: dict[str, str], out: Path, groups: int) -> None:
    """The dashboard in a real (detached) terminal, quit once every group is on disk."""
    session = f"vftui-bench-{uuid.uuid4().hex[:8]}"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ENV_OVERRIDES or k == "PATH")
    command = f"env {exports} {shlex.join(cmd)}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", command], check=True)
    try:
        deadline = time.monotonic() + 900
        while not out.exists() or sum(1 for _ in out.open()) < groups:
            if time.monotonic() > deadline:
                sys.exit(f"the dashboard run did not write {groups} groups in time")
            time.sleep(0.5)
        time.sleep(1.0)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=False)
        time.sleep(1.0)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


ENV_OVERRIDES = {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated per-request latency")
    args = parser.parse_args()
    env = {**os.environ, **ENV_OVERRIDES}
    server = BackgroundSimServer(seed=0, latency_s=args.latency_ms / 1000).start()
    kinds = [("bare", bare), ("vftui", vftui)]
    if shutil.which("tmux"):
        kinds.append(("tui", tui))
    else:
        print("tmux is not installed: no dashboard column", file=sys.stderr)
    rates: dict[str, list[float]] = {name: [] for name, _ in kinds}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                for name, build in kinds:
                    out = Path(tmp) / f"{name}-{i}.jsonl"
                    cmd = build(server.base_url, out, args.groups, args.group_size)
                    run_in_tmux(cmd, env, out, args.groups) if name == "tui" else run(cmd, env)
                    rates[name].append(groups_per_second(out))
                    print(f"  run {i + 1} {name:>5}: {rates[name][-1]:8.2f} groups/s", flush=True)
    finally:
        server.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    labels = {"bare": "atroposlib process (bare)", "vftui": "vftui run --no-ui", "tui": "vftui run (dashboard)"}
    print(f"groups={args.groups} group_size={args.group_size} latency={args.latency_ms:g} ms repeats={args.repeats}")
    print(f"{'collector':<28}{'groups/s (median)':>18}{'ratio to bare':>15}")
    for name, rate in median.items():
        print(f"{labels[name]:<28}{rate:>18.2f}{rate / median['bare']:>15.3f}")
    print("targets: headless >= 0.98 x bare, dashboard >= 0.95 x bare")


if __name__ == "__main__":
    main()
