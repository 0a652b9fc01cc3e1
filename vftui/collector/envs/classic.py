"""verifiers' classic environments (``load_environment(**kwargs)`` returning a ``vf.Environment``).

Everything vftui knows about the classic API is here: how one is loaded, how a group is
generated (``generate``, the reference's sft path) or one rollout run (``run_rollout``, rl),
where a rollout's finish reason, turns and error live, and how a reward function that
raises (which verifiers silently scores 0) or returns NaN is caught. Checked against
verifiers 0.3.x, which serves the classic API from ``verifiers.legacy``.
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import inspect
from types import ModuleType
from typing import Any

from vftui import bounds
from vftui.collector import scoring_limit
from vftui.collector.envs.base import Rollout, numeric
from vftui.collector.envs.messages import openai_tools, plain_messages

LOGGERS = ("verifiers",)
"""Loggers that do not propagate to the root logger (verifiers disables propagation)."""

_REWARD_FAILURES: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "vftui_reward_failures", default=None
)
"""Set per group or rollout: the rollouts (tasks started inside that context) record here."""


def available() -> bool:
    """Whether the installed verifiers runs classic environments (0.3 does; 0.4 removed them)."""
    return importlib.util.find_spec("verifiers.legacy") is not None


def load(env_id: str, module: ModuleType, args: dict[str, Any]) -> Any:
    """The environment the module's ``load_environment`` builds, stamped as verifiers' loader stamps it."""
    _ask_git_once()
    vf_env = module.load_environment(**args)
    vf_env.env_id = vf_env.env_id or env_id
    vf_env.env_args = vf_env.env_args or args
    return vf_env


class ClassicEnvironment:
    """A loaded classic ``vf.Environment`` behind the collector's ``Environment`` interface."""

    def __init__(self, env_id: str, vf_env: Any) -> None:
        self.env_id = env_id
        self.vf_env = vf_env
        self.reward_function_names: list[str] = list(vf_env.rubric._get_reward_func_names())
        weights = map(float, vf_env.rubric._get_reward_weights())
        self.reward_weights = dict(zip(self.reward_function_names, weights, strict=False))
        self.has_tools = bool(openai_tools(getattr(vf_env, "tool_defs", None)))
        max_turns = getattr(vf_env, "max_turns", None)
        self.max_turns = max_turns if isinstance(max_turns, int) and max_turns > 0 else None
        _watch_reward_functions(vf_env)
        self._wrapped: tuple[Any, Any] | None = None
        self._rows: list[dict[str, Any]] | None = None
        self._split = "train"

    def _client(self, client: Any) -> Any:
        """verifiers' client around ``client``; sft's one client is wrapped once (a wrapper costs ~1 ms)."""
        import verifiers as vf

        if self._wrapped is None or self._wrapped[0] is not client:
            self._wrapped = (client, vf.OpenAIChatCompletionsClient(client))
        return self._wrapped[1]

    @property
    def size(self) -> int:
        return len(self._dataset())

    def item(self, index: int) -> dict[str, Any]:
        rows = self._dataset()
        return rows[index % len(rows)]

    def _dataset(self) -> list[dict[str, Any]]:
        if self._rows is None:
            dataset = (
                self.vf_env.get_eval_dataset()
                if self._split == "eval"
                else self.vf_env.get_dataset()
            )
            self._rows = dataset.to_list()
        return self._rows

    def use_eval_split(self) -> str | None:
        """``get_eval_dataset``, which is the training set when the environment has none (then None)."""
        self._split, self._rows = "eval", None
        has_own = any(
            getattr(self.vf_env, name, None) is not None
            for name in ("eval_dataset", "eval_dataset_source")
        )
        return "its eval dataset" if has_own else None

    async def aclose(self) -> None:
        return None

    async def group(
        self,
        item: dict[str, Any],
        size: int,
        client: Any,
        model: str,
        sampling: dict[str, Any],
        max_concurrent: int,
    ) -> list[Rollout]:
        """The reference's sft path: one ``generate`` call over the item repeated ``size`` times."""
        failures: list[tuple[str, str]] = []
        _REWARD_FAILURES.set(failures)  # the group's rollouts run in tasks that inherit it
        outputs = (
            await self.vf_env.generate(
                inputs=[_rollout_input(item) for _ in range(size)],
                client=self._client(client),
                model=model,
                sampling_args=sampling,
                max_concurrent=max_concurrent,
                independent_scoring=True,
                state_columns=["trajectory"],
                on_start=lambda *args, **kwargs: None,
                on_log=lambda message: None,
            )
        )["outputs"]
        return [_rollout(output, failures[0] if failures else None) for output in outputs]

    async def rollout(
        self, item: dict[str, Any], client: Any, model: str, sampling: dict[str, Any]
    ) -> Rollout:
        import verifiers as vf

        failures: list[tuple[str, str]] = []
        _REWARD_FAILURES.set(failures)  # this task's own context: the rollout's failures only
        output = await self.vf_env.run_rollout(
            _rollout_input(item),
            vf.OpenAIChatCompletionsClient(client),
            model,
            sampling,
            state_columns=["trajectory"],
        )
        return _rollout(output, failures[0] if failures else None)


