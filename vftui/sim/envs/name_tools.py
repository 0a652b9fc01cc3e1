"""The tools of vftui/alphabet-tools as a verifiers v1 Toolset (an MCP server when verifiers runs it).

Served in-process by vftui; ``python -m vftui.sim.envs.name_tools`` is how verifiers' own
eval starts it as a server. The calls each rollout makes are counted in its state.
"""

from __future__ import annotations

import verifiers.v1 as vf

from vftui.sim.tool_task import compare_names, count_letters


class CallCount(vf.State):
    calls: int = 0


class NameTools(vf.Toolset[vf.ToolsetConfig, CallCount]):
    TOOL_PREFIX = None  # the model sees compare_names and count_letters, as in the classic twin

    @vf.tool
    def compare_names(self, first: str, second: str) -> str:
        """Return whichever of two names comes first alphabetically."""
        self.state.calls += 1
        return compare_names(first, second)

    @vf.tool
    def count_letters(self, name: str) -> int:
        """Return how many letters a name has."""
        self.state.calls += 1
        return count_letters(name)


if __name__ == "__main__":
    NameTools.run()
