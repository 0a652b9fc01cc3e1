"""``vftui export``'s arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

from vftui.figures.group_filter import FILTER_HELP
from vftui.run_files.export_formats import FORMATS


def _path(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path names nothing")
    return Path(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="collected rollouts to a training set: filtered, best-of, deduplicated, in a trainer's format",
        description="Read any source compare reads (vftui runs and evals, shards, dumps, verifiers v1 eval "
        "folders, prime-rl rollouts, vf-eval results) and write the rollouts kept as prime-rl's SFT parquet, "
        "TRL's messages (jsonl or parquet) or Atropos's ScoredDataGroup jsonl. Rollouts whose reward is not "
        "a number are never exported. Written whole or not at all.",
    )
    p.add_argument("sources", nargs="+", type=_path, metavar="SOURCE", help="what to export from")
    p.add_argument(
        "-o",
        "--out",
        type=_path,
        required=True,
        metavar="OUT",
        help="the dataset to write (.parquet or .jsonl)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="messages",
        help="prime-rl: parquet of messages and tools (prime-rl's SFT trainer); messages: TRL's conversational "
        "rows (jsonl, or parquet for a .parquet OUT); atropos: ScoredDataGroup jsonl, tokens and masks as "
        "collected (default messages)",
    )
    p.add_argument(
        "--where",
        metavar="FILTER",
        help=f"keep the groups this filter shows, as the dashboard's / ({FILTER_HELP})",
    )
    p.add_argument(
        "--min-reward", type=float, metavar="R", help="keep rollouts whose reward is at least R"
    )
    p.add_argument(
        "--drop-truncated", action="store_true", help="leave out rollouts cut at the length limit"
    )
    p.add_argument(
        "--best-of",
        type=int,
        metavar="N",
        help="keep each group's N best rollouts (ties: the earlier rollout)",
    )
    p.add_argument(
        "--dedupe", action="store_true", help="keep an identical completion of one prompt once"
    )
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--json", action="store_true", help="print what was kept and left out as JSON")


def run(args: argparse.Namespace) -> int:
    from vftui.commands.export import run_export, selection

    chosen = selection(args.where, args.min_reward, args.drop_truncated, args.best_of, args.dedupe)
    return run_export(args.sources, args.out, args.format, chosen, args.force, args.json)
