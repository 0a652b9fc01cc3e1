"""What the in-process v1 runner needs from verifiers that differs between its versions, in one place.

verifiers 0.3.1 and 0.4.0 share the v1 loaders, decorators and ``Task.score`` byte for byte;
they differ in the message graph's signatures (0.4 keys a turn's prefix by its tools too),
where the plain chat harness's MCP content conversion lives, and the mcp package's field
names (mcp<2 with 0.3.1, mcp 2 with 0.4). Two private names are used, in both versions:
a tool server's per-call state (``mcp.server._call_state``, which a tool's ``self.state``
reads) and a Toolset's resources (``Toolset._exit_stack``, which its server enters).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

from verifiers.v1 import graph
from verifiers.v1.mcp import server as mcp_server

VERIFIERS = tuple(int(part) for part in version("verifiers").split(".")[:2])
TOOLS_IN_PREFIX = VERIFIERS >= (0, 4)  # 0.4's graph keys a prefix by its tools; 0.3's commits take them

if VERIFIERS >= (0, 4):
    from verifiers.v1.harnesses.utils.mcp import mcp_content_to_chat_content
else:
    from verifiers.v1.harnesses.null.program import mcp_content_to_chat_content


def prepare_turn(trace: Any, request: Any) -> Any:
    if TOOLS_IN_PREFIX:
        return graph.prepare_turn(trace, request.messages, request.tools)
    return graph.prepare_turn(trace, request.messages)


def commit_turn(turn: Any, response: Any, request: Any) -> Any:
    return turn.commit(response) if TOOLS_IN_PREFIX else turn.commit(response, request.tools)


def commit_prompt(trace: Any, request: Any) -> None:
    """A request a stop refused: its prompt goes into the graph without a reply."""
    turn = prepare_turn(trace, request)
    turn.commit_prompt() if TOOLS_IN_PREFIX else turn.commit_prompt(request.tools)


def chat_content(blocks: Any) -> Any:
    """A tool's MCP result as chat content, as verifiers' plain chat harness writes it."""
    return mcp_content_to_chat_content(blocks)


def tool_parameters(tool: Any) -> dict[str, Any]:
    """A FastMCP tool's JSON schema (``parameters`` in mcp<2, ``input_schema`` in mcp 2)."""
    schema = getattr(tool, "parameters", None)
    return schema if schema is not None else tool.input_schema


@contextlib.contextmanager
def tool_state(state: Any) -> Iterator[None]:
    """A tool call whose ``self.state`` is ``state`` (the calling rollout's)."""
    token = mcp_server._call_state.set(state)
    try:
        yield
    finally:
        mcp_server._call_state.reset(token)


def toolset_resources(toolset: Any) -> contextlib.AbstractAsyncContextManager:
    """What a toolset's server enters for its life (clients it opened in ``setup``)."""
    return toolset._exit_stack
