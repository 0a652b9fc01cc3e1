"""verifiers' v1 eval output read as rollouts: ``traces.jsonl``, one episode a line, its traces inside.

verifiers (0.3.1 and 0.4) writes a run folder ``<output_dir>/<run dir>/`` holding ``traces.jsonl``
(``verifiers.v1.utils.trace_store.write_episode``: ``Episode`` dumped with ``exclude_none``),
``configs/resolved/eval.json`` and ``logs/``; its replay writes ``<name>--replay/<uuid>/``. Each figure
here is the one verifiers' own ``Trace`` gives: the reward is ``Trace.reward`` (each named reward's
score times its weight), the turns ``Trace.num_turns`` (sampled nodes), the tokens ``Trace.usage``
(its calls' usage summed), the messages and tokens those of the last branch (``Trace.messages``).
A trace (or an episode without one) that is not ``ok`` is an error: counted, never a zero.

Plain JSON, no verifiers import: views read it. A trace of a ``version`` this reader does not know,
or a file whose episodes lack the keys every version has, is refused in one sentence.

Its writer is here too (``write``): an eval vftui ran, written in the same form, so verifiers' tools open
it. What vftui's groups do not hold is left out, never made up: one reward, ``reward`` (the rubric's
weighted total: vftui keeps no weights), beside each function's value in ``metrics``; the token counts
as the usage of the rollout's last model call (none where the groups keep no tokens, as an rl run's
evals), no token ids on the nodes; the group's start and duration as each rollout's agent span.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui import bounds
from vftui.errors import UserError
from vftui.group_format import MASKED, META, trained_tokens
from vftui.run_files import records, store

TRACES = "traces.jsonl"  # verifiers.v1.utils.trace_store.TRACES_FILE
RESOLVED_CONFIG = Path("configs", "resolved", "eval.json")  # verifiers.v1.cli.output.write_config
TRACE_VERSIONS = frozenset({1})  # verifiers.v1.trace.TRACE_VERSION in 0.3.1 and 0.4
_PHASES = ("boot", "setup", "agent", "finalize", "scoring")  # verifiers.v1.trace.Timing
_TRUNCATING = {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens"}


@dataclass
class SavedRollout:
    """One trace's figures, as verifiers' ``Trace`` computes them."""

    key: (
        str  # the task's ``data.idx`` (else its ``data.id``, ``key`` or ``hash``): what pairs items
    )
    item: int  # its position: ``data.idx``, else the order its task first appeared in
    reward: float
    functions: dict[
        str, float
    ]  # each named reward's score and each metric (None: not run, left out)
    turns: int
    tool_calls: int
    input_tokens: int | None  # None: no call reported usage
    output_tokens: int | None
    started_at: float
    elapsed_s: float
    truncated: bool
    stop_condition: str | None
    messages: list[dict[str, Any]]  # the last branch, in the OpenAI chat form vftui's groups hold
    tokens: list[int]
    masks: list[int]  # Atropos masks: the token where the model sampled it, MASKED elsewhere
    temperature: float | None
    tools: list[dict[str, Any]] = field(default_factory=list)  # the schemas sent, OpenAI's shape


@dataclass
class Failure:
    """A rollout that is not ``ok`` (or an episode that ended before any trace): an error, with its reason."""

    key: str
    item: int
    reason: str


@dataclass
class V1Eval:
    """A run folder's rollouts, its failures, and what it records of itself."""

    path: Path  # its traces.jsonl
    env: str = ""
    model: str | None = None
    versions: str | None = None  # "verifiers 0.4.0", from the traces
    rollouts: list[SavedRollout] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: int = 0  # lines that are no episode (torn, foreign)
    config: dict[str, Any] = field(default_factory=dict)  # configs/resolved/eval.json, if it reads

    @property
    def temperatures(self) -> tuple[float, ...]:
        return tuple(sorted({r.temperature for r in self.rollouts if r.temperature is not None}))


