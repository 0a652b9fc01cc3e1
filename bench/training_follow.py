"""How fast and how big ``vftui watch RUN_DIR`` is on a long prime-rl run, and ``vftui tokens`` on a big step.

- A ``metrics.jsonl`` of ``--steps`` steps, ~200 metrics a step (trainer and orchestrator rows, as prime-rl
  writes them): the dashboard's first frame with figures on it (Textual's Pilot, headless, 160x48), and the
  seconds from a new step written to it on screen (polled every 0.5 s, as ``watch RUN_DIR`` does).
- Memory: the Python heap the follower holds (tracemalloc) after the whole file against after a tenth of it,
  and after following the same number of steps again as they are appended: bounded by the window, not
  by the run's length.
- Token exports: one step of ``--export-mb`` MB read by ``read_step`` (seconds, heap peak) against a step a
  quarter its size: memory is the sample's and the largest record's, not the step's.

The machine's load is printed first: its neighbours swing a run by ±15%.

    python bench/training_follow.py [--steps 10000] [--export-mb 400]
    python bench/training_follow.py --quick   # small sizes: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from _machine import described

from vftui.training import token_exports
from vftui.training.follow import Follower
from vftui.training.layout import find
from vftui.ui.training.app import TrainingApp

TRAINER = [f"entropy/env_{i}/mean" for i in range(60)] + [
    f"mismatch_kl/env_{i}/max" for i in range(36)
]
ORCHESTRATOR = [f"train/env_{i}/effective/agent/metrics/m{i}/mean" for i in range(100)]


def rows(step: int, when: float, rng: random.Random) -> list[str]:
    trainer = {n: rng.random() for n in TRAINER} | {
        "entropy/all/mean": 1.0,
        "mismatch_kl/all/mean": 1e-3,
        "optim/grad_norm": 0.4,
        "time/step": 8.0,
        "time/wait_for_batch": 0.3,
    }
    orchestrator = {n: rng.random() for n in ORCHESTRATOR} | {
        "train/agg/effective/agent/reward/mean": rng.random(),
        "time/step": 8.2,
        "time/wait_for_policy": 4.0,
    }
    return [
        json.dumps({"step": step, "time": when, **orchestrator}),
        json.dumps({"step": step, "time": when, **trainer}),
    ]


def write_metrics(path: Path, first: int, last: int, rng: random.Random) -> None:
    now = time.time()
    with path.open("a") as f:
        for step in range(first, last + 1):
            f.write("\n".join(rows(step, now - (last - step) * 8, rng)) + "\n")


def screen_text(app: TrainingApp) -> str:
    return "\n".join(
        "".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()
    )


async def frames(run: Path, steps: int, rng: random.Random) -> tuple[float, float]:
    """Seconds to the first frame with figures, and from a new step written to it on screen."""
    start = time.perf_counter()
    app = TrainingApp(Follower(find(run)), every_s=0.5)  # watch RUN_DIR's default
    async with app.run_test(size=(160, 48)) as pilot:
        while f"step {steps} /" not in screen_text(app):
            await pilot.pause(0.01)
        first = time.perf_counter() - start
        write_metrics(run / "metrics.jsonl", steps + 1, steps + 1, rng)
        written = time.perf_counter()
        while f"step {steps + 1} /" not in screen_text(app):
            await pilot.pause(0.01)
        shown = time.perf_counter() - written
        await pilot.press("q")
    return first, shown


def heap_after(run: Path, more: int = 0, rng: random.Random | None = None) -> float:
    """MB of heap a follower holds once it read the run (and then ``more`` steps appended, followed)."""
    tracemalloc.start()
    follower = Follower(find(run))
    follower.poll(until_end=True)
    if more and rng is not None:
        steps = follower.history.step or 0
        for first in range(steps + 1, steps + more + 1, 500):
            write_metrics(run / "metrics.jsonl", first, min(first + 499, steps + more), rng)
            follower.poll(until_end=True)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del follower
    return held / 1e6


def write_export(step_dir: Path, megabytes: int, rng: random.Random) -> None:
    n = 4096
    tokens = [rng.randrange(50_000) for _ in range(n)]
    mask = [i > 512 for i in range(n)]
    index = 0
    while (
        not (step_dir / "rank_0.jsonl").exists()
        or (step_dir / "rank_0.jsonl").stat().st_size < megabytes * 1e6
    ):
        inference = [-abs(rng.gauss(1, 1)) for _ in range(n)]
        trainer = [min(0.0, v + rng.gauss(0, 0.02)) for v in inference]
        token_exports.write_sequence(
            step_dir, 0, index, "env", tokens, mask, [0.5] * n, inference, trainer, [1.0] * n
        )
        index += 1
    token_exports.mark_stable(step_dir)


def read_export(step_dir: Path) -> tuple[float, float]:
    tracemalloc.start()
    start = time.perf_counter()
    token_exports.read_step(token_exports.ExportStep(1, step_dir, True))
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--export-mb", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="small sizes: checks that it runs")
    args = parser.parse_args()
    steps, export_mb = (500, 8) if args.quick else (args.steps, args.export_mb)
    print(described())
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        small, big = Path(tmp, "small"), Path(tmp, "big")
        for run, n in ((small, steps // 10), (big, steps)):
            run.mkdir()
            write_metrics(run / "metrics.jsonl", 1, n, rng)
        size = (big / "metrics.jsonl").stat().st_size / 1e6
        metrics = len(TRAINER) + len(ORCHESTRATOR) + 8
        print(f"\n## metrics.jsonl of {steps:,} steps, {metrics} metrics a step ({size:.0f} MB)")
        first, shown = asyncio.run(frames(big, steps, rng))
        print(
            f"first frame with figures: {first:.2f} s; a new step on screen {shown:.2f} s after it was written"
        )
        at_tenth, at_whole = heap_after(small), heap_after(big)
        more = steps - steps // 10
        followed = heap_after(small, more=more, rng=rng)
        twice = heap_after(big, more=more, rng=rng)
        print(
            f"heap held: {at_tenth:.1f} MB after {steps // 10:,} steps, {at_whole:.1f} MB after {steps:,} "
            f"({at_whole / at_tenth:.2f}x); following: {followed:.1f} MB after {more:,} more steps, "
            f"{twice:.1f} MB after {steps + more:,} ({twice / followed:.2f}x)"
        )
        quarter, whole = Path(tmp, "e1", "step_1"), Path(tmp, "e2", "step_1")
        write_export(quarter, max(1, export_mb // 4), rng)
        write_export(whole, export_mb, rng)
        (s1, m1), (s2, m2) = read_export(quarter), read_export(whole)
        print(f"\n## token export step of {export_mb:,} MB against {max(1, export_mb // 4):,} MB")
        print(
            f"read_step: {s2:.1f} s ({s2 / s1:.2f}x the quarter's); heap peak {m2:.0f} MB ({m2 / m1:.2f}x)"
        )


if __name__ == "__main__":
    main()
