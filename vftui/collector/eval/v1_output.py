"""An eval's rollouts as verifiers' v1 eval writes them, so its tools open a vftui eval: ``traces.jsonl``
(one episode a line, as ``verifiers.v1.utils.trace_store.write_episode`` dumps an ``Episode``; read back by
its ``read_episodes`` and ``eval --resume``'s ``load``) and ``configs/resolved/eval.json`` (the run's
config in ``EvalConfig``'s shape, found by its ``saved_config_path``).

Plain JSON, no verifiers import: the eval may have run a classic environment. What vftui's groups do not
hold is left out, never made up: one reward, ``reward`` (the rubric's weighted total: vftui keeps no
weights), beside each function's value in ``metrics``; the token counts as the usage of the rollout's
last model call (its prompt and the tokens the model wrote, as the trainer's masks count them; none where
the groups keep no tokens, as an rl run's evals), no token ids on the nodes; the group's start and
duration as each rollout's agent span.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vftui.group_format import META, trained_tokens
from vftui.run_files import store
from vftui.run_files.v1_traces import RESOLVED_CONFIG, TRACE_VERSIONS, TRACES

REWARD = "reward"  # the one reward a vftui trace records: the rubric's total


def episodes(group: dict[str, Any], env: str, model: str, version: str) -> Iterator[dict[str, Any]]:
    """One episode a rollout of the group (verifiers' eval writes one a rollout too), each with its trace."""
    meta = group.get(META) or {}
    metrics = meta.get("metrics") or {}
    reasons = meta.get("finish_reasons") or [None] * len(group["scores"])
    example = meta.get("example_id")
    data: dict[str, Any] = {"idx": example if type(example) is int else meta.get("item")}
    if isinstance(example, str):
        data = {"idx": None, "id": example}
    started, elapsed = meta.get("started_at", 0.0), meta.get("elapsed_s", 0.0)
    for r, score in enumerate(group["scores"]):
        messages = (group.get("messages") or [[]] * len(group["scores"]))[r]
        split = next(
            (i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages)
        )
        task = {"type": "Task", "data": {**data, "prompt": [_v1(m) for m in messages[:split]]}}
        nodes: list[dict[str, Any]] = [
            {
                "parent": i - 1 if i else None,
                "message": _v1(m),
                "sampled": i >= split and m.get("role") == "assistant",  # the model's own turns
            }
            for i, m in enumerate(messages)
        ]
        sampled = [i for i, n in enumerate(nodes) if n["sampled"]]
        calls: list[dict[str, Any]] = [
            {
                "node": i,
                "model": model,
                "finish_reason": "tool_calls" if nodes[i]["message"].get("tool_calls") else "stop",
            }
            for i in sampled
        ]
        if calls:
            calls[-1]["finish_reason"] = (
                "length" if reasons[r] == "length" else calls[-1]["finish_reason"]
            )
            tokens = (
                group.get("tokens") or []
            )  # none in an rl run's evals (the OpenAI API's messages)
            if r < len(tokens) and tokens[r]:
                written = trained_tokens(group["masks"][r])
                calls[-1]["usage"] = {
                    "prompt_tokens": len(tokens[r]) - written,
                    "completion_tokens": written,
                }
        trace = {
            "version": max(TRACE_VERSIONS),
            "id": uuid.uuid4().hex,
            "verifiers": {"version": version},
            "task": task,
            "agent": {
                "config": {
                    "model": model,
                    "sampling": {
                        "temperature": (group.get("generation_params") or {}).get("temperature")
                    },
                },
                "name": "agent",
            },
            "tools": [_tool(t) for t in group.get("tools") or []],
            "nodes": nodes,
            "calls": calls,
            "rewards": {REWARD: {"score": score, "weight": 1.0}},
            "metrics": {name: values[r] for name, values in metrics.items() if r < len(values)},
            "is_completed": True,
            "ok": True,
            "stop_condition": "agent_completed" if reasons[r] != "length" else "max_output_tokens",
            "timing": {
                "start": started,
                "agent": {"start": started, "end": started + elapsed},
            },
        }
        yield {
            "id": uuid.uuid4().hex,
            "env": {"id": env},
            "task": task,
            "ok": True,
            "traces": [trace],
        }


def write(
    groups: list[dict[str, Any]], run: dict[str, Any], rollouts: int, folder: Path, version: str
) -> None:
    """``traces.jsonl`` and the config, in ``folder`` (the eval's), each replaced in one rename."""
    env, model = run.get("env_id") or "", run.get("model") or ""
    lines = (
        json.dumps(episode, allow_nan=False) + "\n"
        for group in groups
        for episode in episodes(group, env, model, version)
    )
    store.write_text_atomic(folder / TRACES, "".join(lines))
    sampling = run.get("sampling_args") or {}
    config = {
        "env": {"id": "", "taskset": {"id": env, **(run.get("env_args") or {})}},
        "run": {"name": folder.name, "dir": folder.name},
        "model": model,
        "client": {"base_url": run.get("base_url")},
        "sampling": {
            "temperature": sampling.get("temperature"),
            "max_tokens": sampling.get("max_tokens"),
        },
        "num_rollouts": rollouts,
        "output_dir": str(folder.parent),
    }
    (folder / RESOLVED_CONFIG).parent.mkdir(parents=True, exist_ok=True)
    store.write_text_atomic(folder / RESOLVED_CONFIG, json.dumps(config, indent=2))


def _v1(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message in v1's form: a tool call's name and arguments beside its id, not under ``function``."""
    out = {
        k: v
        for k, v in message.items()
        if k in ("role", "content", "tool_call_id", "name", "reasoning_content")
    }
    if message.get("role") in ("system", "user", "tool") and out.get("content") is None:
        out["content"] = ""
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{n}",
                "type": "function",
                "name": (c.get("function") or {}).get("name", ""),
                "arguments": _text((c.get("function") or {}).get("arguments", "")),
            }
            for n, c in enumerate(calls)
        ]
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema as v1's ``Tool`` (name, description, parameters)."""
    function = schema.get("function") or schema
    return {
        "name": function.get("name", ""),
        "description": function.get("description") or "",
        "parameters": function.get("parameters") or {},
    }