def traces_in(path: Path) -> Path | None:
    """The ``traces.jsonl`` that ``path`` names: itself, its folder's, or that of the one run folder it holds
    (``<name>/<uuid>/``); None when it names none. Two or more run folders in it: a sentence."""
    if path.is_file():
        return path if path.name == TRACES else None
    if (path / TRACES).is_file():
        return path / TRACES
    try:
        held = sorted(p / TRACES for p in path.iterdir() if (p / TRACES).is_file())
    except OSError:
        return None
    if len(held) > 1:
        raise UserError(f"{path} holds {len(held)} verifiers runs; name one's folder")
    return held[0] if held else None


Tally = Callable[[list[SavedRollout]], None]
"""What a reader that needs a run's figures alone takes of each episode's rollouts (``vftui runs FOLDER``'s)."""


def read(path: Path, each: Tally | None = None) -> V1Eval:
    """The episodes of ``path`` (a ``traces.jsonl``) as rollouts and failures; a sentence when it is not one.
    With ``each``, each episode's rollouts go to it and are not kept: the run holds its failures alone."""
    run = V1Eval(path, config=_config(path.parent))
    positions: dict[str, int] = {}
    seen_episode = False
    rows = store.JsonObjects(path)
    for row in rows:
        if not is_episode(row):
            if seen_episode:
                run.skipped += 1
                continue
            raise UserError(
                f"{path}: not verifiers v1 traces this vftui knows (a line without an episode's "
                "'task' and 'traces')"
            )
        seen_episode = True
        rollouts, _ = read_episode(row, run, positions)
        if each is not None:
            each(rollouts)
            run.rollouts.clear()
    run.skipped += rows.skipped
    if not seen_episode:
        raise UserError(f"{path}: no verifiers episode in it (an empty file, or no line is one)")
    run.env = run.env or as_text(taskset_config(run).get("id"))
    return run


def is_episode(row: dict[str, Any]) -> bool:
    """An ``Episode`` record: the keys every version has."""
    return isinstance(row.get("task"), dict) and isinstance(row.get("traces"), list)


def read_episode(
    row: dict[str, Any], run: V1Eval, positions: dict[str, int]
) -> tuple[list[SavedRollout], list[Failure]]:
    """One episode's rollouts and failures, added to ``run`` too (its env, model and versions where it is the
    first to name them); a trace of a version this reader does not know is a sentence."""
    run.env = run.env or as_text(as_dict(row.get("env")).get("id"))
    key, item = _task_key(row["task"], positions)
    traces = [t for t in row["traces"] if isinstance(t, dict)]
    rollouts: list[SavedRollout] = []
    failures: list[Failure] = []
    for trace in traces:
        version = trace.get("version", 1)
        if type(version) is not int or version not in TRACE_VERSIONS:
            raise UserError(
                f"{run.path}: its traces are of version {bounds.refusal(version)}, which this vftui "
                f"does not know (it reads version {', '.join(map(str, sorted(TRACE_VERSIONS)))})"
            )
        built = as_dict(trace.get("verifiers")).get("version")
        run.versions = run.versions or (f"verifiers {built}" if isinstance(built, str) else None)
        rollout = _rollout(trace, key, item)
        if rollout is None or trace.get("ok") is not True:
            failures.append(Failure(key, item, _why(trace)))
        else:
            rollouts.append(rollout)
            run.model = run.model or _model(trace)
    if not traces and row.get("ok") is not True:
        failures.append(Failure(key, item, _why(row)))
    run.rollouts += rollouts
    run.failures += failures
    return rollouts, failures


def taskset_config(run: V1Eval) -> dict[str, Any]:
    """The taskset's part of the run's resolved config (its ``id`` and arguments); empty when not recorded."""
    return as_dict(as_dict(run.config.get("env")).get("taskset"))


def _task_key(task: dict[str, Any], positions: dict[str, int]) -> tuple[str, int]:
    """The task's key and position: ``data.idx`` is both (vftui's ``example_id`` of a v1 taskset), else its
    ``data.id``, ``key`` or ``hash`` at the next position."""
    data = as_dict(task.get("data"))
    idx = data.get("idx")
    if type(idx) is int and 0 <= idx <= bounds.HUGE:
        return str(idx), idx
    named = next(
        (v for v in (data.get("id"), task.get("key"), task.get("hash")) if isinstance(v, str)), ""
    )
    return named, positions.setdefault(named, len(positions))


