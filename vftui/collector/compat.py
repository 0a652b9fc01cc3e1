"""The one place that knows verifiers / atroposlib / transformers version differences.

Checked against verifiers 0.3.x (the classic Environment API, served from
``verifiers.legacy``), atroposlib 0.4.x and transformers 5.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import logging
import math
from typing import Any

from openai import AsyncOpenAI

SUPPORTED = {"verifiers": ("0.3.0", "0.4.0"), "atroposlib": ("0.4.0", "0.5.0")}


class ChatTemplateTokenizer:
    """A tokenizer whose ``apply_chat_template`` returns token ids, as atroposlib expects.

    transformers 5 made ``apply_chat_template`` return a dict by default; atroposlib's
    ``tokenize_for_trainer`` then takes the dict's keys for tokens and silently produces
    two-element masks. ``with_tools`` binds the tool schemas a rollout's model was sent,
    so every rendering atroposlib asks for shows them as the model saw them. Everything
    else is delegated unchanged.
    """

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None) -> None:
        self._tokenizer = tokenizer
        self._tools = tools or None

    def with_tools(self, tools: list[dict[str, Any]] | None) -> ChatTemplateTokenizer:
        return ChatTemplateTokenizer(self._tokenizer, tools) if tools else self

    def apply_chat_template(self, conversation, **kwargs):
        kwargs.setdefault("return_dict", False)
        kwargs.setdefault("tokenize", True)
        if self._tools:
            kwargs.setdefault("tools", self._tools)
        return self._tokenizer.apply_chat_template(conversation, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def chat_client(base_url: str, api_key: str, timeout: float, http_client: Any = None):
    """A verifiers client over AsyncOpenAI; retries are ours (so each one is reported)."""
    import verifiers as vf

    openai = AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0, http_client=http_client)
    return vf.OpenAIChatCompletionsClient(openai)


def auth_errors() -> tuple[type[BaseException], ...]:
    """Errors verifiers lets escape a rollout: a rejected key is not worth retrying."""
    from openai import AuthenticationError, PermissionDeniedError

    return (AuthenticationError, PermissionDeniedError)


def load_vf_environment(name: str, args: dict[str, Any]):
    import verifiers as vf

    _ask_git_once()
    # verifiers logs a failure before raising it; ours is the one sentence the user reads
    loader_log = logging.getLogger("verifiers.legacy.utils.env_utils")
    level = loader_log.level
    loader_log.setLevel(logging.CRITICAL + 1)
    try:
        return vf.load_environment(name, **args)
    finally:
        loader_log.setLevel(level)


def _ask_git_once() -> None:
    """verifiers runs ``git rev-parse`` twice on every ``generate`` call (once per group) for
    its own and the env's commit; neither changes while a run lives, and with dozens of
    groups a second the forks were a few percent of the collector's CPU."""
    from verifiers.legacy.utils import save_utils

    if not hasattr(save_utils.get_version_info, "cache_info"):
        save_utils.get_version_info = functools.lru_cache(maxsize=8)(save_utils.get_version_info)


REWARD_FAILURES: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "vftui_reward_failures", default=None
)
"""Set per group: its rollouts (tasks started inside the group's context) record here."""


def watch_reward_functions(vf_env: Any) -> None:
    """Record a reward function that raises, which verifiers logs and silently scores 0.

    One that returns NaN or infinity raises here: a non-finite reward poisons a group's
    advantages and is not JSON.

    Each function keeps its signature (verifiers picks its arguments from it) and name;
    the failure still scores 0 for verifiers, and the group's ``REWARD_FAILURES`` list
    tells the collector, which reports the group instead of training on the 0.
    """
    envs, rubrics = [vf_env], []
    while envs:  # an EnvGroup keeps its environments, each with its own rubric, in env_map
        env = envs.pop()
        envs.extend(getattr(env, "env_map", {}).values())
        rubrics.append(env.rubric)
    while rubrics:
        rubric = rubrics.pop()
        rubrics.extend(getattr(rubric, "rubrics", []))
        rubric.funcs = [_watched(func) for func in getattr(rubric, "funcs", [])]


