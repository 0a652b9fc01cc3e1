"""Rollouts through atroposlib's ManagedServer, one per rollout, with every turn recorded.

verifiers drives the conversation; the ManagedServer (picked by atroposlib's server
manager, so several inference servers are balanced) turns each chat request into a
token-level ``/generate`` call. The recorder sits between the two and keeps what the
server returned for each call (token ids, logprobs, finish reason), from which
``tokens.rl_tokens`` builds the rollout's one sequence.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from atroposlib.envs.server_handling.managed_server import ManagedServerAdapter

from vftui.collector.tokens import Turn
from vftui.errors import UserError


def check_tool_parser(env_id: str, parser: str | None) -> None:
    """rl with a tool environment: calls are parsed out of generated text, or they are lost.

    atroposlib's ManagedServer quietly turns tool parsing off when vLLM's parsers cannot be
    imported, so an environment with tools refuses to start instead.
    """
    if not parser:
        raise UserError(
            f"environment '{env_id}' calls tools; rl mode reads the calls from the generated text and needs "
            "--tool-parser NAME (vLLM's parser for your model, e.g. hermes)"
        )
    from atroposlib.envs.server_handling import tool_call_translator

    if not tool_call_translator.VLLM_AVAILABLE:
        raise UserError(
            f"--tool-parser {parser} needs vLLM's tool parsers, which are not installed (pip install vllm)"
        )
    try:
        tool_call_translator.ToolParserManager.get_tool_parser(parser)
    except KeyError as e:
        raise UserError(f"--tool-parser {parser} is not one of vLLM's tool parsers") from e


class TurnRecorder:
    """Stands in for the APIServer under a ManagedServer: passes calls through, keeps turns."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self.turns: list[Turn] = []

    async def tokens_and_logprobs_completion(self, **kwargs: Any):
        prompt, outputs, logprobs, reasons = await self._server.tokens_and_logprobs_completion(
            **kwargs
        )
        reason = reasons[0] if reasons else None
        self.turns.append(
            Turn(
                list(outputs[0]),
                [float(x) for x in logprobs[0]],
                reason.get("type") if isinstance(reason, dict) else reason,
            )
        )
        return prompt, outputs, logprobs, reasons

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class ChatPostAdapter(ManagedServerAdapter):
    """verifiers 0.3 sends chat requests as ``client.post("/chat/completions", body=...)``,
    which atroposlib 0.4's adapter refuses; this answers that one path through the
    ManagedServer and returns the raw response verifiers parses."""

    async def post(self, path: str, body: dict, cast_to: type, **kwargs: Any):
        if path.rstrip("/") != "/chat/completions":
            return await super().post(path, body, cast_to)
        completion = await self._managed.chat_completion(**body)
        return httpx.Response(200, content=completion.model_dump_json().encode())


@contextlib.asynccontextmanager
async def recorded_client(
    server_manager: Any, tokenizer: Any
) -> AsyncIterator[tuple[Any, TurnRecorder]]:
    """An AsyncOpenAI-like client for one rollout, and the recorder of its turns."""
    async with server_manager.managed_server(tokenizer=tokenizer) as managed:
        recorder = TurnRecorder(managed.server)
        managed.server = recorder
        yield ChatPostAdapter(managed, base_url=str(recorder.config.base_url)), recorder
