"""An eval's results as verifiers' eval writes them (``results.jsonl`` + ``metadata.json``; and v1's
``traces.jsonl`` + ``configs/resolved/eval.json``, ``run_files.v1_traces``), as
atroposlib's ``evaluate_log`` does, and per example (``items.jsonl``: its rewards, mean, min, max,
spread, hardest first), in the folder beside the run's jsonl (``RunFiles.eval_dir``); an rl run's evals
(``--eval-every``) each in a folder of its own in it (``RunFiles.eval_at_step``), from their rollouts.

Both are made from the run's own jsonl, so a resumed eval's files cover all of it; each file is
replaced in one rename, so a crash leaves the old one or the new one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from vftui import safe_files
from vftui.collector.modes import EvalLog
from vftui.collector.versions import made_by
from vftui.events import EvalReport
from vftui.figures.eval_stats import ItemResult, k_values, pass_all_k
from vftui.run_files import store, v1_traces, vf_eval
from vftui.run_files.files import RunFiles, atropos_in
from vftui.text.json_lines import finite_json

ITEMS = "items.jsonl"


async def write(
    log: EvalLog,
    report: EvalReport,
    errors: dict[int, str],
    run: dict[str, Any],
    model: str,
    span: tuple[float, float],
    run_files: RunFiles,
) -> None:
    """Every file of the eval in its ``eval_dir``, from one reading of the run's jsonl; ``errors`` the examples
    that failed to score (item: why), ``run`` what it was asked."""
    folder = safe_files.own_folder(run_files.eval_dir)
    groups = list(
        store.JsonObjects(run_files.jsonl)
    )  # a torn last line: the resumed run repairs it
    await write_groups(log, report, errors, run, model, span, groups, folder)


async def write_groups(
    log: EvalLog,
    report: EvalReport,
    errors: dict[int, str],
    run: dict[str, Any],
    model: str,
    span: tuple[float, float],
    groups: list[dict[str, Any]],
    folder: Path,
    temperature: float | None = None,
) -> None:
    """Every file of the eval of ``groups`` (in the groups form) in ``folder``: an eval run's ``eval_dir``, or one
    of an rl run's evals (``during_rl``, its ``temperature`` the eval's, not the run's)."""
    rows = [
        row for group in groups for row in vf_eval.rows_of(group)
    ]  # verifiers' results.jsonl, a rollout each
    by_item: dict[Any, list[float]] = {}
    for row in rows:
        by_item.setdefault(row["example_id"], []).append(row["reward"])
    vf_eval.write(folder, rows, metadata(rows, by_item, report, errors, run))
    items = per_item(by_item, report.threshold)
    store.write_text_atomic(folder / ITEMS, "".join(json.dumps(item) + "\n" for item in items))
    v1_traces.write(
        groups,
        run,
        report.rollouts_per_item,
        folder,
        f"vftui {made_by()['vftui']}",
    )
    await write_atropos(log, report, rows, model, span, atropos_in(folder), temperature)


def per_item(by_item: dict[Any, list[float]], threshold: float) -> list[dict[str, Any]]:
    """Each example's k rewards and what they say: mean, min, max, std, how many passed; hardest first."""
    items = [ItemResult(0, tuple(rewards)) for rewards in by_item.values()]
    out = [
        {
            "example_id": key,
            "rewards": list(i.rewards),
            "mean": i.mean,
            "min": i.low,
            "max": i.high,
            "std": i.std,
            "passed": i.passed(threshold),
        }
        for key, i in zip(by_item, items, strict=True)
    ]
    return sorted(out, key=lambda item: (item["mean"], -item["std"]))


def metadata(
    rows: list[dict[str, Any]],
    by_item: dict[Any, list[float]],
    report: EvalReport,
    errors: dict[int, str],
    run: dict[str, Any],
) -> dict[str, Any]:
    """vf-eval's metadata (its ``pass_at_k`` keyed by k, for its viewers) and ours: ``pass@k`` with intervals, and
    the examples that failed to score (``errors``; ``avg_error`` their share of the examples done)."""
    k = report.rollouts_per_item
    full = [rewards for rewards in by_item.values() if len(rewards) == k]
    figures = report.figures
    done = report.items + len(errors)
    return {
        **run,
        "num_examples": report.items,
        "complete": report.items
        >= report.items_total,  # every example scored: not after a stop, nor with errors
        "rollouts_per_example": k,
        "shuffle": False,  # the eval split's first examples, in order
        "shuffle_seed": None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "avg_reward": figures["reward"]["mean"],
        "avg_metrics": {name: f["mean"] for name, f in report.functions.items()},
        "avg_error": len(errors) / done if done else 0.0,
        "errors": [{"item": item, "error": why} for item, why in sorted(errors.items())],
        "pass_at_k": {str(n): figures[f"pass@{n}"]["mean"] for n in k_values(k)} if k > 1 else {},
        "pass_all_k": {
            str(n): _mean(
                [pass_all_k(k, sum(r >= report.threshold for r in rewards), n) for rewards in full]
            )
            for n in k_values(k)
        }
        if k > 1
        else {},
        "pass_threshold": report.threshold,
        "usage": None,
        "version_info": made_by(),
        "state_columns": [],
        "tools": next((row["tool_defs"] for row in rows if row["tool_defs"]), None),
        **{name: figure["mean"] for name, figure in figures.items()},
        "intervals": {
            name: [f["ci_low"], f["ci_high"]] for name, f in {**figures, **report.functions}.items()
        },
    }


async def write_atropos(
    log: EvalLog,
    report: EvalReport,
    rows: list[dict[str, Any]],
    model: str,
    span: tuple[float, float],
    folder: Path,
    temperature: float | None = None,
) -> None:
    """atroposlib's own eval files (``metrics.json``, ``samples.jsonl``) in ``folder``, through its
    ``evaluate_log``."""
    metrics = {
        f"eval/{'avg_score' if name == 'reward' else name}": f["mean"]
        for name, f in report.figures.items()
    }
    metrics.update({f"eval/{name}": f["mean"] for name, f in report.functions.items()})
    samples = [
        {
            key: row[key]
            for key in (
                "example_id",
                "info",
                "prompt",
                "completion",
                "reward",
                "metrics",
                "is_truncated",
                "stop_condition",
            )
        }
        | {"score": row["reward"]}
        for row in rows
    ]
    await log.log_eval(
        safe_files.own_folder(folder), finite_json(metrics), samples, model, span, temperature
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