def _rollout(output: dict[str, Any], reward_failure: tuple[str, str] | None) -> Rollout:
    """A classic rollout output (prompt and completion as pydantic messages, the trajectory's steps)."""
    messages = plain_messages(
        list(output.get("prompt") or []) + list(output.get("completion") or [])
    )
    reward: Any = output.get("reward")  # as the rubric gave it: the collector refuses a non-score
    return Rollout(
        messages=messages,
        reward=reward,
        metrics=numeric(output.get("metrics") or {}),
        turns=len(output.get("trajectory") or []),
        finish_reasons=_finish_reasons(output),
        tools=openai_tools(output.get("tool_defs")),
        error=rollout_error(output),
        reward_failure=reward_failure,
    )


def _rollout_input(item: dict[str, Any]) -> dict[str, Any]:
    """A dataset row as a rollout input (``task`` must be an object or absent in 0.3)."""
    row = {
        "prompt": item["prompt"],
        "example_id": item["example_id"],
        "answer": item.get("answer", ""),
        "info": item.get("info") or {},
    }
    if isinstance(item.get("task"), dict):
        row["task"] = item["task"]
    return row


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _finish_reasons(output: dict[str, Any]) -> list[str | None]:
    """Each trajectory step's finish reason (``stop``, ``length``...), in order."""
    return [
        _field(_field(_field(step, "response"), "message"), "finish_reason")
        for step in output.get("trajectory") or []
    ]


def rollout_error(output: dict[str, Any]) -> str | None:
    """A rollout's error as one line, or None when it succeeded."""
    error = output.get("error")
    if not error:
        return None
    if isinstance(error, dict):
        text = error.get("error_chain_repr") or error.get("message") or str(error)
    else:
        text = str(error)
    links = text.split(" -> ")
    while len(links) > 1 and links[0].endswith("()"):
        links.pop(0)  # wrappers such as ModelError() that add no information
    return " -> ".join(links)


def _ask_git_once() -> None:
    """verifiers runs ``git rev-parse`` twice on every ``generate`` call (once per group) for
    its own and the env's commit; neither changes while a run lives, and with dozens of
    groups a second the forks were a few percent of the collector's CPU."""
    from verifiers.legacy.utils import save_utils

    if not hasattr(save_utils.get_version_info, "cache_info"):
        save_utils.get_version_info = functools.lru_cache(maxsize=8)(save_utils.get_version_info)


def _watch_reward_functions(vf_env: Any) -> None:
    """Record a reward function that raises, which verifiers logs and silently scores 0.

    One that returns NaN, infinity, a number beyond ``bounds.MAX_SCORE`` or no number at all (a
    string, None) raises here: verifiers would take "0.5" as 0.5 and None as 0, and a non-finite
    reward poisons a group's advantages and is not JSON. Each function keeps its signature (verifiers picks its
    arguments from it) and name; the failure still scores 0 for verifiers, and the
    rollout's ``reward_failure`` tells the collector, which reports the group instead of
    training on the 0.
    """
    envs, rubrics = [vf_env], []
    while envs:  # an EnvGroup keeps its environments, each with its own rubric, in env_map
        env = envs.pop()
        envs.extend(getattr(env, "env_map", {}).values())
        rubrics.append(env.rubric)
    while rubrics:
        rubric = rubrics.pop()
        rubrics.extend(getattr(rubric, "rubrics", []))
        rubric.funcs = [_watched(func) for func in getattr(rubric, "funcs", [])]


def _watched(func: Any) -> Any:
    # verifiers keys metrics by __name__; a callable without one is left as it is
    if getattr(func, "_vftui_watched", False) or not hasattr(func, "__name__"):
        return func

    @functools.wraps(func)
    async def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            async with scoring_limit.limit.scoring(f"reward function '{func.__name__}'"):
                result = func(*args, **kwargs)
                result = await result if inspect.isawaitable(result) else result
            if (
                not isinstance(result, bool) and bounds.score(result) is None
            ):  # a bool scores 0 or 1, as in verifiers
                raise ValueError(f"returned {bounds.refusal(result)}")
        except Exception as e:
            failures = _REWARD_FAILURES.get()
            if failures is not None:
                failures.append((func.__name__, f"{type(e).__name__}: {e}"))
            raise
        return result

    vars(watched)["_vftui_watched"] = True  # wrapped once, however often the rubric is watched
    return watched
