"""Messages and tools in the OpenAI chat format, from whatever form an environment hands out.

The saved groups keep OpenAI's form (what SFT tools and chat templates read): assistant
``tool_calls`` as ``{"id", "type": "function", "function": {"name", "arguments"}}`` with
the arguments as a JSON string, tool messages with their ``tool_call_id``, and the
``tools`` schemas the model was sent.
"""

from __future__ import annotations

import json
from typing import Any

MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")


def plain_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """verifiers' messages in the OpenAI chat format that chat templates and SFT tools read.

    ``None`` content becomes ``""``; assistant tool calls, which verifiers 0.3 serializes as
    JSON strings of its own flat ``{"id", "name", "arguments"}``, become
    ``{"id", "type": "function", "function": {"name", "arguments"}}``; tool messages keep
    the ``tool_call_id`` that ties each result to its call.
    """
    out = []
    for message in messages or []:
        data = (
            message.model_dump(exclude_none=True)
            if hasattr(message, "model_dump")
            else dict(message)
        )
        data["content"] = _text_of(data.get("content"))
        if data.get("tool_calls"):
            data["tool_calls"] = [openai_tool_call(call) for call in data["tool_calls"]]
        else:
            data.pop("tool_calls", None)
        out.append({k: data[k] for k in MESSAGE_KEYS if k in data})
    return out


def _text_of(content: Any) -> Any:
    """Content as the model saw it: text parts joined (as vLLM joins them), ``None`` as ``""``.

    Parts that are not all text (an image) are left for the chat template to render.
    """
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return "".join(str(p.get("text", "")) for p in content)
    return content or ""


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The saved messages as chat templates read them: tool-call arguments as objects.

    The OpenAI format (what is saved) carries arguments as a JSON string; servers such as
    vLLM parse it before rendering, and templates (Qwen2.5's, Llama 3's) write
    ``arguments | tojson``, so a string would be encoded twice in the trained tokens.
    """
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = [
                {
                    **call,
                    "function": {
                        **call["function"],
                        "arguments": _parsed(call["function"]["arguments"]),
                    },
                }
                for call in message["tool_calls"]
            ]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # not JSON: rendered as the model wrote it


def openai_tool_call(call: Any) -> dict[str, Any]:
    """One tool call, from any of the forms verifiers hands out, in the OpenAI form."""
    if isinstance(call, str):
        call = json.loads(call)
    elif hasattr(call, "model_dump"):
        call = call.model_dump(exclude_none=True)
    function = call.get("function") or call
    arguments = function.get("arguments") or "{}"
    return {
        "id": call.get("id", ""),
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def openai_tools(tool_defs: list[Any] | None) -> list[dict[str, Any]]:
    """verifiers' tool definitions as the OpenAI ``tools`` schemas the endpoint was sent."""
    tools = []
    for tool in tool_defs or []:
        data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else dict(tool)
        if "function" in data:  # already in the OpenAI form
            tools.append(data)
            continue
        function = {
            "name": data["name"],
            "description": data.get("description", ""),
            "parameters": data.get("parameters", {"type": "object", "properties": {}}),
        }
        if data.get("strict") is not None:
            function["strict"] = data["strict"]
        tools.append({"type": "function", "function": function})
    return tools
