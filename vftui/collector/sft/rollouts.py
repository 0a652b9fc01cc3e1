"""sft: a group's rollouts from any OpenAI-compatible endpoint, and their tokens from the chat template."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI

from vftui.collector.envs.base import Rollout
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized, sft_tokens

if TYPE_CHECKING:
    from vftui.collector.verifiers_env import VerifiersEnv


class SftRollouts:
    """Each group in one call to the environment; every request through one shared client.

    ``http_client`` is the run's (``sft.traffic``: the request limit, rate limits and
    figures); without one (atroposlib's own command) the OpenAI client's own is used.
    """

    logprobs = False

    def __init__(self, http_client: Any = None, max_concurrent: int | None = None) -> None:
        self._http_client = http_client
        self._max_concurrent = max_concurrent
        self._client: AsyncOpenAI | None = None

    def _client_for(self, env: VerifiersEnv) -> AsyncOpenAI:
        if self._client is None:
            server = env.server.servers[0].config
            # retries are ours (so each one is reported), as are time limits (the transport's)
            self._client = AsyncOpenAI(
                base_url=server.base_url,
                api_key=server.api_key or "EMPTY",
                timeout=server.timeout,
                max_retries=0,
                http_client=self._http_client,
            )
        return self._client

    async def attempt(
        self, env: VerifiersEnv, item: dict[str, Any], temperature: float
    ) -> list[Rollout]:
        size = env.config.group_size
        sampling = {
            "temperature": temperature,
            "max_completion_tokens": env.config.max_token_length,
        }
        return await env.environment.group(
            item,
            size,
            self._client_for(env),
            env.server.servers[0].config.model_name,
            sampling,
            self._max_concurrent or size,
        )

    def time_limit_s(self, env: VerifiersEnv) -> float | None:
        return None  # the client's per-request timeout bounds each call

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        return sft_tokens(tokenizer, messages, rollout.finish_reason)

    def group_meta(self, env: VerifiersEnv) -> dict[str, Any]:
        return {}
