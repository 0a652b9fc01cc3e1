"""Dashboard responsiveness under load: key-to-repaint latency and memory growth.

The app is fed the way a run feeds it: a stand-in collector process (``CollectorProcess``
with a synthetic target) sends groups (group size 8, ~2k tokens per rollout) over the
pipe at a fixed rate and serves the real ``Controls``, so each ``+`` / ``-`` makes the
same round trip to the child as in a run. Keys go in through the app's driver, as a
terminal's would. Latency is from sending the key to the end of the first frame that
painted the status line while it showed the new temperature: each frame records, as it
starts, whether the status bar is among the widgets it repaints and what it says. (Polling
the status line from the bench instead misses frames painted before the poll runs and
reports the next tick's frame; Pilot's ``press`` waits for the whole process to go idle,
which never happens under a steady feed.)
Then 10,000 groups are put straight on the app's inbox, 50 at a time as fast as the app
takes them, and the process RSS is compared before/after.

    python bench/ui_latency.py [--rate 120] [--presses 100] [--groups 10000] [--window 256]
    python bench/ui_latency.py --quick   # five presses, 300 groups: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import statistics
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from _machine import described
from textual import events

from vftui.collector.controls import Controls
from vftui.collector.gate import GroupGate
from vftui.config import RunConfig
from vftui.events import GroupCollected, RunStarted
from vftui.live.process import CollectorProcess, Prepared
from vftui.live.wire import Outbox, serve_commands
from vftui.run_files.files import RunFiles
from vftui.run_files.store import GroupWindow
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox

TOKENS = 2000
BULK_CHUNK = 50  # groups queued at once in the memory phase: ten times a fast collector's tick


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def synthetic_group(index: int, rng: random.Random) -> GroupCollected:
    tokens, masks = [], []
    for _ in range(8):
        ids = [rng.randrange(150_000) for _ in range(TOKENS)]
        cut = TOKENS // 3
        tokens.append(ids)
        masks.append([-100] * cut + ids[cut:])
    return GroupCollected(
        index=index,
        item=index,
        example_id=index,
        scores=[rng.random() for _ in range(8)],
        metrics={"f": [rng.random() for _ in range(8)]},
        turns=[1] * 8,
        tokens=tokens,
        masks=masks,
        messages=[[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 8,
        finish_reasons=["stop"] * 8,
        temperature=1.0,
        started_at=time.time(),
        elapsed_s=0.01,
    )


def painted_frames(app: VftuiApp) -> list[tuple[float, float, str]]:
    """(start, end, status text painted) of every frame the screen paints from now on."""
    frames: list[tuple[float, float, str]] = []
    screen = app.screen
    paint = screen._compositor_refresh

    def timed() -> None:
        start = time.perf_counter()
        dirty = screen._dirty_widgets
        bar = app.dashboard.status_bar
        status = str(bar.render()) if bar in dirty or screen in dirty else ""
        paint()
        frames.append((start, time.perf_counter(), status))

    screen._compositor_refresh = timed
    return frames


def first_frame_showing(
    frames: list[tuple[float, float, str]], after: float, text: str
) -> float | None:
    """End of the first frame since ``after`` that painted ``text`` on the status line."""
    return next((end for start, end, status in frames if start >= after and text in status), None)


def synthetic_collector(
    rate: float, config: RunConfig, event_pipe: Connection, command_pipe: Connection
) -> None:
    """The child: real Controls over the command pipe, synthetic groups at ``rate`` until hung up."""
    outbox = Outbox(event_pipe)
    with tempfile.TemporaryDirectory() as tmp:
        files = RunFiles(Path(tmp) / "groups.jsonl")
        gate = GroupGate(10**9, 0, outbox.put)
        controls = Controls(gate, 1.0, GroupWindow(config.window), files, outbox.put)
        outbox.put(Prepared(str(files.log), simulated=True))
        outbox.put(
            RunStarted("sft", "synthetic", "bench", "simulated", True, "-", 10**9, 0, 8, 1.0, ["f"])
        )
        hung_up = threading.Event()
        threading.Thread(
            target=lambda: (serve_commands(command_pipe, controls), hung_up.set()), daemon=True
        ).start()
        rng, index = random.Random(0), 1
        pool = [
            synthetic_group(i, rng) for i in range(32)
        ]  # building groups is not what we measure
        next_at = time.perf_counter()
        while not hung_up.is_set():
            g = pool[index % len(pool)]
            outbox.put(GroupCollected(**{**g.__dict__, "index": index, "started_at": time.time()}))
            index += 1
            next_at += 1 / rate
            time.sleep(max(0.0, next_at - time.perf_counter()))
    outbox.close()


async def measure(args: argparse.Namespace) -> None:
    inbox = Inbox()
    collector = CollectorProcess(
        RunConfig(window=args.window),
        inbox.put,
        target=functools.partial(synthetic_collector, args.rate),
    )
    collector.start()
    app = VftuiApp(StartedRun(inbox, collector), window=args.window)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(2.0)
        frames = painted_frames(app)
        latencies, temperature = [], 1.0
        for _ in range(args.presses):
            key, char = ("plus", "+") if temperature < 1.9 else ("minus", "-")
            temperature = round(temperature + (0.1 if key == "plus" else -0.1), 2)
            t0 = time.perf_counter()
            app._driver.send_message(events.Key(key, char))
            while (painted := first_frame_showing(frames, t0, f"T={temperature:.2f}")) is None:
                await asyncio.sleep(0.0005)
            latencies.append((painted - t0) * 1000)
            await pilot.pause(0.05)
        ingested = app.model.groups_done
        elapsed = 2.0 + sum(latencies) / 1000 + 0.05 * args.presses
        collector.close()
        await pilot.pause(0.5)
        before = rss_mb()
        start = app.model.groups_done + 1
        rng = random.Random(1)
        pool = [synthetic_group(i, rng) for i in range(32)]
        for n in range(args.groups):
            g = pool[n % len(pool)]
            inbox.put(GroupCollected(**{**g.__dict__, "index": start + n}))
            if n % BULK_CHUNK == BULK_CHUNK - 1:
                while app.model.groups_done < start + n:
                    await pilot.pause(0.01)
        while app.model.groups_done < start + args.groups - 1:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        after = rss_mb()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"ingest rate ~{ingested / elapsed:.0f} groups/s offered {args.rate:g}/s (group size 8, "
        f"{TOKENS} tokens/rollout)"
    )
    print(
        f"key-to-repaint latency over {len(latencies)} presses: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
        f"(target p99 < 50); slowest {', '.join(f'{x:.0f}' for x in latencies[-5:])} ms"
    )
    print(
        f"RSS before {before:.1f} MB, after {args.groups} more groups {after:.1f} MB: "
        f"growth {after - before:+.1f} MB (window {args.window}; target < 50)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=120)
    parser.add_argument("--presses", type=int, default=100)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="five presses and 300 groups: checks that it runs, not its figures",
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.presses, args.groups = 5, 300
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
