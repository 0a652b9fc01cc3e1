"""How big an answer from the endpoint may be: what its request asked for, and never more.

An endpoint that ignores ``max_tokens`` (or a gzip body that inflates a thousandfold) would
otherwise hand the run a body of any size, held whole while it is parsed, tokenized and written.
So a rollout is bounded by its turns times the tokens each turn asks for (``--max-tokens``), and
each answer is held to that as it is read: its decoded body to ``ENVELOPE_BYTES`` plus
``BYTES_PER_TOKEN`` for every completion token asked (more with logprobs or streaming), never
past ``--max-response-mb``; and an answer whose ``usage`` counts more completion tokens than were
asked is refused. Either is a failed attempt, retried like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypeGuard

ENVELOPE_BYTES = (
    64 * 1024
)  # an answer's JSON besides its texts: ids, roles, finish reasons, usage, an error
BYTES_PER_TOKEN = (
    128  # the most one generated token takes in an answer's JSON: a long run of spaces, escapes
)
BYTES_PER_LOGPROB = (
    512  # one logprob entry (token, bytes, logprob) when the request asks for logprobs
)
BYTES_PER_EVENT = 512  # one server-sent event a token when the request streams


@dataclass(frozen=True)
class Asked:
    """What a request asked of the endpoint: completion tokens over all its choices (None: no limit)."""

    tokens: int | None = None
    bytes_per_token: int = BYTES_PER_TOKEN

    @classmethod
    def of(cls, body: bytes) -> Asked:
        """From a request's JSON body; a body that is not a completion request asks for nothing in particular."""
        try:
            sent = json.loads(body)
        except (ValueError, RecursionError):
            sent = None
        if not isinstance(sent, dict):
            return cls()
        limit, choices = (
            sent.get("max_completion_tokens", sent.get("max_tokens")),
            sent.get("n") or 1,
        )
        if not (_count(limit) and _count(choices)):
            return cls()
        per_token = BYTES_PER_TOKEN
        if sent.get("logprobs"):
            top = sent.get("top_logprobs")
            per_token += BYTES_PER_LOGPROB * (1 + (top if _count(top) else 0))
        if sent.get("stream"):
            per_token += BYTES_PER_EVENT
        return cls(limit * choices, per_token)

    def body_cap(self, ceiling: int) -> tuple[int, str]:
        """The most bytes the decoded body may take (``ceiling`` at most), and what passing it means."""
        if (
            self.tokens is not None
            and (cap := ENVELOPE_BYTES + self.tokens * self.bytes_per_token) < ceiling
        ):
            return cap, (
                f"the response body passed {cap:,} bytes, more than {self.tokens:,} tokens can take "
                "(--max-tokens): the endpoint ignores the token limit"
            )
        return ceiling, f"the response body passed {ceiling:,} bytes (--max-response-mb)"

    def overrun(self, body: bytes) -> str | None:
        """Why an answer holds more than was asked, by its own count; None when it does not say so."""
        if self.tokens is None:
            return None
        try:
            generated = (json.loads(body).get("usage") or {}).get("completion_tokens")
        except (ValueError, AttributeError, RecursionError):
            return None  # not a completion: the client says what is wrong with it
        if _count(generated) and generated > self.tokens:
            return (
                f"the answer has {generated:,} completion tokens where {self.tokens:,} were asked for "
                "(--max-tokens): the endpoint ignores the token limit"
            )
        return None


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
