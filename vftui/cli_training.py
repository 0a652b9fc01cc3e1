"""The training commands' arguments: ``status``, ``tokens``, ``sim-prime-run`` and ``watch RUN_DIR``'s flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from vftui.errors import UserError
from vftui.training.picks import PICKS

RUN_DIR_HELP = (
    "a prime-rl run folder ({output_dir}/{run_name}), or its output folder: the newest run in it"
)
INFERENCE_HELP = (
    "an inference server to read Prometheus /metrics from (vLLM, SGLang): one line per engine; "
    "repeat for several (e.g. http://localhost:8100, the engine port, not the router's)"
)
NOTIFY_HELP = (
    "when the health changes, run this shell command (VFTUI_HEALTH, VFTUI_PREVIOUS_HEALTH, VFTUI_RUN, "
    "VFTUI_STEP and VFTUI_ALERTS in its environment), or POST the check-in as JSON to this http(s) URL"
)


def _path(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path names nothing")
    return Path(text)


def add_watch_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_dir",
        nargs="?",
        type=_path,
        metavar="RUN_DIR",
        help=RUN_DIR_HELP + " (else: --api-url's API)",
    )
    p.add_argument(
        "--inference-metrics", action="append", default=[], metavar="URL", help=INFERENCE_HELP
    )
    p.add_argument("--notify", metavar="CMD|URL", help=NOTIFY_HELP)
    p.add_argument(
        "--with",
        dest="with_runs",
        action="append",
        default=[],
        type=_path,
        metavar="RUN_DIR",
        help="another prime-rl run whose curves the charts (g) overlay by step; repeat for several",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="one check-in of a prime-rl run: step, health and why, progress, stability, performance",
        description="Read a prime-rl run's metrics.jsonl, logs and token exports once and print the check-in "
        "its runbook asks for (the STATUS.md entry). Exit 0 healthy, 3 degraded or down, 2 bad input.",
    )
    p.add_argument("run_dir", type=_path, metavar="RUN_DIR", help=RUN_DIR_HELP)
    p.add_argument("--json", action="store_true", help="print the check-in as JSON")
    p.add_argument(
        "--append",
        type=_path,
        metavar="FILE",
        help="append the entry to FILE (STATUS.md); never rewrites it",
    )
    p.add_argument(
        "--inference-metrics", action="append", default=[], metavar="URL", help=INFERENCE_HELP
    )
    p.add_argument("--notify", metavar="CMD|URL", help=NOTIFY_HELP + " (against the last check-in)")

    p = sub.add_parser(
        "tokens",
        help="a prime-rl step's exported tokens: sampler/trainer mismatch, worst tokens first",
        description="Read one step of a prime-rl run's token exports (trainer.enable_token_export): the "
        "step's tails (p99 and max mismatch_kl, masked share, ratio quantiles) and its worst trained tokens "
        "by the column picked, each with its position, text and values.",
    )
    p.add_argument(
        "run_dir",
        type=_path,
        metavar="RUN",
        help=RUN_DIR_HELP
        + "; or a vftui rl run (its folder or groups .jsonl): its sampler logprobs",
    )
    p.add_argument("--step", type=int, help="the prime-rl step (default: the newest whole one)")
    p.add_argument(
        "--by",
        choices=tuple(PICKS),
        help="what ranks and colors the tokens (default mismatch_kl; sampler_logprob for a vftui rl run)",
    )
    p.add_argument(
        "--worst", type=int, default=20, metavar="N", help="how many worst tokens (default 20)"
    )
    p.add_argument(
        "--sequence",
        metavar="RANK:SEQ",
        help="also show this sequence (GROUP:ROLLOUT of a vftui rl run), each token colored by --by",
    )
    p.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="tokenizer folder, .gguf or cached hub name (default: the model the run's configs name)",
    )
    p.add_argument("--json", action="store_true", help="print the figures and worst tokens as JSON")

    p = sub.add_parser(
        "sim-prime-run",
        help="write a simulated prime-rl run folder, step by step, in prime-rl's formats (trouble on request)",
        description="Write a run folder as prime-rl lays one out (configs, metrics.jsonl, loguru logs, token "
        "exports) with made-up figures, to try watch, status and tokens without a GPU. Labelled SIMULATION.",
    )
    p.add_argument(
        "out", type=_path, metavar="RUN_DIR", help="the run folder to write (made if missing)"
    )
    p.add_argument("--steps", type=int, default=40, help="steps to write (default 40)")
    p.add_argument(
        "--every",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait between steps (default 0: all at once)",
    )
    p.add_argument(
        "--ago",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --every 0: the last step was logged this long ago (a stalled run)",
    )
    p.add_argument(
        "--trouble",
        default="",
        metavar="NAMES",
        help="comma-separated trouble to plant: " + ", ".join(_troubles()),
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the made-up figures (default 0)")


def _troubles() -> tuple[str, ...]:
    from vftui.sim.prime_run import TROUBLES

    return tuple(TROUBLES)


def status(args: argparse.Namespace) -> int:
    from vftui.commands.status import run_status

    return run_status(args.run_dir, args.json, args.append, args.notify, args.inference_metrics)


def tokens(args: argparse.Namespace) -> int:
    from vftui.commands.tokens import run_tokens

    return run_tokens(
        args.run_dir, args.step, args.by, args.worst, args.sequence, args.tokenizer, args.json
    )


def sim_prime_run(args: argparse.Namespace) -> int:
    from vftui.sim.prime_run import TROUBLES, SimRun, write

    troubles = frozenset(t.strip() for t in args.trouble.split(",") if t.strip())
    if unknown := sorted(troubles - set(TROUBLES)):
        raise UserError(f"--trouble {', '.join(unknown)}: not one of {', '.join(TROUBLES)}")
    if not 1 <= args.steps <= 100_000:
        raise UserError("--steps takes 1 to 100000")
    if not (0 <= args.every <= 3600 and 0 <= args.ago <= 10**7):
        raise UserError("--every takes 0 to 3600 seconds and --ago 0 to 10^7")
    if args.out.exists() and any(args.out.iterdir()):
        raise UserError(f"{args.out} is not empty: name a new folder")
    sim = SimRun(
        args.out.resolve(),
        args.steps,
        args.every,
        ago_s=args.ago,
        troubles=troubles,
        seed=args.seed,
    )
    write(sim, say=lambda line: print(line, flush=True))
    return 0
