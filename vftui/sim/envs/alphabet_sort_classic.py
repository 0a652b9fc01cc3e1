"""vftui/alphabet-sort-classic: the built-in alphabet-sort as a classic verifiers environment (verifiers 0.3).

The model is given a few names and must return them sorted, one per line, inside
``<alphabetical_sorted>`` tags. With ``max_turns > 1`` the environment answers each turn
with more names, and the model must re-sort the whole list every time, so a rollout is a
real multi-turn conversation. Two reward functions (``sorted_correctly``, weight 1.0, and
``format_ok``, weight 0.2) give rewards that vary between rollouts.

It is a plain classic verifiers module (``load_environment``); the default run uses its v1
twin, ``vftui/alphabet-sort`` (``alphabet_sort.py``).
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

from vftui.sim.task import (
    EVAL_SEED_OFFSET,
    LATER_TURN,
    SYSTEM_PROMPT,
    format_ok_score,
    make_examples,
    sorted_correctly_score,
)


async def sorted_correctly(completion, info, **kwargs) -> float:
    return sorted_correctly_score(completion, info["batches"])


async def format_ok(completion, **kwargs) -> float:
    return format_ok_score(completion)


class AlphabetSortEnv(vf.MultiTurnEnv):
    """Each environment turn hands over the next batch of names."""

    async def env_response(self, messages, state, **kwargs):
        turn = len(state["trajectory"])
        batches = state["info"]["batches"]
        names = ", ".join(batches[turn]) if turn < len(batches) else ""
        return [vf.UserMessage(content=LATER_TURN.format(names=names))]


def load_environment(
    num_examples: int = 200,
    min_names: int = 3,
    max_names: int = 6,
    max_turns: int = 1,
    seed: int = 0,
    num_eval_examples: int = 100,
) -> vf.Environment:
    """The verifiers entry point; every argument can be passed as ``--env-args`` JSON."""
    if (
        num_examples < 1
        or num_eval_examples < 1
        or min_names < 1
        or max_names < min_names
        or max_turns < 1
    ):
        raise ValueError(
            "alphabet-sort needs num_examples >= 1, 1 <= min_names <= max_names, max_turns >= 1"
        )
    rows = make_examples(num_examples, min_names, max_names, max_turns, seed)
    rubric = vf.Rubric(funcs=[sorted_correctly, format_ok], weights=[1.0, 0.2])
    return AlphabetSortEnv(
        dataset=Dataset.from_list(rows),
        eval_dataset=Dataset.from_list(
            make_examples(
                num_eval_examples, min_names, max_names, max_turns, seed + EVAL_SEED_OFFSET
            )
        ),
        system_prompt=SYSTEM_PROMPT,
        rubric=rubric,
        max_turns=max_turns,
    )
