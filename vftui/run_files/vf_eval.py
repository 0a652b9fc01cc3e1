"""vf-eval's eval files, read and written: ``results.jsonl`` (a rollout a row) and ``metadata.json``.

verifiers' ``vf-eval`` writes them, and so does a vftui eval (beside its own ``items.jsonl``), so its tools
and viewers open ours; the readers here turn either back into vftui's groups form. A row's reward that is
no finite number is an error, never a zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from vftui import bounds
from vftui.errors import UserError
from vftui.group_format import META
from vftui.run_files import records, store
from vftui.run_files.records import EvalMetadata
from vftui.text.json_lines import finite_json

RESULTS, METADATA = "results.jsonl", "metadata.json"


def rows_of(group: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A group (vftui's form) as vf-eval's rows, one a rollout."""
    meta = group.get(META) or {}
    metrics = meta.get("metrics") or {}
    reasons = meta.get("finish_reasons") or [None] * len(group["scores"])
    for r, (score, messages) in enumerate(
        zip(group["scores"], group.get("messages") or [], strict=False)
    ):
        split = next(
            (i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages)
        )
        values = {name: v[r] for name, v in metrics.items() if r < len(v)}
        yield {
            "example_id": meta.get("example_id", meta.get("item")),
            "prompt": messages[:split],
            "completion": messages[split:],
            "info": {"item": meta.get("item")},
            "reward": score,
            "error": None,
            "timing": {"generation_ms": 1000 * meta.get("elapsed_s", 0.0)},
            "is_completed": True,
            "is_truncated": reasons[r] == "length",
            "stop_condition": reasons[r],
            "metrics": values,
            "tool_defs": group.get("tools"),
            **values,  # verifiers flattens them too
        }


def write(folder: Path, rows: list[dict[str, Any]], metadata: dict[str, Any]) -> None:
    """Both files in ``folder``, each replaced in one rename."""
    store.write_text_atomic(
        folder / RESULTS, "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows)
    )
    store.write_json_atomic(folder / METADATA, finite_json(metadata))


def read_metadata(folder: Path) -> EvalMetadata:
    """vf-eval's metadata in ``folder``, if it is there."""
    try:
        return records.read(folder / METADATA, EvalMetadata) or EvalMetadata()
    except records.Damaged as e:
        raise UserError(str(e)) from e


def group(n: int, rows: list[dict[str, Any]], metadata: EvalMetadata) -> dict[str, Any]:
    """One example's rows as the ``n``-th group."""
    sampling = metadata.sampling_args
    messages = [row_messages(r.get("prompt")) + row_messages(r.get("completion")) for r in rows]
    names = [k for k, v in row_metrics(rows[0]).items() if bounds.score(v) is not None]
    return {
        "scores": [bounds.score(r["reward"]) for r in rows],
        "tokens": [[] for _ in rows],
        "masks": [[] for _ in rows],
        "messages": messages,
        "generation_params": {"temperature": sampling["temperature"]}
        if bounds.score(sampling.get("temperature")) is not None
        else {},  # vf-eval leaves it out for the default
        META: {
            "item": n,
            "example_id": rows[0]["example_id"],
            "env": metadata.env_id or "?",
            "mode": "eval",
            "model": metadata.model,
            "simulated": metadata.base_url == "simulated",
            "metrics": {
                name: [v for r in rows if (v := bounds.score(row_metrics(r).get(name))) is not None]
                for name in names
            },  # a value that is no number is left out, never a 0
            "finish_reasons": [
                "length" if r.get("is_truncated") else r.get("stop_condition") for r in rows
            ],
        },
    }


def failed_examples(rows: Iterable[dict[str, Any]]) -> set[str]:
    """The examples with a row whose reward is no finite number: errors, none of their rows in a figure."""
    return {
        str(row["example_id"])
        for row in rows
        if row.get("example_id") is not None and bounds.score(row.get("reward")) is None
    }


def row_metrics(row: dict[str, Any]) -> dict[str, Any]:
    return row["metrics"] if isinstance(row.get("metrics"), dict) else {}


def row_messages(value: Any) -> list[dict[str, Any]]:
    """vf-eval's prompt or completion: a message list, or a plain completion string."""
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []
