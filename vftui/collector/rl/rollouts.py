"""rl: each rollout through its own ManagedServer, every model call's token ids and logprobs recorded."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from vftui.collector.envs.base import Rollout
from vftui.collector.modes import Sampling, ServeDriver
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized, rl_tokens


class RlRollouts:
    logprobs = True

    def __init__(
        self, sampling: Sampling, driver: ServeDriver, max_concurrent: int | None = None
    ) -> None:
        self._sampling = sampling
        self._driver = driver
        self._max_concurrent = max_concurrent

    async def attempt(self, item: dict[str, Any], temperature: float) -> list[Rollout]:
        sampling = self._sampling
        options = {"temperature": temperature, "max_tokens": sampling.max_tokens}
        limit = asyncio.Semaphore(self._max_concurrent or sampling.group_size)

        async def one() -> Rollout:
            async with limit, self._driver.recorded_client() as (client, recorder):
                rollout = await sampling.environment.rollout(
                    item, client, sampling.endpoint.model, options
                )
            return dataclasses.replace(rollout, model_calls=recorder.turns)

        return list(await asyncio.gather(*(one() for _ in range(sampling.group_size))))

    def time_limit_s(self) -> float | None:
        """The request timeout for each model call a rollout may make (one when unbounded): atroposlib
        waits forever for an unhealthy server, so a whole group gets a limit."""
        calls = self._sampling.environment.max_turns or 1
        return float(self._sampling.endpoint.timeout) * calls

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        return rl_tokens(tokenizer, messages, rollout.model_calls)

    def group_meta(self) -> dict[str, Any]:
        return {
            "trainer_step": self._driver.trainer_step()
        }  # for the off-policy lag of the groups sent
