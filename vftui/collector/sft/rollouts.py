"""sft: a group's rollouts from any OpenAI-compatible endpoint, and their tokens from the chat template."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from vftui.collector.envs.base import Rollout
from vftui.collector.modes import Sampling
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized, sft_tokens
from vftui.loopback import unproxied


class SftRollouts:
    """Each group in one call to the environment; every request through one shared client.

    ``http_client`` is the run's (``sft.traffic``: the request limit, rate limits and
    figures); without one (atroposlib's own command) the OpenAI client's own is used.
    """

    logprobs = False

    def __init__(
        self, sampling: Sampling, http_client: Any = None, max_concurrent: int | None = None
    ) -> None:
        self._sampling = sampling
        self._http_client = http_client
        self._max_concurrent = max_concurrent
        self._client: AsyncOpenAI | None = None

    def _client_for(self) -> AsyncOpenAI:
        if self._client is None:
            endpoint = self._sampling.endpoint
            http_client = self._http_client
            if http_client is None:  # the OpenAI client's own, but loopback never through a proxy
                http_client = DefaultAsyncHttpxClient(**unproxied(endpoint.base_urls[0]))
            # retries are ours (so each one is reported), as are time limits (the transport's)
            self._client = AsyncOpenAI(
                base_url=endpoint.base_urls[0],
                api_key=endpoint.api_key or "EMPTY",
                timeout=endpoint.timeout,
                max_retries=0,
                http_client=http_client,
            )
        return self._client

    async def attempt(self, item: dict[str, Any], temperature: float) -> list[Rollout]:
        sampling = self._sampling
        size = sampling.group_size
        return await sampling.environment.group(
            item,
            size,
            self._client_for(),
            sampling.endpoint.model,
            {"temperature": temperature, "max_completion_tokens": sampling.max_tokens},
            self._max_concurrent or size,
        )

    def time_limit_s(self) -> float | None:
        return None  # the client's per-request timeout bounds each call

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        return sft_tokens(tokenizer, messages, rollout.finish_reasons)

    def group_meta(self) -> dict[str, Any]:
        return {}
