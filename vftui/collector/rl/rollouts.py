"""rl: each rollout through its own ManagedServer, every model call's token ids and logprobs recorded."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from vftui.collector.envs.base import Rollout
from vftui.collector.rl.managed import recorded_client
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized, rl_tokens

if TYPE_CHECKING:
    from vftui.collector.verifiers_env import VerifiersEnv


class RlRollouts:
    logprobs = True

    def __init__(self, max_concurrent: int | None = None) -> None:
        self._max_concurrent = max_concurrent

    async def attempt(
        self, env: VerifiersEnv, item: dict[str, Any], temperature: float
    ) -> list[Rollout]:
        sampling = {"temperature": temperature, "max_tokens": env.config.max_token_length}
        model = env.server.servers[0].config.model_name
        limit = asyncio.Semaphore(self._max_concurrent or env.config.group_size)

        async def one() -> Rollout:
            async with limit, recorded_client(env.server, env.tokenizer) as (client, recorder):
                rollout = await env.environment.rollout(item, client, model, sampling)
            return dataclasses.replace(rollout, model_calls=recorder.turns)

        return list(await asyncio.gather(*(one() for _ in range(env.config.group_size))))

    def time_limit_s(self, env: VerifiersEnv) -> float | None:
        """The request timeout for each model call a rollout may make (one when unbounded): atroposlib
        waits forever for an unhealthy server, so a whole group gets a limit."""
        calls = env.environment.max_turns or 1
        return float(env.server.servers[0].config.timeout) * calls

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        return rl_tokens(tokenizer, messages, rollout.model_calls)

    def group_meta(self, env: VerifiersEnv) -> dict[str, Any]:
        return {"trainer_step": env.trainer_step()}  # for the off-policy lag of the groups sent
