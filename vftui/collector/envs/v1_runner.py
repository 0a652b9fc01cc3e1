"""A verifiers v1 episode run in-process, at the cost of a classic rollout.

verifiers' own path starts a Python harness process for every model turn (over a second of
CPU each) and serves tools from processes of their own. Plain chat tasks need neither: here
the model call is the mode's client (the sft endpoint, or rl's ManagedServer), and each
Toolset is served in-process behind FastMCP's ToolManager, with the same schemas, results
and per-rollout state. Everything that decides what a rollout *is* stays verifiers': the
taskset's own Env (``setup``/``run``/``finalize``, so an Env that scripts the user's turns
works), the rollout's limits, ``@vf.stop`` and ``@vf.intercept`` hooks (``RolloutSession``),
the message graph, and ``Task.score``, so the rewards are those verifiers' own eval gives
the same conversation. The requests reproduce verifiers' plain chat (``null``) harness:
a system prompt, the prompt or the conversation so far, and the tools, until a reply
without tool calls. The verifiers names that differ between its versions are in
``v1_versions``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import time
import traceback
import types
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import verifiers.v1 as vf
from openai.types.chat import ChatCompletion
from verifiers.v1.agent import Agents, Segment
from verifiers.v1.clients import EvalClientConfig, ModelContext
from verifiers.v1.dialects import ChatDialect
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.episode import EnvInfo
from verifiers.v1.errors import TaskError
from verifiers.v1.runtimes import SubprocessConfig, make_runtime
from verifiers.v1.session import RolloutLimits, RolloutSession, hook_boundary
from verifiers.v1.state import state_cls
from verifiers.v1.trace import AgentInfo, Error, ModelCall, TimeSpan, Trace, TraceTask
from verifiers.v1.types import ToolMessage, UserMessage
from verifiers.v1.utils.decorators import discover_decorated, invoke

from vftui.collector import scoring_limit
from vftui.collector.envs import v1_versions

DIALECT = ChatDialect()
ChatCall = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""A chat request body in, the endpoint's chat.completion JSON out."""

_ROLLOUT_STATE: contextvars.ContextVar[Any] = contextvars.ContextVar("vftui_v1_state")


# -- tools ---------------------------------------------------------------------------------


