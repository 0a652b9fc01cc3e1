"""The one interface the collector drives environments through, whatever kind they are.

A mode (sft, rl) asks an ``Environment`` for the dataset's items and for the rollouts of
one item, and gets each rollout back as a ``Rollout``: messages in the OpenAI chat form,
the reward, each reward function's and metric's value, turns, finish reasons, errors and
the tools offered. What verifiers calls these things, and how each version runs them, is
the implementations' business (``envs.classic``), not the modes'.
"""

from __future__ import annotations

import asyncio
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from vftui import bounds


@dataclass(frozen=True)
class Rollout:
    """One finished rollout, as every mode consumes it."""

    messages: list[dict[str, Any]]  # prompt and completion, OpenAI chat form
    reward: float
    metrics: dict[str, float]  # each reward function's and metric's numeric value
    turns: int  # model calls
    finish_reasons: list[str | None]  # each model call's, in order: stop, length, tool_calls...
    tools: list[dict[str, Any]] = field(
        default_factory=list
    )  # the OpenAI schemas the model was sent
    error: str | None = None  # the rollout failed (an endpoint error): not a score
    reward_failure: tuple[str, str] | None = (
        None  # (function, error): a reward function raised or was not finite
    )
    model_calls: list[Any] = field(
        default_factory=list
    )  # rl: each call's token ids and logprobs (``tokens.Turn``)

    @property
    def finish_reason(self) -> str | None:
        """The last model call's finish reason: whether the rollout ended cut off."""
        return self.finish_reasons[-1] if self.finish_reasons else None


def numeric(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that are numbers (verifiers keeps others beside them), a bool as 0 or 1; each as it came
    otherwise, so the collector refuses one that is not a score (``bounds.score``) rather than crash on it."""
    return {
        str(name): float(value) if isinstance(value, bool) else value
        for name, value in values.items()
        if isinstance(value, numbers.Real)
    }


def metrics_of(rollouts: list[Rollout]) -> dict[str, list[float]]:
    """Each reward function's and metric's values over a group's rollouts, in rollout order."""
    metrics: dict[str, list[float]] = {}
    for rollout in rollouts:
        for name, value in rollout.metrics.items():
            metrics.setdefault(name, []).append(value)
    return metrics


def unscorable(scores: list[Any], metrics: dict[str, list[Any]]) -> tuple[str, str] | None:
    """Which metric (or the total reward) holds a value that is not a score (``bounds.score``: NaN, infinity, a
    string, None, beyond ``MAX_SCORE``), and what it is; None when every value is one."""
    named = [
        *((f"metric '{name}'", values) for name, values in metrics.items()),
        ("the rubric's total reward", scores),
    ]
    for what, values in named:
        for value in values:
            if bounds.score(value) is None:
                return what, bounds.refusal(value)
    return None


class Environment(Protocol):
    """An environment the collector can run: its items, its reward functions, its rollouts.

    ``client`` is an ``AsyncOpenAI``-like client the mode chose (the endpoint's, or in rl a
    ManagedServer behind an adapter); ``sampling`` the sampling arguments as that client takes
    them. A rollout that fails is returned with its ``error``; only a rejected key raises.
    """

    env_id: str
    reward_function_names: list[str]
    reward_weights: dict[str, float]
    has_tools: bool  # rollouts may call tools
    max_turns: int | None

    @property
    def size(self) -> int | None:
        """How many items there are; None for an endless stream of them."""
        ...

    def item(self, index: int) -> dict[str, Any]:
        """Item ``index`` (past the end: from the start again), with its ``example_id``."""
        ...

    def use_eval_split(self) -> str | None:
        """Take the items from the eval split from now on; says which split that is (None: there is none)."""
        ...

    async def group(
        self,
        item: dict[str, Any],
        size: int,
        client: Any,
        model: str,
        sampling: dict[str, Any],
        max_concurrent: int,
    ) -> list[Rollout]:
        """``size`` rollouts of ``item`` at once, ``max_concurrent`` requests in flight."""
        ...

    async def rollout(
        self, item: dict[str, Any], client: Any, model: str, sampling: dict[str, Any]
    ) -> Rollout:
        """One rollout of ``item`` through ``client`` (rl: a client of its own, whose calls are recorded)."""
        ...

    async def aclose(self) -> None:
        """Stop what the rollouts started (tool servers shared by them)."""
        ...


class IndependentRollouts:
    """``group`` for an environment whose rollouts of an item are independent: ``size`` of its ``rollout``
    at once, ``max_concurrent`` in flight (v1 tasksets, run here or by an env server)."""

    async def rollout(
        self, item: dict[str, Any], client: Any, model: str, sampling: dict[str, Any]
    ) -> Rollout:
        raise NotImplementedError

    async def group(
        self,
        item: dict[str, Any],
        size: int,
        client: Any,
        model: str,
        sampling: dict[str, Any],
        max_concurrent: int,
    ) -> list[Rollout]:
        limit = asyncio.Semaphore(max_concurrent)

        async def one() -> Rollout:
            async with limit:
                return await self.rollout(item, client, model, sampling)

        return list(await asyncio.gather(*(one() for _ in range(size))))