def _rollout(trace: dict[str, Any], key: str, item: int) -> SavedRollout | None:
    """The trace's figures; None where one of them is no number a figure can use."""
    rewards = {str(k): v for k, v in as_dict(trace.get("rewards")).items() if v is not None}
    scores: dict[str, tuple[Any, Any]] = {  # JSON values: each checked to be a number below
        k: (as_dict(v).get("score"), as_dict(v).get("weight", 1.0)) for k, v in rewards.items()
    }
    metrics = {str(k): v for k, v in as_dict(trace.get("metrics")).items() if v is not None}
    numbers = [bounds.score(v) for pair in scores.values() for v in pair]
    numbers += [bounds.score(v) for v in metrics.values()]
    if None in numbers:
        return None
    nodes = [n for n in as_list(trace.get("nodes")) if isinstance(n, dict)]
    calls = [c for c in as_list(trace.get("calls")) if isinstance(c, dict)]
    usages = [as_dict(c.get("usage")) for c in calls if isinstance(c.get("usage"), dict)]
    timing = as_dict(trace.get("timing"))
    start = bounds.score(timing.get("start")) or 0.0
    ends = [bounds.score(as_dict(timing.get(phase)).get("end")) or 0.0 for phase in _PHASES]
    branch = _last_branch(nodes)
    sampled = [n for n in nodes if n.get("sampled") is True]
    tokens = [t for n in branch for t in _ints(n.get("token_ids"))]
    mask = [bool(m) for n in branch for m in as_list(n.get("mask"))]
    last_call = next((c for c in reversed(calls) if c.get("error") is None), {})
    stop = trace.get("stop_condition")
    config = as_dict(as_dict(trace.get("agent")).get("config"))
    return SavedRollout(
        key=key,
        item=item,
        reward=sum(score * weight for score, weight in scores.values()),
        functions={**{k: s for k, (s, _) in scores.items()}, **metrics},
        turns=len(sampled),
        tool_calls=sum(len(as_list(as_dict(n.get("message")).get("tool_calls"))) for n in sampled),
        input_tokens=_usage_sum(usages, "prompt_tokens", "cached_input_tokens"),
        output_tokens=_usage_sum(usages, "completion_tokens"),
        started_at=start,
        elapsed_s=max(0.0, max(ends) - start) if max(ends) else 0.0,
        truncated=stop in _TRUNCATING or last_call.get("finish_reason") == "length",
        stop_condition=stop if isinstance(stop, str) else None,
        messages=[_chat(as_dict(n.get("message"))) for n in branch],
        tokens=tokens,
        masks=[t if m else MASKED for t, m in zip(tokens, mask, strict=False)]
        if len(mask) == len(tokens)
        else [],
        temperature=bounds.score(as_dict(config.get("sampling")).get("temperature")),
        tools=[_openai_tool(t) for t in as_list(trace.get("tools")) if isinstance(t, dict)],
    )


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """v1's ``Tool`` (name, description, parameters) as the OpenAI schema vftui's groups hold."""
    if isinstance(tool.get("function"), dict):
        return tool
    return {
        "type": "function",
        "function": {
            "name": as_text(tool.get("name")),
            "description": as_text(tool.get("description")),
            "parameters": as_dict(tool.get("parameters")),
        },
    }


def _last_branch(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes of the last root-to-leaf path (``Trace.branches[-1]``: its leaf is the last node no node
    names as parent); a parent link that points nowhere or loops ends the path there."""
    parents = {n.get("parent") for n in nodes if type(n.get("parent")) is int}
    leaves = [i for i in range(len(nodes)) if i not in parents]
    path: list[dict[str, Any]] = []
    at, seen = (leaves[-1] if leaves else None), set()
    while type(at) is int and 0 <= at < len(nodes) and at not in seen:
        seen.add(at)
        path.append(nodes[at])
        at = nodes[at].get("parent")
    return path[::-1]


def _chat(message: dict[str, Any]) -> dict[str, Any]:
    """A v1 message in the chat form vftui's groups hold (a tool call's name and arguments under ``function``)."""
    out = {k: v for k, v in message.items() if k not in ("tool_calls", "provider_state")}
    calls = [c for c in as_list(message.get("tool_calls")) if isinstance(c, dict)]
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name"), "arguments": c.get("arguments")},
            }
            for c in calls
        ]
    return out


def _usage_sum(usages: list[dict[str, Any]], *names: str) -> int | None:
    """``names`` summed over the calls' usage (``Usage.input_tokens`` adds cache reads back); None: no usage."""
    if not usages:
        return None
    return sum(n for u in usages for name in names if type(n := u.get(name)) is int and n >= 0)


