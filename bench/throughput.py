"""Groups/s of atroposlib's own process mode vs vftui headless and with its dashboard.

All collect from the same simulated endpoint (in this process, on loopback) with the
same environment, group size and tokenizer. "bare" is atroposlib's ``process`` command
driving the VerifiersEnv with no vftui runner; "vftui" is ``vftui run --no-ui``; "tui" is
``vftui run`` with the live dashboard in a detached tmux terminal (skipped without
tmux). The rate is read from each group's timestamps in the jsonl, so interpreter
start-up is excluded.

Sections (``--sections``, all by default):

- ``cpu``: no added latency, so the collector's own cost shows: ratio to bare.
- ``latency``: 0.2 s and 1 s per request, single- and 3-turn, ``--concurrency 64``. The
  limit is what 64 requests in flight allow: 64 / latency / group size / turns groups/s;
  every column is a ratio to it. Bare atroposlib collects one group at a time.
- ``rate``: an endpoint that answers at most R requests/s (429 with Retry-After beyond
  it): answered requests/s against R, rejections, back-off steps and rejections per step.
- ``memory``: peak RSS of ``vftui run --no-ui`` with ~2k-token rollouts at 64 and at 8
  requests in flight, 1 s latency.
- ``v1``: a v1 taskset (the default, ``vftui/alphabet-sort``, 3 turns) collected by vftui and by
  verifiers' own v1 eval (``eval``/``vf-eval``, its plain chat harness and local runtime, the
  taskset re-exported under a top-level name it can import) against the same simulated
  endpoint, with no added latency: groups/s of each (verifiers' from its traces' first
  start to last score, so its start-up is excluded); then vftui at 1 s a request against
  the limit 64 requests in flight allow.
- ``eval``: ``vftui run --mode eval`` and verifiers' ``vf-eval`` (0.3's, the classic built-in
  re-exported under a top-level name it can import) over the same eval split of the same
  simulated endpoint, 64 requests in flight each, no added latency: examples/s of each from
  their own timings (start-up excluded); then vftui at 1 s a request against the limit
  (64 / 1 s / k examples/s).
- ``end``: the end of a run: seconds from its last group on disk (the jsonl's last write) to the
  process's exit, for ``vftui run --no-ui`` of ``--end-groups`` groups (10,000 by default) with no
  added latency; what it writes then is its html page's tail, its checkpoint and its summary.
- ``rl``: atroposlib's serve mode against the same simulated server's vLLM-style
  ``/generate``, with a fresh ``run-api`` and a trainer pulling one group per batch: "bare
  serve" is ``python -m vftui.collector.verifiers_env serve``, "vftui rl" is ``vftui run --mode rl
  --no-ui``. Their rate is the trainer's arrival rate (first group to last).

    python bench/throughput.py [--sections cpu,latency,rate,memory,v1,eval,end,rl] [--groups 200] [--repeats 3]
    python bench/throughput.py --quick   # tiny sizes, one repeat: that every section runs and prints (CI)
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

import httpx
from _machine import described
from _pane import PANE_ENV

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # the tests' reference eval, run by hand too
from tests.verifiers_reference import episodes, eval_command, pinned
from vftui.collector.rl.api_process import ApiProcess
from vftui.defaults import DEFAULT_ENV
from vftui.sim.server import MODEL, TOKENIZER_DIR, BackgroundSimServer
from vftui.sim.trainer import run_trainer


def groups_per_second(path: Path) -> float:
    """First start to last end over every group: with groups in flight the file is in finishing order."""
    metas = [json.loads(line)["vftui"] for line in path.read_text().splitlines() if line.strip()]
    start = min(m["started_at"] for m in metas)
    end = max(m["started_at"] + m["elapsed_s"] for m in metas)
    return len(metas) / (end - start)


def run(cmd: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(
            f"benchmark command failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-2000:]}"
        )
    return result.stderr


def bare(
    base_url: str, out: Path, groups: int, group_size: int, *, env_args: str = ""
) -> list[str]:
    extra = ["--env.env_args", env_args] if env_args else []
    return [
        sys.executable,
        "-m",
        "vftui.collector.verifiers_env",
        "process",
        "--env.vf_env_name",
        ENV,
        "--env.tokenizer_name",
        str(TOKENIZER_DIR),
        "--env.group_size",
        str(group_size),
        "--env.total_steps",
        str(groups),
        "--env.data_path_to_save_groups",
        str(out),
        "--openai.base_url",
        base_url,
        "--openai.model_name",
        MODEL,
        "--openai.api_key",
        "x",
        *extra,
    ]


def vftui(
    base_url: str,
    out: Path,
    groups: int,
    group_size: int,
    *,
    env_args: str = "",
    concurrency: int = 0,
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "vftui",
        "run",
        "--no-ui",
        "--steps",
        str(groups),
        "--group-size",
        str(group_size),
        "--base-url",
        base_url,
        "--out",
        str(out),
    ]
    if env_args:
        cmd += ["--env-args", env_args]
    if concurrency:
        cmd += ["--concurrency", str(concurrency)]
    return cmd


def tui(base_url: str, out: Path, groups: int, group_size: int, **options) -> list[str]:
    return [arg for arg in vftui(base_url, out, groups, group_size, **options) if arg != "--no-ui"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_in_tmux(cmd: list[str], env: dict[str, str], out: Path, groups: int) -> None:
    """The dashboard in a real (detached) terminal, quit once every group is on disk."""
    session = f"vftui-bench-{uuid.uuid4().hex[:8]}"
    exports = " ".join(
        f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ENV_OVERRIDES or k == "PATH"
    )
    command = f"{PANE_ENV} {exports} {shlex.join(cmd)}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", command], check=True
    )
    try:
        deadline, lines, read = time.monotonic() + 900, 0, 0
        while (
            lines < groups
        ):  # counted from the new bytes only: this process also hosts the endpoint
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


def collect(
    name: str,
    build,
    server: BackgroundSimServer,
    env: dict[str, str],
    out: Path,
    groups: int,
    group_size: int,
    **options,
) -> float:
    cmd = build(server.base_url, out, groups, group_size, **options)
    run_in_tmux(cmd, env, out, groups) if name == "tui" else run(cmd, env)
    return groups_per_second(out)


def bare_serve(base_url: str, api_url: str, group_size: int, out: Path) -> list[str]:
    tokenizer = str(TOKENIZER_DIR)
    return [
        sys.executable,
        "-m",
        "vftui.collector.verifiers_env",
        "serve",
        "--env.vf_env_name",
        ENV,
        "--env.tokenizer_name",
        tokenizer,
        "--env.group_size",
        str(group_size),
        "--env.rollout_server_url",
        api_url,
        "--env.use_wandb",
        "False",
        "--env.total_steps",
        "1000000",
        "--openai.base_url",
        base_url,
        "--openai.model_name",
        MODEL,
        "--openai.api_key",
        "x",
        "--openai.server_type",
        "vllm",
        "--openai.tokenizer_name",
        tokenizer,
        "--env.data_path_to_save_groups",
        str(out),  # both keep a local copy of what they send
    ]


def vftui_rl(base_url: str, api_url: str, group_size: int, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vftui",
        "run",
        "--mode",
        "rl",
        "--no-ui",
        "--steps",
        "1000000",
        "--group-size",
        str(group_size),
        "--base-url",
        base_url,
        "--api-url",
        api_url,
        "--out",
        str(out),
    ]


def serve_rate(
    cmd: list[str], env: dict[str, str], api_url: str, groups: int, group_size: int
) -> float:
    """Groups/s reaching a trainer that pulls one group per batch, first to last arrival."""
    arrivals: list[float] = []
    trainer = threading.Thread(
        target=run_trainer,
        args=(api_url, group_size, groups + 1),
        kwargs={
            "say": lambda line: None,
            "on_batch": lambda batch: arrivals.append(time.monotonic()),
        },
        daemon=True,
    )
    trainer.start()
    process = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        trainer.join(timeout=900)
        if trainer.is_alive():
            sys.exit(f"the serve run did not deliver {groups + 1} groups in time: {' '.join(cmd)}")
    finally:
        process.kill()
        process.wait()
    return groups / (arrivals[-1] - arrivals[0])


def peak_rss_mb(cmd: list[str], env: dict[str, str]) -> float:
    """The highest resident set size of ``cmd`` (read from /proc every 50 ms) until it exits."""
    process = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    status, peak = Path(f"/proc/{process.pid}/status"), 0
    while process.poll() is None:
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
            peak = max(peak, int(fields["VmRSS"].split()[0]))
        except (OSError, KeyError, ValueError):
            pass
        time.sleep(0.05)
    if process.returncode != 0:
        sys.exit(
            f"benchmark command failed ({process.returncode}): {' '.join(cmd)}\n{process.stderr.read()[-2000:]}"
        )
    return peak / 1024


ENV_OVERRIDES = {
    "WANDB_MODE": "disabled",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
LABELS = {
    "bare": "atroposlib process (bare)",
    "vftui": "vftui run --no-ui",
    "tui": "vftui run (dashboard)",
    "serve": "atroposlib serve (bare)",
    "rl": "vftui run --mode rl",
}
IN_FLIGHT = 64  # the latency columns' --concurrency
ENV = DEFAULT_ENV  # every column collects the embedded default's environment (a v1 taskset)


def cpu_section(args, env: dict[str, str], kinds, tmp: Path) -> None:
    server = BackgroundSimServer(seed=0).start()
    rates: dict[str, list[float]] = {name: [] for name, _ in kinds}
    try:
        for i in range(args.repeats):
            for name, build in kinds:
                rates[name].append(
                    collect(
                        name,
                        build,
                        server,
                        env,
                        tmp / f"cpu-{name}-{i}.jsonl",
                        args.groups,
                        args.group_size,
                    )
                )
                print(f"  run {i + 1} {name:>5}: {rates[name][-1]:8.2f} groups/s", flush=True)
    finally:
        server.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(
        f"\n## no added latency: groups={args.groups} group_size={args.group_size} repeats={args.repeats}"
    )
    print(f"{'collector':<28}{'groups/s (median)':>18}{'ratio to bare':>15}")
    for name, rate in median.items():
        print(f"{LABELS[name]:<28}{rate:>18.2f}{rate / median['bare']:>15.3f}")
    print("target: headless >= 0.98 x bare, dashboard >= 0.95 x bare\n", flush=True)


def latency_section(args, env: dict[str, str], kinds, tmp: Path) -> None:
    rows = []
    for latency_s in (0.2,) if args.quick else (0.2, 1.0):
        server = BackgroundSimServer(seed=0, latency_s=latency_s).start()
        try:
            for turns in (1,) if args.quick else (1, 3):
                limit = IN_FLIGHT / latency_s / args.group_size / turns
                env_args = json.dumps({"max_turns": turns}) if turns > 1 else ""
                # as many groups as keep every request slot busy for ~20 s; bare goes one group at a time
                groups = (
                    args.groups
                    if args.quick
                    else max(2 * IN_FLIGHT // args.group_size, round(20 * limit))
                )
                row = {"latency": latency_s, "turns": turns, "limit": limit}
                for name, build in (
                    kinds[:2] if args.quick else kinds
                ):  # quick: the dashboard's column once (cpu)
                    options = {"env_args": env_args}
                    if name != "bare":
                        options["concurrency"] = IN_FLIGHT
                    count = (
                        min(groups, max(4, round(8 / (latency_s * turns))))
                        if name == "bare"
                        else groups
                    )
                    row[name] = collect(
                        name,
                        build,
                        server,
                        env,
                        tmp / f"lat-{latency_s}-{turns}-{name}.jsonl",
                        count,
                        args.group_size,
                        **options,
                    )
                    print(
                        f"  {latency_s:g} s x {turns} turns {name:>5}: {row[name]:8.2f} groups/s "
                        f"({row[name] / limit:.2f} x limit {limit:.2f})",
                        flush=True,
                    )
                rows.append(row)
        finally:
            server.stop()
    names = [name for name, _ in kinds if name in rows[0]]
    print(
        f"\n## with latency: --concurrency {IN_FLIGHT}, group_size={args.group_size}; groups/s (ratio to the limit)"
    )
    print(f"{'latency':>8}{'turns':>6}{'limit':>8}" + "".join(f"{LABELS[n]:>30}" for n in names))
    for row in rows:
        cells = "".join(f"{row[n]:>22.2f} ({row[n] / row['limit']:.2f}x)" for n in names)
        print(f"{row['latency']:>7g}s{row['turns']:>6}{row['limit']:>8.2f}{cells}")
    print("target: >= 0.85 x the limit at 1 s, single- and 3-turn\n", flush=True)


def rate_section(args, env: dict[str, str], tmp: Path) -> None:
    rate, latency_s, groups = 40.0, 0.5, args.groups if args.quick else 60
    server = BackgroundSimServer(seed=0, latency_s=latency_s, rate_limit=rate).start()
    try:
        out = tmp / "rate.jsonl"
        started = time.monotonic()
        stderr = run(
            vftui(server.base_url, out, groups, args.group_size, concurrency=IN_FLIGHT), env
        )
        seen = httpx.get(server.base_url.removesuffix("/v1") + "/sim/requests", timeout=10).json()
    finally:
        server.stop()
    answered = groups * args.group_size
    span = groups / groups_per_second(out) if out.exists() else time.monotonic() - started
    steps = stderr.count("the endpoint is rate-limiting")
    print(
        f"\n## rate-limited endpoint: at most {rate:g} requests/s, {latency_s:g} s each "
        f"(room for {rate * latency_s:g} in flight), --concurrency {IN_FLIGHT}, {groups} groups of {args.group_size}"
    )
    print(
        f"answered {answered / span:.1f} requests/s ({answered / span / rate:.2f} x the rate); "
        f"{seen['rate_limited']} rejected (429) for {answered} answered ({seen['rate_limited'] / answered:.1%}); "
        f"{steps} back-off steps, {seen['rate_limited'] / max(1, steps):.1f} rejections per step\n",
        flush=True,
    )


def memory_section(args, env: dict[str, str], tmp: Path) -> None:
    think_words, groups = (50, args.groups) if args.quick else (750, 48)
    server = BackgroundSimServer(seed=0, latency_s=1.0, think_words=think_words).start()
    peaks = {}
    try:
        for in_flight in (8, IN_FLIGHT):
            out = tmp / f"mem-{in_flight}.jsonl"
            peaks[in_flight] = peak_rss_mb(
                vftui(server.base_url, out, groups, args.group_size, concurrency=in_flight), env
            )
        tokens = [
            len(t) for line in out.read_text().splitlines() for t in json.loads(line)["tokens"]
        ]
    finally:
        server.stop()
    print(
        f"\n## memory: {groups} groups of {args.group_size}, rollouts of ~{statistics.mean(tokens):.0f} tokens, "
        "1 s latency"
    )
    print(
        f"peak RSS of vftui run --no-ui: {peaks[8]:.0f} MB at 8 requests in flight, {peaks[IN_FLIGHT]:.0f} MB at "
        f"{IN_FLIGHT}: {peaks[IN_FLIGHT] - peaks[8]:+.0f} MB (target < 50)\n",
        flush=True,
    )


def end_section(args, env: dict[str, str], tmp: Path) -> None:
    server = BackgroundSimServer(seed=0).start()
    out = tmp / "end.jsonl"
    try:
        started = time.monotonic()
        process = subprocess.Popen(
            vftui(server.base_url, out, args.end_groups, args.group_size),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, stderr = process.communicate()
        exited, took = time.time(), time.monotonic() - started
    finally:
        server.stop()
    if process.returncode != 0:
        sys.exit(f"benchmark command failed ({process.returncode}):\n{stderr[-2000:]}")
    after = exited - out.stat().st_mtime
    print(f"\n## end of a run: {args.end_groups:,} groups of {args.group_size}, no added latency")
    print(
        f"last group written to exit: {after:.2f} s (target <= 2 s); the run took {took:.0f} s, its page "
        f"{out.with_suffix('.html').stat().st_size / 1024**2:.0f} MB\n",
        flush=True,
    )


def rl_section(args, env: dict[str, str], tmp: Path) -> None:
    server = BackgroundSimServer(seed=0).start()
    rates: dict[str, list[float]] = {}
    try:
        for i in range(args.repeats):
            for name, build in (("serve", bare_serve), ("rl", vftui_rl)):
                api = ApiProcess(f"http://127.0.0.1:{free_port()}").start()
                try:
                    cmd = build(
                        server.base_url, api.api_url, args.group_size, tmp / f"{name}-{i}.jsonl"
                    )
                    rate = serve_rate(
                        cmd,
                        {**env, "VFTUI_WINDOW": "64"},
                        api.api_url,
                        args.rl_groups,
                        args.group_size,
                    )
                finally:
                    api.stop()
                rates.setdefault(name, []).append(rate)
                print(f"  run {i + 1} {name:>5}: {rate:8.2f} groups/s", flush=True)
    finally:
        server.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n## rl: {args.rl_groups} groups to a trainer, group_size={args.group_size}")
    for name, rate in median.items():
        print(f"{LABELS[name]:<28}{rate:>18.2f}{rate / median['serve']:>15.3f}")
    print("", flush=True)


V1_SHIM = (
    "from vftui.sim.envs.alphabet_sort import AlphabetSortEnv, AlphabetSortTaskset\n"
    "__all__ = ['AlphabetSortEnv', 'AlphabetSortTaskset']\n"
)


def verifiers_eval_rate(
    base_url: str, env: dict[str, str], tmp: Path, tasks: int, group_size: int, turns: int
) -> float:
    """Groups/s of verifiers' own v1 eval of the default taskset, from its traces' timings."""
    from verifiers.v1.trace import Trace

    site = tmp / "shim"
    site.mkdir(exist_ok=True)
    (site / "vftui_bench_sort.py").write_text(V1_SHIM)
    out = tmp / "vf-eval"
    cmd = eval_command(
        "vftui_bench_sort",
        base_url,
        MODEL,
        "VFTUI_BENCH_KEY",
        out,
        tasks,
        group_size,
        IN_FLIGHT,
        {"max_turns": turns},
    )
    path = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    run(cmd, pinned({**env, "PYTHONPATH": path, "VFTUI_BENCH_KEY": "x"}))
    traces = [Trace.model_validate(t) for episode in episodes(out) for t in episode["traces"]]
    assert all(t.ok for t in traces), [t.errors for t in traces if not t.ok][:1]
    start = min(t.timing.start for t in traces)
    end = max(t.timing.scoring.end or t.timing.start for t in traces)
    return tasks / (end - start)


def v1_section(args, env: dict[str, str], tmp: Path) -> None:
    turns = 3
    tasks, groups = (1, args.groups) if args.quick else (4, 100)
    env_args = json.dumps({"max_turns": turns})
    server = BackgroundSimServer(seed=0).start()
    try:
        ours = collect(
            "vftui",
            vftui,
            server,
            env,
            tmp / "v1-vftui.jsonl",
            groups,
            args.group_size,
            env_args=env_args,
            concurrency=IN_FLIGHT,
        )
        theirs = verifiers_eval_rate(server.base_url, env, tmp, tasks, args.group_size, turns)
    finally:
        server.stop()
    server = BackgroundSimServer(seed=0, latency_s=1.0).start()
    limit = IN_FLIGHT / 1.0 / args.group_size / turns
    try:
        slow = collect(
            "vftui",
            vftui,
            server,
            env,
            tmp / "v1-slow.jsonl",
            args.groups if args.quick else round(20 * limit),
            args.group_size,
            env_args=env_args,
            concurrency=IN_FLIGHT,
        )
    finally:
        server.stop()
    print(f"\n## v1 taskset ({DEFAULT_ENV}, {turns} turns, group_size={args.group_size})")
    print(
        f"vftui run --no-ui {ours:>12.2f} groups/s; verifiers' own v1 eval {theirs:.3f} groups/s: "
        f"{ours / theirs:.0f} x (target >= 10 x)"
    )
    print(
        f"at 1 s a request, --concurrency {IN_FLIGHT}: {slow:.2f} groups/s = {slow / limit:.2f} x the limit "
        f"{limit:.2f} (target >= 0.85)\n",
        flush=True,
    )


CLASSIC_SHIM = "from vftui.sim.envs.alphabet_sort_classic import load_environment  # noqa: F401\n"
CLASSIC_ENV = "vftui/alphabet-sort-classic"


def vftui_eval(base_url: str, out: Path, examples: int, k: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vftui",
        "run",
        "--mode",
        "eval",
        "--no-ui",
        "--env",
        CLASSIC_ENV,
        "--env-args",
        json.dumps({"num_eval_examples": examples}),
        "--num-examples",
        str(examples),
        "--rollouts-per-example",
        str(k),
        "--temperature",
        "1.0",
        "--base-url",
        base_url,
        "--concurrency",
        str(IN_FLIGHT),
        "--out",
        str(out),
    ]


def vf_eval_rate(base_url: str, env: dict[str, str], tmp: Path, examples: int, k: int) -> float:
    """Examples/s of vf-eval over the same classic environment, from its rows' own timings (start-up excluded)."""
    site = tmp / "classic-shim"
    site.mkdir(exist_ok=True)
    (site / "alphabet_sort_classic.py").write_text(CLASSIC_SHIM)
    cmd = [
        str(Path(sys.executable).parent / "vf-eval"),
        "alphabet_sort_classic",
        "-m",
        MODEL,
        "-b",
        base_url,
        "-k",
        "VFTUI_BENCH_KEY",
        "-a",
        json.dumps({"num_eval_examples": examples}),
        "-n",
        str(examples),
        "-r",
        str(k),
        "--temperature",
        "1.0",
        "--max-concurrent",
        str(IN_FLIGHT),
        "--save-results",
        "--output-dir",
        str(tmp / "vf-eval-out"),
        "--disable-tui",
        "--disable-env-server",
    ]
    run(
        cmd,
        {
            **env,
            "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]),
            "VFTUI_BENCH_KEY": "x",
        },
    )
    (results,) = (tmp / "vf-eval-out").glob("evals/*/*/results.jsonl")
    timings = [
        json.loads(line)["timing"] for line in results.read_text().splitlines() if line.strip()
    ]
    shutil.rmtree(tmp / "vf-eval-out")
    start = min(t["start_time"] for t in timings)
    end = max(t["scoring"]["end"] for t in timings)
    return examples / (end - start)