class ToolServer:
    """One ``vf.Toolset`` served in-process: its tools' schemas and calls as its MCP server makes them."""

    def __init__(self, toolset: Any) -> None:
        self.toolset = toolset
        self.name = toolset.server_name
        self.manager = v1_versions.tool_manager()
        for fn in discover_decorated(toolset, "tool"):
            self.manager.add_tool(
                _with_rollout_state(fn),
                name=getattr(fn, "tool_name", None) or fn.__name__,
                description=(fn.__doc__ or "").strip() or None,
            )
        self._stack = contextlib.AsyncExitStack()

    async def start(self, task_data: Any = None) -> None:
        """As the toolset's server starts: ``setup``, and for a task-scoped one ``setup_task``."""
        await self._stack.enter_async_context(v1_versions.toolset_resources(self.toolset))
        await self.toolset.setup()
        if task_data is not None:
            await self.toolset.setup_task(task_data)

    async def stop(self) -> None:
        await self._stack.aclose()

    def tools(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(name the model sees, the tool's own name, OpenAI schema), named as verifiers' harness names them."""
        out = []
        for tool in self.manager.list_tools():
            full = f"{self.name}_{tool.name}" if self.name else tool.name
            schema = {
                "type": "function",
                "function": {
                    "name": full,
                    "description": tool.description or "",
                    "parameters": tool.parameters,
                },
            }
            out.append((full, tool.name, schema))
        return out

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's result as chat content; its error as the text its server would answer."""
        try:
            blocks = await v1_versions.call_tool(self.manager, name, arguments)
        except Exception as e:  # noqa: BLE001 - a failing tool answers the model, as over MCP
            return str(e)
        return v1_versions.chat_content(blocks)


def _with_rollout_state(fn: Callable) -> Callable:
    """A tool whose ``self.state`` is the calling rollout's ``trace.state``, as verifiers syncs it."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        with v1_versions.tool_state(_ROLLOUT_STATE.get()):
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

    vars(call)["__signature__"] = inspect.signature(fn)  # the schema is derived from it
    return call


async def start_shared_tools(taskset: Any) -> dict[str, ToolServer]:
    """The taskset-scoped toolsets, one server each for the whole run."""
    servers: dict[str, ToolServer] = {}
    for toolset in type(taskset).toolsets(taskset.config):
        server = ToolServer(toolset)
        await server.start()
        servers[server.name] = server
    return servers


def needs_runtime(task: Any) -> bool:
    """Whether a hook of the task takes a runtime (files, programs): one is made for each rollout then.
    ``vf.Task``'s own ``setup`` and ``finalize`` take one and do nothing: only a task's own counts."""
    hooks = [fn for fn in (task.setup, task.finalize) if _function(fn) not in NO_OP_HOOKS]
    hooks += [*task.hooks("metric"), *task.hooks("reward")]
    hooks += [judge.score for judge in task.plugged_judges()]
    return any(takes_runtime(fn) for fn in hooks)


NO_OP_HOOKS = (vf.Task.setup, vf.Task.finalize)
_TAKES_RUNTIME: tuple[
    weakref.WeakKeyDictionary[Callable, bool], weakref.WeakKeyDictionary[Callable, bool]
] = (weakref.WeakKeyDictionary(), weakref.WeakKeyDictionary())  # by function: called, bound


def takes_runtime(fn: Callable) -> bool:
    """Whether ``fn`` has a ``runtime`` parameter, read once per function (``inspect.signature`` is slow and
    every rollout asks): a bound method by its function; a wrapper made per call is read each time and
    forgotten with it."""
    bound = isinstance(fn, types.MethodType)
    known, key = _TAKES_RUNTIME[bound], _function(fn)
    try:
        return known[key]
    except KeyError:
        found = known[key] = "runtime" in inspect.signature(fn).parameters
        return found
    except TypeError:  # not weakly referable (a builtin): not kept
        return "runtime" in inspect.signature(fn).parameters


def _function(fn: Callable) -> Callable:
    return fn.__func__ if isinstance(fn, types.MethodType) else fn


# -- one rollout ----------------------------------------------------------------------------


@dataclass
class Outcome:
    """A finished rollout: its trace, the tools it offered, and where it failed if it did."""

    trace: Trace
    tools: list[dict[str, Any]] = field(default_factory=list)
    failed_at: str = ""  # "setup", "model", "scoring", "env"; empty when it ran through
    error: str = ""
    failing_hook: str = ""  # the reward or metric function that raised, when scoring failed


class TaskRun:
    """One rollout of a task, with the surface verifiers' ``Rollout`` offers an Env's agents."""

    def __init__(self, task: Any, agent: AgentSetup, has_user: bool) -> None:
        self.task, self.agent, self.has_user = task, agent, has_user
        self.trace = Trace(
            task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            agent=AgentInfo(config=agent.config),
        )
        self.outcome = Outcome(self.trace)
        config = agent.config
        interceptors = [
            (hook_boundary(fn, allow_trace=False), fn)
            for fn in discover_decorated(task, "intercept")
        ]
        stops = [(hook_boundary(fn, allow_trace=True), fn) for fn in task.hooks("stop")]
        self.session = RolloutSession(
            ctx=ModelContext(
                model=config.model,
                client=config.client or EvalClientConfig(),
                sampling=config.sampling,
            ),
            trace=self.trace,
            trace_stops=[fn for kind, fn in stops if kind is Trace],
            request_stops=[fn for kind, fn in stops if kind is vf.Request],
            response_stops=[fn for kind, fn in stops if kind is vf.Response],
            request_interceptors=[fn for kind, fn in interceptors if kind is vf.Request],
            response_interceptors=[fn for kind, fn in interceptors if kind is vf.Response],
            limits=RolloutLimits(
                max_turns=config.max_turns,
                max_input_tokens=config.max_input_tokens,
                max_output_tokens=config.max_output_tokens,
                max_total_tokens=config.max_total_tokens,
            ),
        )
        self.runtime: Any = None
        self._servers: list[ToolServer] = []
        self._dispatch: dict[str, tuple[ToolServer, str]] = {}
        self._opened = self.closed = False

    @property
    def ok(self) -> bool:
        return not self.outcome.failed_at and self.trace.stop_condition is None

    def fail(self, stage: str, error: BaseException) -> None:
        if not self.outcome.failed_at:
            self.outcome.failed_at, self.outcome.error = stage, _chain(error)
        self.trace.record_error(error)

    async def open(self) -> bool:
        """The runtime (only if a hook needs one), the task's ``setup`` and its tools."""
        self._opened = True
        trace, task = self.trace, self.task
        trace.timing.boot.start = time.time()
        try:
            if task.data.prompt is None and not self.has_user:
                raise TaskError("the task has no prompt and no user to open the conversation")
            if needs_runtime(task):
                self.runtime = make_runtime(SubprocessConfig(), name=trace.id)
                self.runtime.env = dict(task.runtime_env())
                await self.runtime.start()
                trace.agent.runtime = self.runtime.info
            trace.timing.boot.end = trace.timing.setup.start = time.time()
            await invoke(task.setup, {"trace": trace, "runtime": self.runtime})
            for toolset in task.toolsets(task.config):
                server = ToolServer(toolset)
                await server.start(task.data)
                self._servers.append(server)
            for server in [*self.agent.shared_tools.values(), *self._servers]:
                for full, name, schema in server.tools():
                    if full in self._dispatch:
                        raise TaskError(f"two tools are named {full!r}")
                    self._dispatch[full] = (server, name)
                    self.outcome.tools.append(schema)
        except Exception as e:  # noqa: BLE001 - recorded on the trace, as verifiers' rollout does
            self.fail("setup", e)
            return False
        trace.timing.setup.end = trace.timing.agent.start = time.time()
        return True

    async def step(self, messages: list[Any] | None = None) -> bool:
        """One segment of the plain chat harness: ask, run the tool calls, ask again, until a reply
        without tool calls, a limit or a stop; True when it added a turn."""
        if not self._opened or self.closed or not self.ok:
            return False
        turns_before = self.trace.num_turns
        wire = self._opening(messages)
        token = _ROLLOUT_STATE.set(self.trace.state)
        try:
            while (
                message := await self._ask(
                    {
                        "model": self.agent.config.model,
                        "messages": wire,
                        "tools": self.outcome.tools or None,
                    }
                )
            ) is not None:
                wire.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    wire.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": await self._tool(call),
                        }
                    )
        finally:
            _ROLLOUT_STATE.reset(token)
        return self.ok and self.trace.num_turns > turns_before

    def _opening(self, messages: list[Any] | None) -> list[dict[str, Any]]:
        """What a segment starts from: the task's prompt, or the conversation so far and the user's turn."""
        data = self.trace.task.data
        if messages is None:
            prompt = data.prompt
        else:  # the system prompt is written again below
            branch = self.trace.branches[-1].messages if self.trace.branches else []
            prompt = [
                *(m for m in branch if m.role != "system" or data.system_prompt is None),
                *messages,
            ]
        wire = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
        if isinstance(prompt, str):
            if prompt:
                wire.append({"role": "user", "content": prompt})
        elif prompt:
            wire.extend(message_to_wire(m) for m in prompt)
        return wire

    async def _tool(self, call: dict[str, Any]) -> Any:
        """A tool call's result, or the words verifiers' harness answers a bad call with."""
        name = call["function"]["name"]
        try:
            arguments = json.loads(call["function"].get("arguments") or "{}")
        except json.JSONDecodeError as e:
            return f"error: invalid JSON in tool arguments ({e}); resend the call with valid JSON"
        if not isinstance(arguments, dict):
            return f"error: tool arguments must be a JSON object, got {type(arguments).__name__}; resend as an object"
        if name not in self._dispatch:
            return f"error: unknown tool {name!r}"
        server, tool = self._dispatch[name]
        return await server.call(tool, arguments)

    async def _ask(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """One model call as verifiers' interception makes it (overrides, limits, stops, interceptors,
        the graph); the assistant message as the harness appends it, or None when the turn ended it."""
        session, trace = self.session, self.trace
        body = DIALECT.apply_overrides(body, self.agent.config.model, self.agent.config.sampling)
        if session.stopped or await session.refused() is not None:
            return None
        request = DIALECT.parse_request(body)
        rewritten, rewrites, stopped = await session.rewrite_request(request)
        if rewrites:
            trace.request_rewrites.extend(rewrites)
            if stopped is None:
                DIALECT.rewrite_request(body, request, rewritten)
        if stopped is not None:
            v1_versions.commit_prompt(trace, rewritten)
            trace.stop(stopped)
            return None
        request = DIALECT.parse_request(body)
        turn = v1_versions.prepare_turn(trace, request)
        started, node, response, error = time.time(), None, None, None
        try:
            raw = await self.agent.chat(body)
            response = DIALECT.parse_response(DIALECT.validate_response(raw))
            response.raw = raw
            stopped = None
            if session.response_interceptors or session.response_stops:
                response, rewrites, stopped = await session.rewrite_response(response)
                if rewrites:
                    DIALECT.rewrite_response(raw, response.message.content or "")
                    trace.response_rewrites.extend(rewrites)
            node = v1_versions.commit_turn(turn, response, request)
            session.consume_prepared(turn.tail)
        except Exception as e:  # noqa: BLE001 - a failed model call fails the rollout, with its reason
            error = e
            self.fail("model", e)
            return None
        finally:
            trace.calls.append(
                ModelCall(
                    node=node,
                    model=body.get("model"),
                    sampling=DIALECT.parse_sampling(body),
                    endpoint=DIALECT.upstream_path,
                    finish_reason=response.finish_reason if response else None,
                    usage=response.usage if response else None,
                    time=TimeSpan(start=started, end=time.time()),
                    error=Error(type=type(error).__name__, message=str(error)) if error else None,
                )
            )
        if stopped is not None:
            trace.stop(stopped)
            return None
        return ChatCompletion.model_validate(raw).choices[0].message.model_dump(exclude_none=True)

    async def close(self) -> Trace:
        """``finalize`` and scoring (not after a failure, as in verifiers), then the tools and runtime go."""
        if self.closed:
            return self.trace
        self.closed = True
        trace = self.trace
        if trace.timing.agent.start and not trace.timing.agent.end:
            trace.timing.agent.end = time.time()
        try:
            if self._opened and not self.outcome.failed_at:
                trace.timing.finalize.start = time.time()
                await invoke(self.task.finalize, {"trace": trace, "runtime": self.runtime})
                trace.timing.finalize.end = trace.timing.scoring.start = time.time()
                try:
                    async with scoring_limit.limit.scoring("scoring"):
                        await self.task.score(trace, self.runtime)
                except Exception as e:  # noqa: BLE001 - a reward or metric that raises: not a score
                    self.outcome.failing_hook = _failing_hook(e, self.task)
                    self.fail("scoring", e)
                trace.timing.scoring.end = time.time()
        except Exception as e:  # noqa: BLE001 - a failing finalize fails the rollout, with its reason
            self.fail("setup", e)
        finally:
            trace.is_completed = True
            trace.ok = not self.outcome.failed_at
            trace.split_agent_time()
            for server in self._servers:
                with contextlib.suppress(Exception):
                    await server.stop()
            if self.runtime is not None:
                with contextlib.suppress(Exception):
                    await self.runtime.stop()
        return trace


class Interaction:
    """What an Env that scripts the user's turns drives: one ``turn`` per segment, as verifiers' own."""

    def __init__(self, run: TaskRun) -> None:
        self._run = run
        self._started = self._over = False

    @property
    def trace(self) -> Trace:
        return self._run.trace

    async def turn(self, message: str | list[Any] | None = None) -> Segment:
        """Send the user's turn (a prompted task's opening reply takes a bare ``turn()``); the
        segment's new messages, or a terminated one when a limit or a stop ended the exchange."""
        if self._run.closed or self._over:
            raise RuntimeError("the exchange is over; read interaction.trace")
        prompted = not self._started and self.trace.task.data.prompt is not None
        if (message is None) != prompted:
            raise ValueError(
                "a prompted task opens with a bare turn(); every later turn needs the user's message"
            )
        messages = [UserMessage(content=message)] if isinstance(message, str) else message
        self._started = True
        turns_before, nodes_before = self.trace.num_turns, len(self.trace.nodes)
        await self._run.step(messages)
        if self.trace.num_turns > turns_before:
            said, answered = [], False
            for node in self.trace.nodes[nodes_before:]:
                if node.sampled:
                    said.append(node.message)
                    answered = True
                elif answered and isinstance(node.message, ToolMessage):
                    said.append(node.message)
            return Segment(messages=said)
        self._over = True
        return Segment(messages=[], terminated=True)

    async def close(self) -> Trace:
        if not self._run.closed and self._run.ok:
            self.trace.stop("user_closed")
        return await self._run.close()


# -- an episode ------------------------------------------------------------------------------


@dataclass
class AgentSetup:
    """What every rollout of an episode's agent shares: its config, the model call, the shared tools."""

    config: Any
    chat: ChatCall
    shared_tools: dict[str, ToolServer]
    task_type: type


class Agent:
    """An Env's ``agents.<role>``: ``run(task)`` and ``interaction(task)``, each one rollout."""

    def __init__(self, name: str, setup: AgentSetup, runs: list[TaskRun]) -> None:
        self.name, self.setup, self.runs = name, setup, runs
        self.config = setup.config
        self.trainable = True

    def _run(self, task: Any, has_user: bool) -> TaskRun:
        own_tools = isinstance(task, self.setup.task_type)  # shared tools are the taskset's tasks'
        setup = (
            self.setup
            if own_tools
            else AgentSetup(self.setup.config, self.setup.chat, {}, self.setup.task_type)
        )
        run = TaskRun(task, setup, has_user)
        run.trace.agent.name, run.trace.agent.trainable = self.name, self.trainable
        self.runs.append(run)
        return run

    async def run(self, task: Any, **_: Any) -> Trace:
        run = self._run(task, has_user=False)
        if await run.open():
            await run.step()
            if run.ok:
                run.trace.stop("agent_completed")
        return await run.close()

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[Interaction]:
        run = self._run(task, has_user=True)
        interaction = Interaction(run)
        try:
            if not await run.open():
                await run.close()
                raise TaskError(run.outcome.error)
            yield interaction
        finally:
            if not run.closed:
                await interaction.close()


async def run_episode(
    env: Any,
    task: Any,
    *,
    model: str,
    chat: ChatCall,
    sampling: Any,
    shared_tools: dict[str, ToolServer],
) -> list[Outcome]:
    """``Env.run_episode`` with in-process agents: the Env's ``setup``, ``run`` and ``finalize``;
    each rollout's outcome. An Env hook that fails fails the episode's rollouts with its reason;
    one that fails before any agent ran raises it."""
    episode = vf.Episode(
        env=EnvInfo(id=env.config.env_id),
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
    )
    runs: list[TaskRun] = []
    task_type = type(env.taskset).task_type()

    def make(name: str, spec: Any) -> Agent:
        merged = sampling.model_copy(
            update=spec.sampling.model_dump(exclude_unset=True) if spec.sampling else {}
        )
        config = spec.model_copy(update={"model": spec.model or model, "sampling": merged})
        return Agent(name, AgentSetup(config, chat, shared_tools, task_type), runs)

    agents = Agents(env.config, make)
    try:
        await env.setup(agents)
        await env.run(task, agents)
        if not runs:
            raise TaskError(f"{type(env).__name__}.run() ran no agent")
        episode.traces.extend(run.trace for run in runs)
        await env.finalize(task, episode)
    except Exception as e:
        if not runs:
            raise
        for run in runs:
            if not run.outcome.failed_at:
                run.fail("env", e)
    return [run.outcome for run in runs]


def _chain(error: BaseException) -> str:
    """The error and what it was raised from, one line each joined by arrows: a client error's
    cause (the transport's reason) is what says what went wrong."""
    links: list[str] = []
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        text = (str(link).strip().splitlines() or [""])[0]
        links.append(f"{type(link).__name__}: {text}" if text else type(link).__name__)
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return " -> ".join(links)


def _failing_hook(error: BaseException, task: Any) -> str:
    """The reward or metric function a scoring error came from, read off its traceback."""
    names = {fn.__name__ for fn in (*task.hooks("reward"), *task.hooks("metric"))}
    cause: BaseException | None = error
    while cause is not None:
        frames = [frame.name for frame in traceback.extract_tb(cause.__traceback__)]
        if found := [name for name in frames if name in names]:
            return found[-1]
        cause = cause.__cause__ or cause.__context__
    return ""
