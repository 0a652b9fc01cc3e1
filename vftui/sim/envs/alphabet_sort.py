"""vftui/alphabet-sort: the embedded default's environment, a verifiers v1 taskset.

The model is given a few names and must return them sorted, one per line, inside
``<alphabetical_sorted>`` tags. With ``max_turns > 1`` the Env hands over more names each
turn (it plays the user, as verifiers' own alphabet_sort does), and the model must re-sort
the whole list every time. Two rewards, ``sorted_correctly`` (weight 1.0) and ``format_ok``
(weight 0.2), vary between rollouts. The same task as the classic twin
(``alphabet_sort_classic.py``) with the same ``--env-args``; ``sim/task.py`` holds both.
"""

from __future__ import annotations

from typing import Literal

import verifiers.v1 as vf
from pydantic import Field

from vftui.sim.task import (
    EVAL_SEED_OFFSET,
    FIRST_TURN,
    LATER_TURN,
    SYSTEM_PROMPT,
    format_ok_score,
    make_examples,
    sorted_correctly_score,
)


class AlphabetSortConfig(vf.TasksetConfig):
    num_examples: int = Field(200, ge=1)
    min_names: int = Field(3, ge=1)
    max_names: int = Field(6, ge=1)
    max_turns: int = Field(1, ge=1)
    seed: int = 0
    split: Literal["train", "eval"] = "train"  # a v1 taskset picks its split through its config
    num_eval_examples: int = Field(100, ge=1)


class AlphabetSortData(vf.TaskData):
    batches: list[list[str]]


class AlphabetSortTask(vf.Task[AlphabetSortData]):
    @vf.reward(weight=1.0)
    async def sorted_correctly(self, trace: vf.Trace) -> float:
        return sorted_correctly_score(trace.messages, self.data.batches)

    @vf.reward(weight=0.2)
    async def format_ok(self, trace: vf.Trace) -> float:
        return format_ok_score(trace.messages)


class AlphabetSortEnv(vf.SingleAgentEnv):
    """Plays the user: the first batch of names, then one more batch each turn."""

    async def run(self, task, agents) -> None:
        async with agents.agent.interaction(task) as interaction:
            for turn, batch in enumerate(task.data.batches):
                ask = FIRST_TURN if turn == 0 else LATER_TURN
                if (await interaction.turn(ask.format(names=", ".join(batch)))).terminated:
                    break


class AlphabetSortTaskset(vf.Taskset[AlphabetSortTask, AlphabetSortConfig]):
    def load(self):
        c = self.config
        if c.max_names < c.min_names:
            raise ValueError("alphabet-sort needs min_names <= max_names")
        evaluating = c.split == "eval"
        count = c.num_eval_examples if evaluating else c.num_examples
        seed = c.seed + EVAL_SEED_OFFSET if evaluating else c.seed
        for idx, row in enumerate(
            make_examples(count, c.min_names, c.max_names, c.max_turns, seed)
        ):
            yield AlphabetSortTask(
                AlphabetSortData(
                    idx=idx,
                    prompt=None,
                    system_prompt=SYSTEM_PROMPT,
                    batches=row["info"]["batches"],
                ),
                c.task,
            )


__all__ = ["AlphabetSortEnv", "AlphabetSortTaskset"]
