"""vftui/alphabet-tools: the built-in tool-calling environment, a verifiers v1 taskset with a Toolset.

The model compares names with ``compare_names`` (several calls in one turn), counts the
first one's letters with ``count_letters`` and answers ``<answer>Name, N</answer>``: a
call → result → call → result → answer conversation. ``correct_answer`` scores it; the
tool calls each rollout made are a metric. The tools are the task's own (one server per
rollout, ``name_tools.py``).
"""

from __future__ import annotations

import verifiers.v1 as vf
from pydantic import Field

from vftui.sim.envs.name_tools import CallCount, NameTools
from vftui.sim.tool_task import QUESTION, SYSTEM_PROMPT, make_examples, score

MAX_TURNS = 4


class AlphabetToolsConfig(vf.TasksetConfig):
    num_examples: int = Field(200, ge=1)
    min_names: int = Field(2, ge=1)
    max_names: int = Field(4, ge=1)
    seed: int = 0


class AlphabetToolsData(vf.TaskData):
    answer: str


class AlphabetToolsTask(vf.Task[AlphabetToolsData, CallCount]):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        return [NameTools(vf.ToolsetConfig())]

    @vf.stop
    async def enough_turns(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= MAX_TURNS

    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        return score(trace.last_reply, self.data.answer)

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(trace.state.calls)


class AlphabetToolsTaskset(vf.Taskset[AlphabetToolsTask, AlphabetToolsConfig]):
    def load(self):
        c = self.config
        if c.max_names < c.min_names:
            raise ValueError("alphabet-tools needs min_names <= max_names")
        for idx, row in enumerate(make_examples(c.num_examples, c.min_names, c.max_names, c.seed)):
            names = row["info"]["names"]
            yield AlphabetToolsTask(
                AlphabetToolsData(
                    idx=idx,
                    prompt=QUESTION.format(names=", ".join(names)),
                    system_prompt=SYSTEM_PROMPT,
                    answer=row["answer"],
                ),
                c.task,
            )


__all__ = ["AlphabetToolsTaskset"]
