"""A group's rollouts made into atroposlib's ``ScoredDataGroup``, or dropped with the reason.

The env holds one (``VerifiersEnv.groups``): it keeps what spans groups (the failures in a row
that fail a run, the range of every score, which words an identical group's drop). The events
a group line makes once atroposlib has judged it are read back here too, beside the META that
this module writes into it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from atroposlib.envs.base import BaseEnvConfig, ScoredDataGroup

from vftui import stats
from vftui.collector.envs.base import Rollout, metrics_of, unscorable
from vftui.collector.envs.messages import template_messages
from vftui.collector.modes import Rollouts
from vftui.collector.tokens import ChatTemplateTokenizer, TemplateMismatch
from vftui.errors import RunFailed
from vftui.events import Event, GroupCollected, GroupDropped
from vftui.group_format import META


class GroupAssembly:
    def __init__(
        self,
        config: BaseEnvConfig,
        env_name: str,
        tokenizer: ChatTemplateTokenizer,
        *,
        emit: Callable[[Event], None],
        max_retries: int,
        extra_meta: dict[str, Any],
    ) -> None:
        self._config = config  # the env's own: read as each group is made, as atroposlib sets it
        self._env_name = env_name
        self._tokenizer = tokenizer
        self._emit = emit
        self._max_retries = max_retries
        self._extra_meta = extra_meta
        self._failures_in_a_row = 0  # more than --retries fail the run: the failure is systematic
        self._score_range: tuple[float, float] | None = None  # of every scored group

    def scored(
        self,
        item: dict[str, Any],
        rollouts: list[Rollout],
        mode: Rollouts,
        temperature: float,
        started: tuple[float, float],
        began: dict[str, Any],
    ) -> ScoredDataGroup | None:
        """The group, or None once it was dropped (a ``GroupDropped`` emitted) as no training data.

        A reward function that failed, a reward that is not finite or tokens that do not match the
        generation drop it, with the reason; ``started`` is when its rollouts began (wall clock,
        monotonic), ``began`` what ``mode`` recorded of it then.
        """
        if failure := next((r.reward_failure for r in rollouts if r.reward_failure), None):
            self._failed(item, f"reward function '{failure[0]}'", failure[1])
            return None
        try:
            group, tokens_meta = self._tokenized(rollouts, mode)
        except TemplateMismatch as e:  # scored, but the trainer would get tokens it was not sent
            self._failed(
                item,
                "building the token sequence",
                str(e),
                [r.reward for r in rollouts],
                [r.turns for r in rollouts],
            )
            return None
        metrics = metrics_of(rollouts)
        if (
            bad := unscorable(group["scores"], metrics)
        ) is not None:  # a rubric of its own, unwatched
            self._failed(item, *bad)
            return None
        group["scores"] = [
            float(s) for s in group["scores"]
        ]  # a numpy float is a score, and JSON as a float
        metrics = {name: [float(v) for v in values] for name, values in metrics.items()}
        self._failures_in_a_row = 0
        self._score_range = stats.widen(self._score_range, group["scores"])
        group["generation_params"] = {
            "temperature": temperature,
            "max_tokens": self._config.max_token_length,
        }
        group[META] = {
            "env": self._env_name,
            "item": item["_item"],
            "example_id": item.get("example_id"),
            "metrics": metrics,
            "turns": [r.turns for r in rollouts],
            "finish_reasons": [r.finish_reason for r in rollouts],
            **tokens_meta,
            "started_at": started[0],
            "elapsed_s": round(time.monotonic() - started[1], 4),
            **began,
            **self._extra_meta,
        }
        return group

    def _tokenized(
        self, rollouts: list[Rollout], mode: Rollouts
    ) -> tuple[ScoredDataGroup, dict[str, Any]]:
        """The group's tokens, masks (and logprobs), scores and messages, with the tools the model was sent."""
        group: ScoredDataGroup = {"tokens": [], "masks": [], "scores": [], "messages": []}
        logprobs, stripped = [], []
        for rollout in rollouts:
            if rollout.tools:
                group.setdefault(
                    "tools", rollout.tools
                )  # the schemas the model was sent, for SFT tools
            tokenizer = self._tokenizer.with_tools(
                rollout.tools
            )  # the trained prompt shows them too
            tokenized = mode.tokenize(tokenizer, template_messages(rollout.messages), rollout)
            group["tokens"].append(tokenized.tokens)
            group["masks"].append(tokenized.masks)
            group["scores"].append(rollout.reward)
            group["messages"].append(rollout.messages)
            logprobs.append(tokenized.logprobs)
            stripped.append(tokenized.stripped_end_of_turn)
        if mode.logprobs:
            group["inference_logprobs"] = logprobs
        return group, {"stripped_end_of_turn": stripped}

    def _failed(
        self,
        item: dict[str, Any],
        what: str,
        error: str,
        scores: list[float] | None = None,
        turns: list[int] | None = None,
    ) -> None:
        """A group that cannot be training data (a reward function raised, which verifiers scores 0;
        a reward that is not finite; tokens that do not match the generation): report and drop it.
        The same failure in more than --retries groups in a row fails the run: it is systematic."""
        self._failures_in_a_row += 1
        if self._failures_in_a_row > self._max_retries:
            raise RunFailed(
                f"{what} failed in {self._failures_in_a_row} groups in a row; last error: {error}"
            )
        self._emit(
            GroupDropped(item["_item"], f"{what} failed: {error}", scores or [], {}, turns or [])
        )

    def dropped(self, group: ScoredDataGroup, max_token_len: int) -> GroupDropped:
        """A scored group atroposlib would not write, and why (``max_token_len``: its trainer's)."""
        meta = group[META]
        return GroupDropped(
            meta["item"],
            self._drop_reason(group, max_token_len),
            list(group["scores"]),
            meta["metrics"],
            meta["turns"],
        )

    def _drop_reason(self, group: ScoredDataGroup, max_token_len: int) -> str:
        if self._config.ensure_scores_are_not_same and len(set(group["scores"])) == 1:
            return stats.identical_kind(group["scores"][0], self._score_range)
        if max_token_len > 0 and any(len(t) >= max_token_len for t in group["tokens"]):
            return f"a sequence reached the trainer's max_token_len ({max_token_len})"
        return "malformed group"


def collected(group: ScoredDataGroup, index: int) -> GroupCollected:
    """The event of a group written as the run's ``index``-th."""
    meta = group[META]
    return GroupCollected(
        index=index,
        item=meta["item"],
        example_id=meta["example_id"],
        scores=list(group["scores"]),
        metrics=meta["metrics"],
        turns=meta["turns"],
        tokens=group["tokens"],
        masks=group["masks"],
        messages=group["messages"],
        finish_reasons=meta["finish_reasons"],
        temperature=group["generation_params"]["temperature"],
        started_at=meta["started_at"],
        elapsed_s=meta["elapsed_s"],
        logprobs=group.get("inference_logprobs"),
    )