def _model(trace: dict[str, Any]) -> str | None:
    return next(
        (
            c["model"]
            for c in as_list(trace.get("calls"))
            if isinstance(as_dict(c).get("model"), str)
        ),
        None,
    )


def _why(record: dict[str, Any]) -> str:
    """The last error's type and message, else what stopped it."""
    errors = [e for e in as_list(record.get("errors")) if isinstance(e, dict)]
    if errors:
        return f"{as_text(errors[-1].get('type'))}: {as_text(errors[-1].get('message'))}"
    stop = record.get("stop_condition")
    return f"not ok ({stop})" if isinstance(stop, str) else "not ok"


def _config(folder: Path) -> dict[str, Any]:
    """The run's resolved config beside its traces, if one reads as an object; one that cannot be read (a FIFO,
    a device, damage) is a sentence, as an eval's damaged metadata.json is."""
    return side_file(folder / RESOLVED_CONFIG)


def side_file(path: Path) -> dict[str, Any]:
    """A config beside a run's rollouts (``records.read_object``); a sentence naming it where it cannot be read."""
    try:
        return records.read_object(path)
    except records.Damaged as e:
        raise UserError(str(e)) from e


def _ints(value: Any) -> list[int]:
    return [v for v in as_list(value) if type(v) is int]


# a trace's fields as the type they should be, else empty: a reader of foreign files never trusts a shape
def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_groups(run: V1Eval) -> Iterator[dict[str, Any]]:
    """The rollouts as vftui's groups (one a task, in the order its first rollout was written), an eval's:
    what ``vftui view`` reads."""
    by_item: dict[int, list[SavedRollout]] = {}
    for rollout in run.rollouts:
        by_item.setdefault(rollout.item, []).append(rollout)
    for item, rollouts in by_item.items():
        yield group_line(rollouts, item, run.env or "?", run.model or "?", "eval")


def group_line(
    rollouts: list[SavedRollout], item: int, env: str, model: str, mode: str
) -> dict[str, Any]:
    """Rollouts of one task as one of vftui's group lines; a rollout's tool calls and token usage ride in
    its ``vftui`` object."""
    names = list(dict.fromkeys(name for r in rollouts for name in r.functions))
    start = min(r.started_at for r in rollouts)
    temperatures = {r.temperature for r in rollouts if r.temperature is not None}
    return {
        "scores": [r.reward for r in rollouts],
        "tokens": [r.tokens for r in rollouts],
        "masks": [r.masks for r in rollouts],
        "messages": [r.messages for r in rollouts],
        "tools": next((r.tools for r in rollouts if r.tools), None),
        "generation_params": {"temperature": min(temperatures)} if temperatures else {},
        META: {
            "item": item,
            "example_id": rollouts[0].key,
            "env": env,
            "mode": mode,
            "model": model,
            "metrics": {n: [r.functions[n] for r in rollouts if n in r.functions] for n in names},
            "turns": [r.turns for r in rollouts],
            "tool_calls": [r.tool_calls for r in rollouts],
            "input_tokens": [r.input_tokens for r in rollouts],
            "output_tokens": [r.output_tokens for r in rollouts],
            "finish_reasons": ["length" if r.truncated else r.stop_condition for r in rollouts],
            "started_at": start,
            "elapsed_s": max(r.started_at + r.elapsed_s for r in rollouts) - start,
        },
    }


def failed_tasks(run: V1Eval) -> dict[int, str]:
    """Each task with a rollout that failed, with the first one's reason and how many of its rollouts failed:
    an error of the eval, as a group that failed to score is one of vftui's."""
    failed: dict[int, list[Failure]] = {}
    for failure in run.failures:
        failed.setdefault(failure.item, []).append(failure)
    return {
        item: f"{found[0].reason} ({len(found)} rollout{'s' if len(found) > 1 else ''} failed)"
        for item, found in failed.items()
    }


# The writer: an eval vftui ran, as verifiers' v1 eval writes one.

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
