"""vftui/alphabet-tools-classic: the built-in tool-calling environment as a classic ``vf.ToolEnv`` (verifiers 0.3).

The model compares names with ``compare_names`` (several calls in one turn), counts the
first one's letters with ``count_letters`` and answers ``<answer>Name, N</answer>``: a
call → result → call → result → answer conversation. ``correct_answer`` (weight 1.0)
scores it; ToolEnv adds its own tool-call counts as metrics.
"""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

from vftui.sim.task import assistant_texts
from vftui.sim.tool_task import SYSTEM_PROMPT, TOOLS, make_examples, score


async def correct_answer(completion, answer, **kwargs) -> float:
    texts = assistant_texts(completion)
    return score(texts[-1] if texts else "", answer)


def load_environment(
    num_examples: int = 200, min_names: int = 2, max_names: int = 4, seed: int = 0
) -> vf.Environment:
    """The verifiers entry point; every argument can be passed as ``--env-args`` JSON."""
    if num_examples < 1 or min_names < 1 or max_names < min_names:
        raise ValueError("alphabet-tools needs num_examples >= 1 and 1 <= min_names <= max_names")
    rows = make_examples(num_examples, min_names, max_names, seed)
    return vf.ToolEnv(
        dataset=Dataset.from_list(rows),
        system_prompt=SYSTEM_PROMPT,
        tools=list(TOOLS),
        rubric=vf.Rubric(funcs=[correct_answer], weights=[1.0]),
        max_turns=4,
    )