def eval_section(args, env: dict[str, str], tmp: Path) -> None:
    k = args.group_size
    examples = args.groups if args.quick else 200
    server = BackgroundSimServer(seed=0).start()
    try:
        ours = collect(
            "vftui",
            lambda url, out, n, size: vftui_eval(url, out, n, size),
            server,
            env,
            tmp / "eval.jsonl",
            examples,
            k,
        )
        theirs = vf_eval_rate(server.base_url, env, tmp, examples, k)
    finally:
        server.stop()
    limit = IN_FLIGHT / 1.0 / k
    server = BackgroundSimServer(seed=0, latency_s=1.0).start()
    try:
        slow = collect(
            "vftui",
            lambda url, out, n, size: vftui_eval(url, out, n, size),
            server,
            env,
            tmp / "eval-slow.jsonl",
            args.groups if args.quick else round(20 * limit),
            k,
        )
    finally:
        server.stop()
    print(f"\n## eval ({CLASSIC_ENV}, {k} rollouts an example, --concurrency {IN_FLIGHT} for both)")
    print(
        f"vftui run --mode eval {ours:>8.2f} examples/s; vf-eval {theirs:.2f} examples/s: {ours / theirs:.2f} x "
        "(target >= 1.5 x)"
    )
    print(
        f"at 1 s a request: {slow:.2f} examples/s = {slow / limit:.2f} x the limit {limit:.2f} (target >= 0.85)\n",
        flush=True,
    )


