"""``vftui sim-prime-run OUT``: a prime-rl run folder written step by step, in prime-rl's own formats,
with trouble planted on request. No GPU and no prime-rl: its figures are made up (SIMULATION in the
run's name), its file formats are prime-rl's (see ``vftui.training``). What ``vftui watch``,
``status`` and ``tokens`` are tried on, in tests, the bench and a demo.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vftui import safe_files
from vftui.sim import TOKENIZER_DIR
from vftui.training import token_exports
from vftui.training.layout import CONFIGS, METRICS, TOKEN_EXPORTS
from vftui.training.metrics_file import append_row

TROUBLES = {
    "entropy_collapse": "entropy falls to a tenth of its start over the second half",
    "mismatch_spike": "two steps before the end, a few tokens whose sampler and trainer disagree wildly",
    "grad_spike": "two steps before the end, a grad norm 20 times its usual",
    "reward_flat": "a reward that never moves",
    "log_error": "an ERROR line in trainer.log two steps before the end",
    "trainer_waits": "a trainer that waits on rollouts most of its step",
}
TEXT = "Reverse the text: the quick brown fox jumps over the lazy dog. god yzal eht revo spmuj xof nworb kciuq eht"
GREEN, YELLOW, RED, RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


@dataclass(frozen=True)
class SimRun:
    out: Path
    steps: int = 40
    every_s: float = 0.0  # wall time between written steps
    step_s: float = 10.0  # the steps' own clock (their "time" field), when every_s is 0
    ago_s: float = 0.0  # with every_s 0: the last step was logged this long ago (a stalled run)
    troubles: frozenset[str] = frozenset()
    spike_step: int | None = None  # default: three quarters through
    ranks: int = 2
    sequences: int = 4  # per rank and step
    seed: int = 0


def write(sim: SimRun, say: Callable[[str], None] = lambda _: None) -> Path:
    """Write the run (the run folder is returned); with ``every_s``, a step at a time."""
    rng = random.Random(sim.seed)
    run = sim.out
    (run / CONFIGS).mkdir(parents=True, exist_ok=True)
    _config(run, sim)
    logs = _attempt(run)
    tokens = _tokens()
    spike = sim.spike_step if sim.spike_step is not None else max(1, sim.steps - 2)
    start = time.time() - (0 if sim.every_s else sim.ago_s + sim.steps * sim.step_s)
    _log(
        logs / "orchestrator.log",
        start,
        "INFO",
        "Starting orchestrator (SIMULATION: vftui sim-prime-run)",
    )
    for step in range(1, sim.steps + 1):
        when = time.time() if sim.every_s else start + step * sim.step_s
        _step(run, logs, sim, step, spike, when, rng, tokens)
        say(f"step {step}/{sim.steps} written")
        if sim.every_s and step < sim.steps:
            time.sleep(sim.every_s)
    return run


def _config(run: Path, sim: SimRun) -> None:
    config = {
        "max_steps": sim.steps + (100 if sim.ago_s else 0),  # --ago: stalled before its end
        "model": {"name": str(TOKENIZER_DIR)},
        "trainer": {
            "enable_token_export": True,
            "loss": {"type": "default", "dppo_mask_low": 0.2, "dppo_mask_high": 0.2},
        },
        "orchestrator": {"train": {"sampling": {"temperature": 1.0}}},
        "output_dir": str(run.parent),
    }
    safe_files.replace(run / CONFIGS / "rl.json", json.dumps(config, indent=2).encode())


def _attempt(run: Path) -> Path:
    logs = run / "logs"
    logs.mkdir(exist_ok=True)
    n = 1 + max(
        (int(p.name[8:]) for p in logs.glob("attempt_*") if p.name[8:].isdigit()), default=0
    )
    attempt = logs / f"attempt_{n}"
    attempt.mkdir()
    tmp = logs / f".{attempt.name}"
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(attempt.name, tmp)
    os.replace(tmp, logs / "latest")
    return attempt


def _log(path: Path, when: float, level: str, message: str) -> None:
    color = {"WARNING": YELLOW, "ERROR": RED, "SUCCESS": GREEN}.get(level, "")
    stamp = time.strftime("%H:%M:%S", time.localtime(when))
    line = f"\x1b[2m{stamp}\x1b[0m {color}{level: >7}{RESET} {message}\n"
    fd = safe_files.open_append(path)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _tokens() -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json")).encode(TEXT).ids


def _step(
    run: Path,
    logs: Path,
    sim: SimRun,
    step: int,
    spike: int,
    when: float,
    rng: random.Random,
    tokens: list[int],
) -> None:
    t = step / sim.steps
    collapse = "entropy_collapse" in sim.troubles and t > 0.5
    entropy_level = 1.2 * (0.1 + 0.9 * (1 - (t - 0.5) * 2) if collapse else 1.0)
    spiking = step == spike and "mismatch_spike" in sim.troubles
    kls, entropies, masked, trained = [], [], 0, 0
    step_dir = run / TOKEN_EXPORTS / f"step_{step}"
    for rank in range(sim.ranks):
        for index in range(sim.sequences):
            n = len(tokens)
            prompt = n // 3
            mask = [i >= prompt for i in range(n)]
            advantage = rng.choice((-1.0, 1.0)) * rng.uniform(0.1, 1.0)
            inference = [-abs(rng.gauss(0.8, 0.6)) for _ in range(n)]
            trainer = [min(0.0, lp + rng.gauss(0, 0.02)) for lp in inference]
            if spiking and rank == 0 and index == 0:
                for i in (prompt + 3, prompt + 7):
                    inference[i], trainer[i] = (
                        -6.0,
                        -0.05,
                    )  # the sampler drew a token the trainer finds likely
            entropy = [max(0.0, rng.gauss(entropy_level, 0.2)) for _ in range(n)]
            token_exports.write_sequence(
                step_dir,
                rank,
                index,
                "reverse-text",
                tokens,
                mask,
                [advantage] * n,
                inference,
                trainer,
                entropy,
            )
            for i in range(prompt, n):
                log_ratio = trainer[i] - inference[i]
                kls.append(math.exp(log_ratio) - log_ratio - 1)
                entropies.append(entropy[i])
                delta = math.exp(trainer[i]) - math.exp(inference[i])
                masked += (advantage > 0 and delta > 0.2) or (advantage < 0 and delta < -0.2)
                trained += 1
    token_exports.mark_stable(step_dir)
    reward = 0.5 if "reward_flat" in sim.troubles else min(1.0, 0.2 + 0.6 * t + rng.gauss(0, 0.03))
    waits = "trainer_waits" in sim.troubles
    trainer_step = 8.0 + rng.gauss(0, 0.3)
    grad = 0.4 + rng.gauss(0, 0.03)
    if step == spike and "grad_spike" in sim.troubles:
        grad *= 20
    metrics = run / METRICS
    append_row(
        metrics,
        step,
        {
            "train/agg/all/agent/reward/mean": reward - 0.02,
            "train/agg/effective/agent/reward/mean": reward,
            "train/agg/effective/num_total_tokens/mean": 120 + 40 * t + rng.gauss(0, 3),
            "train/agg/effective/agent/is_truncated/mean": 0.02,
            "train/agg/all/agent/has_error/mean": 0.0,
            "progress/tasks": 32.0,
            "progress/rollouts": 256.0,
            "time/step": trainer_step * (1.05 if waits else 0.95),
            "time/wait_for_policy": 0.2 if waits else 0.6 * trainer_step,
            "off_policy/mean": 1.0,
            "off_policy/max": 2.0,
            "off_policy/dropped": 0.0,
        },
        when,
    )
    for row in _trainer_rows(step, trainer_step, waits, grad, kls, entropies, masked, trained):
        append_row(metrics, step, row, when)
    _log(
        logs / "trainer.log",
        when,
        "SUCCESS",
        f"Step {step} | {trainer_step:.2f}s | Entropy {sum(entropies) / len(entropies):.4f}",
    )
    if step == spike and "log_error" in sim.troubles:
        _log(
            logs / "trainer.log",
            when,
            "ERROR",
            "NaN loss at micro step 3 (SIMULATION: planted by --trouble log_error)",
        )


def _trainer_rows(
    step: int,
    step_s: float,
    waits: bool,
    grad: float,
    kls: list[float],
    entropies: list[float],
    masked: int,
    trained: int,
) -> Iterable[dict[str, float]]:
    mean_kl, mean_entropy = sum(kls) / len(kls), sum(entropies) / len(entropies)
    yield {"perf/throughput": 2.4e4, "perf/mfu": 31.0, "perf/peak_memory": 60.0, "step": step}
    yield {"optim/lr": 3e-6, "optim/grad_norm": grad, "step": step}
    yield {
        "loss/mean": 0.01,
        "entropy/all/mean": mean_entropy,
        "entropy/all/max": max(entropies),
        "mismatch_kl/all/mean": mean_kl,
        "mismatch_kl/all/max": max(kls),
        "masked_advantage_positive/mean": masked / max(1, trained),
        "masked_advantage_negative/mean": 0.0,
        "kl_ent_ratio/mean": mean_kl / mean_entropy if mean_entropy > 0 else 0.0,
        "step": step,
    }
    yield {
        "time/step": step_s,
        "time/wait_for_batch": (0.7 if waits else 0.05) * step_s,
        "time/forward_backward": 0.8 * step_s,
        "time/broadcast_weights": 0.3,
        "time/save_ckpt": 0.0,
        "time/load_data": 0.01,
        "step": step,
    }