def _watched(func: Any) -> Any:
    # verifiers keys metrics by __name__; a callable without one is left as it is
    if getattr(func, "_vftui_watched", False) or not hasattr(func, "__name__"):
        return func

    @functools.wraps(func)
    async def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            result = func(*args, **kwargs)
            result = await result if inspect.isawaitable(result) else result
            if isinstance(result, (int, float)) and not math.isfinite(result):
                raise ValueError(f"returned {result}, not a finite number")
        except Exception as e:
            failures = REWARD_FAILURES.get()
            if failures is not None:
                failures.append((func.__name__, f"{type(e).__name__}: {e}"))
            raise
        return result

    watched._vftui_watched = True
    return watched


def reward_function_names(vf_env: Any) -> list[str]:
    return list(vf_env.rubric._get_reward_func_names())


def reward_weights(vf_env: Any) -> dict[str, float]:
    """Each reward function's weight in the total, by name."""
    return dict(zip(reward_function_names(vf_env), map(float, vf_env.rubric._get_reward_weights()), strict=False))


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
        data = message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else dict(message)
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
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
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
            calls = [{**call, "function": {**call["function"], "arguments": _parsed(call["function"]["arguments"])}}
                     for call in message["tool_calls"]]
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
        function = {"name": data["name"], "description": data.get("description", ""),
                    "parameters": data.get("parameters", {"type": "object", "properties": {}})}
        if data.get("strict") is not None:
            function["strict"] = data["strict"]
        tools.append({"type": "function", "function": function})
    return tools


def env_tools(vf_env: Any) -> list[dict[str, Any]]:
    """The tools an environment offers every rollout (none for most environments)."""
    return openai_tools(getattr(vf_env, "tool_defs", None))


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def finish_reason(output: dict[str, Any]) -> str | None:
    """The last trajectory step's finish reason (``stop``, ``length``...)."""
    trajectory = output.get("trajectory") or []
    if not trajectory:
        return None
    message = _field(_field(trajectory[-1], "response"), "message")
    return _field(message, "finish_reason")


def num_turns(output: dict[str, Any]) -> int:
    return len(output.get("trajectory") or [])


def rollout_error(output: dict[str, Any]) -> str | None:
    """A rollout's error as one line, or None when it succeeded."""
    error = output.get("error")
    if not error:
        return None
    if isinstance(error, dict):
        text = error.get("error_chain_repr") or error.get("message") or str(error)
    else:
        text = str(error)
    links = text.split(" -> ")
    while len(links) > 1 and links[0].endswith("()"):
        links.pop(0)  # wrappers such as ModelError() that add no information
    return " -> ".join(links)


QUIET_LOGGERS = ("verifiers",)
"""Loggers that do not propagate to the root logger (verifiers disables propagation)."""


def sft_generate_kwargs(
    inputs: list[dict[str, Any]], client: Any, model: str, temperature: float,
    max_tokens: int, max_concurrent: int,
) -> dict[str, Any]:
    """``Environment.generate`` arguments for one group in process (sft) mode."""
    return {
        "inputs": inputs,
        "client": client,
        "model": model,
        "sampling_args": {"temperature": temperature, "max_completion_tokens": max_tokens},
        "max_concurrent": max_concurrent,
        "independent_scoring": True,
        "state_columns": ["trajectory"],
        "on_start": lambda *args, **kwargs: None,
        "on_log": lambda message: None,
    }


def rollout_input(item: dict[str, Any]) -> dict[str, Any]:
    """A dataset row as a rollout input (``task`` must be an object or absent in 0.3)."""
    row = {
        "prompt": item["prompt"],
        "example_id": item["example_id"],
        "answer": item.get("answer", ""),
        "info": item.get("info") or {},
    }
    if isinstance(item.get("task"), dict):
        row["task"] = item["task"]
    return row