SECTIONS = ("cpu", "latency", "rate", "memory", "v1", "eval", "end", "rl")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}"
    )
    parser.add_argument("--groups", type=int, default=200, help="groups per run in the cpu section")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per collector in the cpu and rl sections"
    )
    parser.add_argument("--rl-groups", type=int, default=40, help="groups per rl run")
    parser.add_argument(
        "--end-groups", type=int, default=10_000, help="groups of the run in the end section"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and one repeat, so that a renamed module "
        "breaks CI instead of the README's figures: checks that each section runs, not its figures",
    )
    args = parser.parse_args()
    print(described(), flush=True)
    if args.quick:
        args.groups, args.group_size, args.repeats, args.rl_groups, args.end_groups = 4, 2, 1, 2, 4
    sections = [name.strip() for name in args.sections.split(",") if name.strip()]
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    env = {**os.environ, **ENV_OVERRIDES}
    kinds = [("bare", bare), ("vftui", vftui)]
    if shutil.which("tmux"):
        kinds.append(("tui", tui))
    else:
        print("tmux is not installed: no dashboard column", file=sys.stderr)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        run_section = {
            "cpu": lambda: cpu_section(args, env, kinds, tmp),
            "latency": lambda: latency_section(args, env, kinds, tmp),
            "rate": lambda: rate_section(args, env, tmp),
            "memory": lambda: memory_section(args, env, tmp),
            "v1": lambda: v1_section(args, env, tmp),
            "eval": lambda: eval_section(args, env, tmp),
            "end": lambda: end_section(args, env, tmp),
            "rl": lambda: rl_section(args, env, tmp),
        }
        for name in sections:
            run_section[name]()


if __name__ == "__main__":
    main()
