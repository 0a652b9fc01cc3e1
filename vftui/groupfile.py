"""Saved groups files (a run's jsonl, a dump, Atropos process output) as events.

``vftui view`` replays a file through the same dashboard a live run uses. Lines without
vftui's own ``vftui`` object (plain Atropos output) still show: turns are counted from
the messages and the temperature from ``generation_params`` when present.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from vftui import store
from vftui.events import Event, GroupCollected, LogRecord, RunStarted, RunState, RunSummary

META = "vftui"
# With many groups in flight a file is in the order groups finished; a view can reorder it.
ORDERS = {
    "file": None,
    "item": lambda g: g.item,
    "time": lambda g: g.started_at,
}


def group_event(index: int, group: dict[str, Any]) -> GroupCollected:
    meta = group.get(META) or {}
    if not isinstance(meta, dict):
        raise ValueError(f"its '{META}' is not an object")
    messages = group.get("messages") or [[] for _ in group["tokens"]]
    turns = meta.get("turns") or [sum(1 for m in msgs if m.get("role") == "assistant") for msgs in messages]
    params = group.get("generation_params") or {}
    return GroupCollected(
        index=index,
        item=int(meta.get("item", index - 1)),
        example_id=meta.get("example_id"),
        scores=[float(s) for s in group["scores"]],
        metrics=meta.get("metrics", {}),
        turns=turns,
        tokens=group["tokens"],
        masks=group["masks"],
        messages=messages,
        finish_reasons=meta.get("finish_reasons") or [None] * len(group["tokens"]),
        temperature=float(params.get("temperature", meta.get("temperature", float("nan")))),
        started_at=meta.get("started_at", 0.0),
        elapsed_s=meta.get("elapsed_s", 0.0),
        logprobs=group.get("inference_logprobs"),
    )


def run_description(path: Path) -> dict[str, Any]:
    """The ``.run.json`` beside a run's jsonl, when there is one."""
    sidecar = path.with_suffix(".run.json")
    try:
        return json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return {}


def replay(path: Path, tokenizer: str, order: str = "file") -> tuple[list[Event], int]:
    """Every event the file stands for, groups in ``order`` (see ORDERS), and how many lines were skipped."""
    description = run_description(path)
    groups, problems, first_meta = [], [], {}
    for entry in store.read_groups(path):
        if isinstance(entry, store.BadLine):
            problems.append(LogRecord("WARNING", "view", f"{path.name} line {entry.number} skipped: {entry.reason}"))
        else:
            number, raw = entry
            try:
                groups.append(group_event(len(groups) + 1, raw))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                problems.append(LogRecord("WARNING", "view", f"{path.name} line {number} skipped: bad group ({e})"))
                continue
            first_meta = first_meta or raw.get(META) or {}
    if (key := ORDERS[order]) is not None:
        groups = [dataclasses.replace(g, index=n) for n, g in enumerate(sorted(groups, key=key), 1)]
    config = description.get("config", {})
    names: list[str] = []
    for g in groups:
        names.extend(n for n in g.metrics if n not in names)
    started = RunStarted(
        mode="view",
        env=config.get("env", first_meta.get("env", "?")),
        model=description.get("model", first_meta.get("model", "?")),
        endpoint=str(path),
        simulated=bool(first_meta.get("simulated")) or description.get("endpoint") == "simulated",
        out_path=str(path),
        groups_total=len(groups),
        groups_done=0,
        group_size=len(groups[0].scores) if groups else 0,
        temperature=groups[-1].temperature if groups else 0.0,
        reward_functions=[n for n in names if n != "num_turns"],
        tokenizer=tokenizer or description.get("tokenizer", ""),
    )
    span = (max(g.started_at + g.elapsed_s for g in groups) - min(g.started_at for g in groups)) if groups else 0.0
    summary = RunSummary(RunState.FINISHED, len(groups), len(groups), str(path), round(max(0.0, span), 3), {},
                         f"{len(problems)} malformed lines skipped" if problems else "")
    return [started, *problems, *groups, summary], len(problems)
