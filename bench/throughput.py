"""Groups/s of atroposlib's own process mode vs vftui headless and with its dashboard.

All collect from the same simulated endpoint (in this process, on loopback) with the
same environment, group size and tokenizer. "bare" is atroposlib's ``process`` command
driving the VerifiersEnv with no vftui runner; "vftui" is ``vftui run --no-ui``; "tui" is
``vftui run`` with the live dashboard in a detached tmux terminal (skipped without
tmux). The rate is read from each group's timestamps in the jsonl, so interpreter
start-up is excluded.

The rl columns run atroposlib's serve mode against the same simulated server's vLLM-style
``/generate``, with a fresh ``run-api`` and a trainer pulling one group per batch: "bare
serve" is ``python -m vftui.collector.env serve``, "vftui rl" is ``vftui run --mode rl
--no-ui``. Their rate is the trainer's arrival rate (first group to last), so start-up and
registration are excluded there too.

    python bench/throughput.py [--groups 200] [--group-size 8] [--repeats 3] [--latency-ms 0] [--rl-groups 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from vftui.collector.trajectory_api import ApiProcess
from vftui.sim.server import MODEL, TOKENIZER_DIR, BackgroundSimServer
from vftui.sim.trainer import run_trainer


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tui(base_url: str, out: Path, groups: int, group_size: int) -> list[str]:
    return [arg for arg in vftui(base_url, out, groups, group_size) if arg != "--no-ui"]


def run_in_tmux(cmd: list[str], env: dict[str, str], out: Path, groups: int) -> None:
    """The dashboard in a real (detached) terminal, quit once every group is on disk."""
    session = f"vftui-bench-{uuid.uuid4().hex[:8]}"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ENV_OVERRIDES or k == "PATH")
    command = f"env {exports} {shlex.join(cmd)}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", command], check=True)
    try:
        deadline, lines, read = time.monotonic() + 900, 0, 0
        while lines < groups:  # counted from the new bytes only: this process also hosts the endpoint
            if time.monotonic() > deadline:
                sys.exit(f"the dashboard run did not write {groups} groups in time")
            time.sleep(0.5)
            if out.exists():
                with out.open("rb") as f:
                    f.seek(read)
                    chunk = f.read()
                read, lines = read + len(chunk), lines + chunk.count(b"\n")
        time.sleep(1.0)
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=False)
        time.sleep(1.0)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def bare_serve(base_url: str, api_url: str, group_size: int, out: Path) -> list[str]:
    tokenizer = str(TOKENIZER_DIR)
    return [
        sys.executable, "-m", "vftui.collector.env", "serve",
        "--env.vf_env_name", "alphabet-sort", "--env.tokenizer_name", tokenizer, "--env.group_size", str(group_size),
        "--env.rollout_server_url", api_url, "--env.use_wandb", "False", "--env.total_steps", "1000000",
        "--openai.base_url", base_url, "--openai.model_name", MODEL, "--openai.api_key", "x",
        "--openai.server_type", "vllm", "--openai.tokenizer_name", tokenizer,
        "--env.data_path_to_save_groups", str(out),  # both keep a local copy of what they send
    ]


def vftui_rl(base_url: str, api_url: str, group_size: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "vftui", "run", "--mode", "rl", "--no-ui", "--steps", "1000000",
            "--group-size", str(group_size), "--base-url", base_url, "--api-url", api_url, "--out", str(out)]


def serve_rate(cmd: list[str], env: dict[str, str], api_url: str, groups: int, group_size: int) -> float:
    """Groups/s reaching a trainer that pulls one group per batch, first to last arrival."""
    arrivals: list[float] = []
    trainer = threading.Thread(
        target=run_trainer, args=(api_url, group_size, groups + 1),
        kwargs={"say": lambda line: None, "on_batch": lambda batch: arrivals.append(time.monotonic())}, daemon=True,
    )
    trainer.start()
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        trainer.join(timeout=900)
        if trainer.is_alive():
            sys.exit(f"the serve run did not deliver {groups + 1} groups in time: {' '.join(cmd)}")
    finally:
        process.kill()
        process.wait()
    return groups / (arrivals[-1] - arrivals[0])


ENV_OVERRIDES = {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated per-request latency")
    parser.add_argument("--rl-groups", type=int, default=40, help="groups per rl run (0: skip the rl columns)")
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
                for name, build in (("serve", bare_serve), ("rl", vftui_rl)) if args.rl_groups else ():
                    api = ApiProcess(f"http://127.0.0.1:{free_port()}").start()
                    try:
                        cmd = build(server.base_url, api.api_url, args.group_size, Path(tmp) / f"{name}-{i}.jsonl")
                        rate = serve_rate(cmd, {**env, "VFTUI_WINDOW": "64"}, api.api_url, args.rl_groups,
                                          args.group_size)
                    finally:
                        api.stop()
                    rates.setdefault(name, []).append(rate)
                    print(f"  run {i + 1} {name:>5}: {rate:8.2f} groups/s", flush=True)
    finally:
        server.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    labels = {"bare": "atroposlib process (bare)", "vftui": "vftui run --no-ui", "tui": "vftui run (dashboard)",
              "serve": "atroposlib serve (bare)", "rl": "vftui run --mode rl"}
    print(f"groups={args.groups} group_size={args.group_size} latency={args.latency_ms:g} ms repeats={args.repeats}")
    print(f"{'collector':<28}{'groups/s (median)':>18}{'ratio to bare':>15}")
    for name, rate in median.items():
        base = median["serve"] if name in ("serve", "rl") else median["bare"]
        print(f"{labels[name]:<28}{rate:>18.2f}{rate / base:>15.3f}")
    print("targets: headless >= 0.98 x bare, dashboard >= 0.95 x bare (process); rl is against bare serve")


if __name__ == "__main__":
    main()
