"""verifiers v1 tasksets behind the collector's ``Environment`` interface.

Loaded with verifiers' own v1 loader (``resolve_env_config`` and ``load_environment``), so a
taskset's own Env is used; ``--env-args`` is a flat object routed to the taskset's config
fields, its tasks' config fields, or the Env's. Rollouts run in-process (``v1_runner``), the
model called through the mode's client; a rollout becomes a ``Rollout`` from its trace.
A taskset without an end (``INFINITE``) is iterated, never listed: item N is the Nth task of
its stream, which verifiers' tasksets seed, so a resumed run finds the same tasks again.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import verifiers.v1 as vf
from pydantic import ValidationError
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.utils.loaders import load_environment, resolve_env_config, taskset_config_type

from vftui.collector.envs.base import IndependentRollouts, Rollout, numeric
from vftui.collector.envs.messages import plain_messages
from vftui.collector.envs.v1_runner import (
    ChatCall,
    Outcome,
    ToolServer,
    run_episode,
    start_shared_tools,
)
from vftui.errors import UserError

STAGES = {"setup": "the task's setup failed", "env": "the environment's run failed"}
RECENT_TASKS = (
    4096  # an endless taskset's tasks kept for their groups (and those a resume collects again)
)
LISTED_AT_MOST = 100_000  # a taskset longer than this that does not say it is endless (INFINITE) is read as a stream
LOGGERS = ("verifiers",)


def load(env_id: str, taskset_id: str, env_args: dict[str, Any]) -> V1Environment:
    """The taskset ``taskset_id`` (the id verifiers' loader imports) as ``env_id``; settings it does not
    take are one sentence naming them."""
    try:
        config = resolve_env_config(env_config(taskset_id, env_args))
    except ValidationError as e:
        raise UserError(_bad_settings(env_id, taskset_id, e)) from e
    return V1Environment(env_id, load_environment(config))


def settings(taskset_id: str) -> list[str]:
    """The flat ``--env-args`` keys a taskset takes: its config's fields and its tasks' config's."""
    fields = taskset_config_type(taskset_id).model_fields
    task = fields["task"].annotation if "task" in fields else None
    own = [name for name in fields if name not in ("id", "task", "system_prompt")]
    return own + list(getattr(task, "model_fields", {}))


def _bad_settings(env_id: str, taskset_id: str, error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"] if part != "taskset")
    if first["type"] == "extra_forbidden":
        return (
            f"environment '{env_id}' has no setting '{where}' (--env-args); its settings: "
            f"{', '.join(settings(taskset_id)) or 'none'}"
        )
    return f"invalid --env-args for '{env_id}': {where}: {first['msg']}"


def env_config(taskset_id: str, env_args: dict[str, Any]) -> dict[str, Any]:
    """Flat ``--env-args`` routed: the taskset's config fields, then its tasks' config fields, then the
    Env's (an unknown key is refused by the config's validation); a dotted key nests as written."""
    taskset_fields = taskset_config_type(taskset_id).model_fields
    task_config = taskset_fields["task"].annotation if "task" in taskset_fields else None
    task_fields = (
        task_config.model_fields
        if isinstance(task_config, type) and hasattr(task_config, "model_fields")
        else {}
    )
    taskset: dict[str, Any] = {"id": taskset_id}
    env: dict[str, Any] = {"taskset": taskset}
    for key, value in env_args.items():
        key = key.replace("-", "_")
        head, *rest = key.split(".")
        if head in taskset_fields:
            target, path = taskset, [head, *rest]
        elif head in task_fields:
            target, path = taskset.setdefault("task", {}), [head, *rest]
        else:
            target, path = env, [head, *rest]
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    return env


class V1Environment(IndependentRollouts):
    def __init__(self, env_id: str, env: Any) -> None:
        self.env_id = env_id
        self.env = env
        self._check_runnable()
        taskset = env.taskset
        self._tasks = None if getattr(taskset, "INFINITE", False) else _listed(taskset)
        if self._tasks == []:
            raise UserError(f"environment '{env_id}' has no tasks (with these --env-args)")
        self._stream: Iterator[Any] | None = None
        self._produced = 0
        self._recent: collections.OrderedDict[int, Any] = collections.OrderedDict()
        first = self._task(0)
        rewards = first.hooks("reward")
        self.reward_function_names = [fn.__name__ for fn in rewards] + [
            j.reward_name for j in first.plugged_judges()
        ]
        self.reward_weights = {fn.__name__: float(getattr(fn, "_vf_weight", 1.0)) for fn in rewards}
        self.has_tools = bool(
            type(taskset).toolsets(taskset.config) or type(first).toolsets(first.config)
        )
        agent = getattr(
            env.config, "agent", None
        )  # its max_turns is a limit; a taskset's, how many it asks for
        self.max_turns: int | None = getattr(agent, "max_turns", None) or getattr(
            taskset.config, "max_turns", None
        )
        self._shared_tools: dict[str, ToolServer] | None = None
        self._tools_lock = asyncio.Lock()

    def _check_runnable(self) -> None:
        """What this runner does not run is refused with what it needs."""
        roles = [
            name
            for name, field in type(self.env.config).model_fields.items()
            if isinstance(field.annotation, type) and issubclass(field.annotation, vf.AgentConfig)
        ]
        if len(roles) > 1:
            raise UserError(
                f"environment '{self.env_id}' runs {len(roles)} agents ({', '.join(roles)}); vftui "
                "collects one model's rollouts: run it with verifiers' eval"
            )
        task_type = type(self.env.taskset).task_type()
        if getattr(task_type, "NEEDS_CONTAINER", False):
            raise UserError(
                f"environment '{self.env_id}' runs its tasks in a container; vftui runs plain chat and "
                "tool tasks in-process: run it with verifiers' eval"
            )

    # -- items ----------------------------------------------------------------------------

    @property
    def size(self) -> int | None:
        return len(self._tasks) if self._tasks is not None else None

    def use_eval_split(self) -> str | None:
        """None: a v1 taskset has no separate eval split; its tasks are what its config (``--env-args``) selects."""
        return None

    def item(self, index: int) -> dict[str, Any]:
        task = self._task(index)
        if task.data.image is not None:
            raise UserError(
                f"task {task.data.idx} of '{self.env_id}' needs the container image {task.data.image}; "
                "vftui runs plain chat and tool tasks in-process"
            )
        example_id = task.data.idx if task.data.idx is not None else index
        return {"example_id": example_id, "task": task}

    def _task(self, index: int) -> Any:
        if self._tasks is not None:
            return self._tasks[index % len(self._tasks)]
        if index in self._recent:
            return self._recent[index]
        if index < self._produced:  # fell out of the recent ones: the stream is read again to it
            self._stream, self._produced = None, 0
        if self._stream is None:
            self._stream = iter(self.env.taskset)
        for task in itertools.islice(self._stream, index - self._produced + 1):
            self._recent[self._produced] = task
            self._produced += 1
            if len(self._recent) > RECENT_TASKS:
                self._recent.popitem(last=False)
        return self._recent[index]

    # -- rollouts -------------------------------------------------------------------------

    async def rollout(
        self, item: dict[str, Any], client: Any, model: str, sampling: dict[str, Any]
    ) -> Rollout:
        try:
            outcomes = await run_episode(
                self.env,
                item["task"],
                model=model,
                chat=_chat(client),
                sampling=verifiers_sampling(sampling),
                shared_tools=await self._shared(),
            )
        except Exception as e:  # noqa: BLE001 - the Env failed before any agent ran: a failed rollout
            return Rollout(
                [], 0.0, {}, 0, [], error=f"the environment's run failed: {type(e).__name__}: {e}"
            )
        if len(outcomes) != 1:
            return Rollout(
                [],
                0.0,
                {},
                0,
                [],
                error=f"the environment ran {len(outcomes)} agents for one rollout; "
                "vftui collects one model's rollouts",
            )
        return _rollout(outcomes[0])

    async def _shared(self) -> dict[str, ToolServer]:
        """The taskset's shared toolsets, started with the first rollout that needs them."""
        async with self._tools_lock:
            if self._shared_tools is None:
                self._shared_tools = await start_shared_tools(self.env.taskset)
        return self._shared_tools

    async def aclose(self) -> None:
        for server in (self._shared_tools or {}).values():
            await server.stop()
        self._shared_tools = None


def _listed(taskset: Any) -> list[Any] | None:
    """A finite taskset's tasks; None for one that goes on past ``LISTED_AT_MOST`` without saying it is
    endless (it is read as a stream then, as a declared one is)."""
    tasks = list(itertools.islice(taskset, LISTED_AT_MOST + 1))
    return tasks if len(tasks) <= LISTED_AT_MOST else None


def _chat(client: Any) -> ChatCall:
    """A model call through the mode's client: the endpoint's (sft) or a ManagedServer's (rl)."""

    async def chat(body: dict[str, Any]) -> dict[str, Any]:
        response = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
        return response.json()

    return chat


def verifiers_sampling(sampling: dict[str, Any]) -> Any:
    """The mode's sampling arguments as verifiers' ``Sampling`` (its max_tokens is sent for either name)."""
    max_tokens = sampling.get("max_tokens", sampling.get("max_completion_tokens"))
    return vf.Sampling(temperature=sampling["temperature"], max_tokens=max_tokens)


def _rollout(outcome: Outcome) -> Rollout:
    error = reward_failure = None
    if outcome.failed_at == "scoring":
        reward_failure = (outcome.failing_hook or "scoring", outcome.error)
    elif outcome.failed_at:
        error = (
            outcome.error
            if outcome.failed_at == "model"
            else f"{STAGES[outcome.failed_at]}: {outcome.error}"
        )
    return trace_rollout(outcome.trace, outcome.tools, error, reward_failure)


def trace_rollout(
    trace: Any,
    tools: list[dict[str, Any]],
    error: str | None = None,
    reward_failure: tuple[str, str] | None = None,
) -> Rollout:
    """A v1 trace as the modes consume a rollout, run here or by an env server; a failed one scores 0."""
    failed = error is not None or reward_failure is not None
    return Rollout(
        messages=plain_messages([message_to_wire(m) for m in trace.messages]),
        reward=0.0 if failed else trace.reward,  # the collector refuses one that is not a score
        metrics={
            **{name: r.score for name, r in trace.rewards.items() if r is not None},
            **numeric(trace.metrics),
        },
        turns=trace.num_turns,
        finish_reasons=[call.finish_reason for call in trace.calls],
        tools=tools,
        error=error,
        reward_failure=reward_failure,
    )
