"""What a resumed run may change, and what it may not.

A resumed run appends to its own jsonl, so a setting that changes what a line means (the
environment and its arguments, the group size, the mode, the model, its tokenizer, the parser
that reads tool calls out of its text, the shard whose items it collects) stays as the run
began: a different one is refused with one sentence naming it. Settings of how groups are
collected (temperature, concurrency, timeouts, the endpoint's address) may change; each group
records those it was collected with.
"""

from __future__ import annotations

import json
from typing import Any

from vftui.config import FLAG_OF_FIELD, RunConfig
from vftui.errors import UserError
from vftui.events import Mode
from vftui.run_files.records import RunRecord
from vftui.run_files.shards import parse

# settings whose change changes a line's meaning
KEPT = ("mode", "env", "env_args", "group_size", "tool_parser", "shard")
RECORDED = (
    "concurrency",
    "timeout",
    "retries",
)  # how a group was collected, in each line (with its temperature)


def check_settings(saved: dict[str, Any], config: RunConfig) -> None:
    """The resumed run's settings against the ones it began with (``saved``, from its .run.json)."""
    now = config.public_dict()
    for name in KEPT:  # a setting an older run did not save had its default then
        before = saved.get(name, RunConfig.model_fields[name].default)
        if before != now[name]:
            eval_k = name == "group_size" and config.mode is Mode.EVAL
            flag = "--rollouts-per-example" if eval_k else FLAG_OF_FIELD[name]
            raise UserError(
                f"--resume: the run was collected with {flag} {_shown(name, before)}, and its lines "
                f"mean that; drop {flag} {_shown(name, now[name])}, or start a new run with another --out"
            )


def check_plan(described: RunRecord, model: str, tokenizer: str) -> None:
    """The model and tokenizer the resumed run resolved (from the endpoint, or defaults) against the run's own."""
    for what, flag, before, after in (
        ("model", "--model", described.model, model),
        ("tokenizer", "--tokenizer", described.tokenizer, tokenizer),
    ):
        if before and before != after:
            raise UserError(
                f"--resume: the run was collected with {what} {before}, and this one would use {after}; "
                f"resume with {flag} {before} (and an endpoint that serves it), or start a new run"
            )


def collected_with(config: RunConfig) -> dict[str, Any]:
    """The settings a group records beside its temperature: a resume may have changed them."""
    return {name: getattr(config, name) for name in RECORDED}


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if name == "shard":
        return str(parse(value))  # as the flag takes it: 1/4
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
