"""Groups/s of atroposlib's own process mode vs ``vftui run --no-ui``, side by side.

Both collect from the same simulated endpoint (in this process, on loopback) with the
same environment, group size and tokenizer. "bare" is atroposlib's ``process`` command
driving the VerifiersEnv with no vftui runner; "vftui" is the headless run. The rate is
read from each group's timestamps in the jsonl, so interpreter start-up is excluded.

    python bench/throughput.py [--groups 200] [--group-size 8] [--repeats 3] [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated per-request latency")
    args = parser.parse_args()
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    server = BackgroundSimServer(seed=0, latency_s=args.latency_ms / 1000).start()
    rates: dict[str, list[float]] = {"bare": [], "vftui": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                for name, build in (("bare", bare), ("vftui", vftui)):
                    out = Path(tmp) / f"{name}-{i}.jsonl"
                    run(build(server.base_url, out, args.groups, args.group_size), env)
                    rates[name].append(groups_per_second(out))
                    print(f"  run {i + 1} {name:>5}: {rates[name][-1]:8.2f} groups/s", flush=True)
    finally:
        server.stop()
    bare_rate, vftui_rate = statistics.median(rates["bare"]), statistics.median(rates["vftui"])
    print(f"groups={args.groups} group_size={args.group_size} latency={args.latency_ms:g} ms repeats={args.repeats}")
    print(f"{'collector':<28}{'groups/s (median)':>18}")
    print(f"{'atroposlib process (bare)':<28}{bare_rate:>18.2f}")
    print(f"{'vftui run --no-ui':<28}{vftui_rate:>18.2f}")
    print(f"ratio vftui/bare: {vftui_rate / bare_rate:.3f}  (target >= 0.98)")


if __name__ == "__main__":
    main()
