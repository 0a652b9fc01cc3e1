"""How fast ``vftui export`` streams a big run into a training set, and that its memory does not grow with it.

A run of the embedded default (groups of 8) is collected, then copied line by line, each copy a new
item with its scores shifted, into sources of ``--mb`` MB and a quarter of that. Each is exported by
the CLI as a user runs it (prime-rl's parquet, ``--best-of 4 --dedupe``, and Atropos's jsonl): wall
seconds, MB/s of source read, and the process's peak RSS, the big source's against the quarter's
(bounded: about 1x; ``--dedupe`` keeps 32 bytes a kept rollout).

The machine's load is printed first: its neighbours swing a run by ±15%.

    python bench/export.py [--mb 2000]
    python bench/export.py --quick   # small sizes: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import described

VFTUI = [sys.executable, "-m", "vftui"]
RUN = ["run", "--mode", "sft", "--group-size", "8", "--no-ui", "--out"]


def collected(folder: Path, steps: int) -> list[dict]:
    out = folder / "seed.jsonl"
    subprocess.run(
        [*VFTUI, *RUN, str(out), "--steps", str(steps)],
        check=True,
        capture_output=True,
    )
    return [json.loads(line) for line in out.read_text().splitlines()]


def source(path: Path, seeds: list[dict], mb: int, rng: random.Random) -> int:
    """Copies of the seed groups until ``mb`` MB: each a new item, its scores shifted."""
    written, item = 0, 0
    with path.open("w") as f:
        while written < mb * 1024**2:
            group = dict(rng.choice(seeds))
            shift = rng.uniform(-0.5, 0.5)
            group["scores"] = [s + shift for s in group["scores"]]
            group["vftui"] = {**group["vftui"], "item": item}
            line = json.dumps(group) + "\n"
            f.write(line)
            written += len(line)
            item += 1
    return item


def exported(src: Path, out: Path, args: list[str]) -> tuple[float, float]:
    """Seconds and the child's peak RSS (MB) of one ``vftui export``, in a process of its own."""
    probe = [
        sys.executable,
        "-c",
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
        "stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
        *VFTUI,
        "export",
        str(src),
        "-o",
        str(out),
        *args,
    ]
    started = time.perf_counter()
    done = subprocess.run(probe, check=True, capture_output=True, text=True)
    return time.perf_counter() - started, int(done.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=2000, help="the big source's size")
    parser.add_argument("--quick", action="store_true", help="small sizes: checks that it runs")
    args = parser.parse_args()
    mb = 8 if args.quick else args.mb
    print(described())
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        seeds = collected(folder, 8 if args.quick else 40)
        sizes = {"quarter": max(1, mb // 4), "whole": mb}
        sources = {}
        for name, size in sizes.items():
            path = folder / f"{name}.jsonl"
            groups = source(path, seeds, size, rng)
            sources[name] = (path, groups, path.stat().st_size / 1024**2)
        for label, fmt in (
            (
                "prime-rl parquet, --best-of 4 --dedupe",
                ["--format", "prime-rl", "--best-of", "4", "--dedupe"],
            ),
            ("atropos jsonl", ["--format", "atropos"]),
        ):
            suffix = ".parquet" if "prime-rl" in fmt else ".jsonl"
            print(f"\n## {label}")
            figures = {}
            for name, (path, groups, size) in sources.items():
                out = folder / f"out-{name}{suffix}"
                seconds, rss = exported(path, out, fmt)
                figures[name] = (seconds, rss)
                print(
                    f"{name:>7}: {size:,.0f} MB, {groups:,} groups: {seconds:.1f} s "
                    f"({size / seconds:.1f} MB/s), peak RSS {rss:.0f} MB"
                )
                os.unlink(out)
            ratio = figures["whole"][1] / figures["quarter"][1]
            print(
                f"peak RSS whole/quarter: {ratio:.2f}x for {mb / sizes['quarter']:.0f}x the source"
            )


if __name__ == "__main__":
    main()
