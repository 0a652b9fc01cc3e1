"""Groups/s of a v1 taskset's rollouts in vftui's in-process runner vs verifiers' env servers (--env-server).

The same taskset (vftui's alphabet-sort, re-exported under a top-level name the server's workers
import) against the same simulated endpoint (in this process, on loopback, no added latency),
three ways: ``vftui run --no-ui`` in-process; ``--env-server spawn`` (a pool of ``--workers``
started for the run); ``--env-server tcp://...`` against a pool already running (warmed by one
group first). Then the same three for a variant whose metric blocks its event loop for
``--block`` seconds (a synchronous judge or verifier): that is where a pool can win. The rate is
read from the groups' timestamps (first start to last end), so vftui's own start-up is excluded
but a spawned pool's first rollouts, which wait for its workers to load, are not; the wall time of
each run, start-up included, is printed beside it.

    python bench/env_server.py [--groups 8] [--group-size 4] [--workers 4] [--block 1.5]
    python bench/env_server.py --quick   # one group, one worker, no variant, no spawned pool (CI)
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _machine import described
from throughput import groups_per_second, run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' pinned registry settings
from tests.verifiers_reference import pinned
from vftui.sim.server import BackgroundSimServer

SORT = (
    "from vftui.sim.envs.alphabet_sort import AlphabetSortEnv, AlphabetSortTaskset\n"
    "__all__ = ['AlphabetSortEnv', 'AlphabetSortTaskset']\n"
)
BLOCKING = textwrap.dedent("""
    import os
    import time

    import verifiers.v1 as vf
    from vftui.sim.envs.alphabet_sort import (
        AlphabetSortConfig, AlphabetSortData, AlphabetSortEnv, AlphabetSortTask, AlphabetSortTaskset)


    class BlockingTask(AlphabetSortTask):
        @vf.metric
        async def blocked(self, trace: vf.Trace) -> float:
            time.sleep(float(os.environ["VFTUI_BENCH_BLOCK_S"]))  # no await: the loop waits
            return 1.0


    class BlockingEnv(AlphabetSortEnv):
        pass


    class BlockingTaskset(vf.Taskset[BlockingTask, AlphabetSortConfig]):
        def load(self):
            for task in AlphabetSortTaskset(self.config).load():
                data = AlphabetSortData.model_validate(task.data.model_dump())
                yield BlockingTask(data, self.config.task)


    __all__ = ["BlockingEnv", "BlockingTaskset"]
""")
SERVER = textwrap.dedent("""
    import sys

    from verifiers.v1.serve import serve_env
    from verifiers.v1.utils.loaders import resolve_env_config

    if __name__ == "__main__":  # its workers import this file again
        taskset, address, workers = sys.argv[1:]
        config = resolve_env_config({"taskset": {"id": taskset},
            "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}})
        serve_env(config=config, address=address, max_workers=int(workers), elastic=False)
""")


def collect(taskset: str, base_url: str, out: Path, groups: int, args, env, *extra: str):
    """Groups/s from the jsonl's timestamps, and the run's wall time with its start-up."""
    started = time.monotonic()
    run(
        [
            *(sys.executable, "-m", "vftui", "run", "--no-ui", "--env", taskset),
            *("--base-url", base_url, "--steps", str(groups), "--group-size", str(args.group_size)),
            *("--concurrency", "64", "--out", str(out), *extra),
        ],
        env,
    )
    return groups_per_second(out), time.monotonic() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compare(taskset: str, title: str, args, env: dict[str, str], tmp: Path) -> None:
    server = BackgroundSimServer(seed=0).start()
    address = f"tcp://127.0.0.1:{free_port()}"
    pool = subprocess.Popen(
        [sys.executable, str(tmp / "serve.py"), taskset, address, str(args.workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url, name = server.base_url, taskset.removeprefix("vftui_bench_")
    try:
        rates = {
            "in-process": collect(taskset, url, tmp / f"{name}-local.jsonl", args.groups, args, env)
        }
        # quick: one pool, at an address (tests/test_env_server.py runs the spawned ones)
        if not args.quick:
            rates["pool spawned for the run"] = collect(
                taskset,
                url,
                tmp / f"{name}-spawned.jsonl",
                args.groups,
                args,
                env,
                *("--env-server", "spawn", "--env-workers", str(args.workers)),
            )
        warm = ("--env-server", address)  # warmed first: its start is not what the rate measures
        collect(taskset, url, tmp / f"{name}-warming.jsonl", 1, args, env, *warm)
        rates["warm pool at an address"] = collect(
            taskset, url, tmp / f"{name}-warm.jsonl", args.groups, args, env, *warm
        )
    finally:
        pool.send_signal(signal.SIGTERM)
        pool.wait(timeout=120)
        server.stop()
    local = rates["in-process"][0]
    print(f"\n## {title}: {args.groups} groups x {args.group_size}, {args.workers} workers")
    print(f"{'rollouts run':<28}{'groups/s':>10}{'ratio to in-process':>22}{'wall s':>9}")
    for label, (rate, wall) in rates.items():
        print(f"{label:<28}{rate:>10.3f}{rate / local:>22.3f}{wall:>9.1f}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--block", type=float, default=1.5, help="seconds the variant's metric blocks"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check it runs (CI)")
    args = parser.parse_args()
    if args.quick:  # one worker: a lone server, no broker; the blocking variant runs the same path
        args.groups, args.group_size, args.workers, args.block = 1, 2, 1, 0.5
    print(described(), flush=True)
    with tempfile.TemporaryDirectory(prefix="vftui-bench-env-server-") as folder:
        tmp = Path(folder)
        (tmp / "vftui_bench_sort.py").write_text(SORT)
        (tmp / "vftui_bench_blocking.py").write_text(BLOCKING)
        (tmp / "serve.py").write_text(SERVER)
        env = pinned(
            {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")]),
                "HF_DATASETS_OFFLINE": "1",
                "VFTUI_BENCH_BLOCK_S": str(args.block),
            }
        )
        compare("vftui_bench_sort", "alphabet-sort (single turn)", args, env, tmp)
        if args.quick:
            return
        compare(
            "vftui_bench_blocking",
            f"alphabet-sort with a metric that blocks its loop {args.block:g} s",
            args,
            env,
            tmp,
        )


if __name__ == "__main__":
    main()
