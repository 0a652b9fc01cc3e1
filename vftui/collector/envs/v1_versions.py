"""What the in-process v1 runner needs from verifiers that differs between its versions, in one place.

verifiers 0.3.1 and 0.4.0 share the v1 loaders, decorators and ``Task.score`` byte for byte;
they differ in the message graph's signatures (0.4 keys a turn's prefix by its tools too),
where the plain chat harness's MCP content conversion lives, and the mcp package they
serve tools with (mcp<2's FastMCP with 0.3.1; mcp 2's MCPServer, whose tool calls take a
context, with 0.4). Two private names are used, in both versions:
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
TOOLS_IN_PREFIX = VERIFIERS >= (
    0,
    4,
)  # 0.4's graph keys a prefix by its tools; 0.3's commits take them
MCP2 = int(version("mcp").split(".")[0]) >= 2

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


def tool_manager() -> Any:
    """What an MCP server keeps its tools in (not the server itself: FastMCP's configures logging to stderr)."""
    if MCP2:
        from mcp.server.mcpserver.tools import ToolManager
    else:
        from mcp.server.fastmcp.tools import ToolManager
    return ToolManager()


async def call_tool(manager: Any, name: str, arguments: dict[str, Any]) -> Any:
    """A tool's result as the content blocks its server would answer (mcp 2's calls take a request context
    and give a CallToolResult; mcp<2's give the blocks, or blocks and structured content)."""
    if MCP2:
        return (await manager.call_tool(name, arguments, context=None, convert_result=True)).content
    result = await manager.call_tool(name, arguments, convert_result=True)
    return result[0] if isinstance(result, tuple) else result


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
