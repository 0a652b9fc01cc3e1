"""Starting, driving and stopping one collector run, whatever view is watching.

``prepare(config, view)`` resolves everything a user can get wrong (paths, endpoint, key,
tokenizer, environment) before any work, on the main thread (verifiers environments install
signal handlers), and returns a ``PreparedRun`` with every part built. Its ``execute()`` then
collects in the run's mode (its ``modes.Collection``: sft's many groups in flight, or rl's
serve loop) on the current asyncio loop and returns the summary. The view is one subscriber of
the run's bus (``collector.bus``) and steers the run with ``run.controls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

from atroposlib.envs.base import APIServerConfig

from vftui import stats
from vftui.collector import endpoint, gguf_tokenizer, hub, resumed, scoring_limit
from vftui.collector.bus import Bus, Subscriber
from vftui.collector.controls import Controls
from vftui.collector.envs import classic, loader
from vftui.collector.envs.base import Environment
from vftui.collector.gate import GroupGate
from vftui.collector.health import HealthMonitor
from vftui.collector.modes import Collection, Endpoint, ModeContext, Sampling
from vftui.collector.quiet import quiet_libraries
from vftui.collector.served_tokenizer import served_tokenizer
from vftui.collector.sft.collection import SftCollection
from vftui.collector.tokens import renders_tool_calls
from vftui.collector.verifiers_env import Hooks, VerifiersEnv, VfEnvConfig
from vftui.collector.versions import made_by
from vftui.collector.wandb_check import check_wandb_can_log
from vftui.config import RunConfig
from vftui.errors import RunEnded, RunFailed, UserError
from vftui.events import (
    EvalReport,
    Event,
    GroupDropped,
    Health,
    LogRecord,
    Mode,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
)
from vftui.figures.run_tally import RunTally
from vftui.figures.signals import (
    STALL_TIMEOUT,
    Gate,
    Tripped,
    eval_gates,
    parse_gates,
    read_gates,
)
from vftui.live.server import RunServer
from vftui.run_files import index, records, store
from vftui.run_files.drops import DropLog
from vftui.run_files.files import RunFiles
from vftui.run_files.opening import Output, open_new, open_resumed
from vftui.sim.server import MODEL as SIM_MODEL
from vftui.sim.server import TOKENIZER_DIR as SIM_TOKENIZER
from vftui.sim.server import BackgroundSimServer
from vftui.text.redact import scrub

HEALTH_EVERY_S = 1.0
logger = logging.getLogger(__name__)


SAID_BY_US = (
    "Scores are the same in a group",
)  # atroposlib's line for a drop our GroupDropped says with why


class EventLogHandler(logging.Handler):
    """Library log records become LogRecord events (the bus scrubs keys from them); a library line
    that says again what one of our events says is left out, so each drop is one line."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        super().__init__(logging.INFO)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and not record.name.startswith("vftui"):
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad log call must not break a run
            message = str(record.msg)
        if message.startswith(SAID_BY_US):
            return
        self._emit(LogRecord(record.levelname, record.name, message, record.created))


@dataclass(frozen=True)
class Plan:
    """Everything ``prepare`` resolved; the API key is kept out of ``repr``."""

    config: RunConfig
    files: RunFiles
    base_urls: tuple[str, ...]  # the inference servers; the first was asked for its models
    model: str
    tokenizer: str
    groups_before: int
    groups_total: int

    @property
    def simulated(self) -> bool:
        """The embedded endpoint, or a ``vftui sim-server`` named with --base-url."""
        return self.config.simulated or self.model == SIM_MODEL


@dataclass
class Outcome:
    """What the run learns as it goes and its end reads: the last health figures (for wandb), the
    first gate that tripped, an eval's last figures (for its gates)."""

    health: Health | None = None
    tripped: Tripped | None = None
    eval_report: EvalReport | None = None

    def keep_eval_report(self, event: Event) -> None:
        if isinstance(event, EvalReport):
            self.eval_report = event


def prepare(config: RunConfig, view: Subscriber) -> PreparedRun:
    """Everything a user can get wrong, checked before the first group, on the main thread (verifiers
    environments install signal handlers); a refusal (or a stop meanwhile) leaves no trace."""
    quiet_libraries()
    preparation = _Preparation(config, view)
    # our own warnings while preparing (a resume's repairs) reach every view
    ours = logging.getLogger("vftui")
    handler = EventLogHandler(preparation.bus.emit)
    ours.addHandler(handler)
    try:
        return preparation.prepared()
    except BaseException:
        preparation.closing.close()
        raise
    finally:
        ours.removeHandler(handler)


class _Preparation:
    """What exists before the run is prepared: its bus with the view on it, its mode, and what to undo."""

    def __init__(self, config: RunConfig, view: Subscriber) -> None:
        self.config = config
        self.bus = Bus()
        self.window = store.GroupWindow(config.window)
        self.tally = RunTally()
        self.outcome = Outcome()
        self.collection = collection_for(config, self.bus.emit, _say_rate_limited)
        self.closing = contextlib.ExitStack()  # what the run started, stopped in reverse
        self.bus.subscribe("eval gate", self.outcome.keep_eval_report)
        self.bus.subscribe("mode", self.collection.observe)
        self.bus.subscribe("view", view)

    def prepared(self) -> PreparedRun:
        output = self._open_output()
        try:
            return self._prepare(output)
        except BaseException:
            self._forget_output(output)
            raise

    def _open_output(self) -> Output:
        cfg = self.config
        if cfg.resume is None:
            output = open_new(cfg.out, cfg.env)
        else:
            output = open_resumed(cfg.resume, cfg.window, cfg.own_shard)
        self.closing.callback(output.lock.release)
        self.bus.subscribe("drops", _recording_drops(DropLog(output.files)))
        if cfg.resume is None:
            return output
        # the groups it wrote and dropped count in its figures as they did live
        self.tally.history(output.written, output.dropped)
        for group in output.written:
            self.collection.observe(group)
        for drop in output.dropped:
            self.collection.observe(drop)
        for line in output.tail:
            self.window.add(line)
        return output

    def _forget_output(self, output: Output) -> None:
        """A run refused before its first group leaves no empty file or folder of its making behind (its lock
        file goes first, or the folder would not be empty), nor a record that lists it as a run."""
        jsonl = output.files.jsonl
        if self.config.resume is None and jsonl.exists() and jsonl.stat().st_size == 0:
            for made in (jsonl, output.files.drops, output.files.run_json):
                with contextlib.suppress(FileNotFoundError):
                    made.unlink()  # every name was free when the run took it: these are its own
            output.lock.release()
            ours = (
                [output.files.folder] if output.files.in_runs_dir else output.made
            )  # RunFiles.new's
            for folder in ours:  # deepest first, each if nothing else is in it
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def _prepare(self, output: Output) -> PreparedRun:
        cfg = self.config
        if (
            cfg.wandb
        ):  # wandb reads its folder once, when its settings first load: before the login check
            os.environ.setdefault("WANDB_DIR", str(output.files.folder))
            check_wandb_can_log()
        described = records.run_record(output.files) if cfg.resume is not None else None
        if (
            described is not None
        ):  # a line's meaning cannot change halfway through a file: before any work
            resumed.check_settings(described.config.model_dump(exclude_unset=True), cfg)
        self._step(f"loading the environment {cfg.env}")
        environment = loader.load(cfg.env, cfg.env_args)
        base_urls, model, tokenizer = self._endpoint()
        tokenizer = _recorded(tokenizer)
        if gguf_tokenizer.is_gguf(tokenizer):
            self._step(f"building the tokenizer of {tokenizer}")
            tokenizer = str(gguf_tokenizer.tokenizer_folder(tokenizer))
        if described is not None:
            resumed.check_plan(described, model, tokenizer)
        self._step(f"loading the tokenizer {tokenizer}")
        self._check_tools(environment, tokenizer, hub.check_tokenizer(tokenizer))
        self.collection.check(environment)
        endpoint = Endpoint(base_urls, model, self.bus.key, int(cfg.timeout))
        self.closing.callback(self.collection.close)
        self.collection.start(self._step, endpoint)
        if cfg.env_server:
            environment = self._served(environment, base_urls[0], output.files)
        output.ledger.end = end = self.collection.item_range
        # eval: the examples done
        before = output.groups_before if end is None else output.ledger.done_within(end)
        total = max(self.collection.groups_total(environment), before)  # a resume asking for fewer
        plan = Plan(cfg, output.files, base_urls, model, tokenizer, before, total)
        gate = GroupGate(total, before, self.bus.emit)
        controls = Controls(
            gate,
            cfg.start_temperature,
            self.window,
            output.files,
            self.bus.emit,
            stop_grace_s=cfg.score_timeout,
        )
        sampling = Sampling(endpoint, environment, cfg.group_size, cfg.max_tokens)
        health = HealthMonitor(
            cfg.window,
            cfg.max_tokens * (environment.max_turns or 1),
            environment.reward_weights,
            thresholds={"identical": cfg.identical_alert},
            gates=parse_gates(cfg.fail_on),
            stall_timeout=cfg.stall_timeout,
        )
        self.bus.subscribe("health", health.observe)
        env = self._build_env(plan, sampling, output, gate, controls, health)
        if output.groups_before == 0:
            self._write_run_file(plan)
        self._listen(output.files, controls)
        return PreparedRun(
            config=cfg,
            bus=self.bus,
            plan=plan,
            window=self.window,
            tally=self.tally,
            outcome=self.outcome,
            collection=self.collection,
            gate=gate,
            controls=controls,
            context=ModeContext(sampling, output.files, gate),
            env=env,
            health=health,
            closing=self.closing.pop_all(),
        )

    def _endpoint(self) -> tuple[tuple[str, ...], str, str]:
        """The endpoints' URLs, the model to ask them for and the tokenizer: the embedded simulation's, or
        the named endpoints' (--base-url, or the SLURM allocation's servers) after asking the first for its
        models (and finding the key it needs)."""
        cfg = self.config
        if cfg.simulated:
            self._step("starting the simulated endpoint")
            sim = BackgroundSimServer(seed=cfg.seed, latency_s=cfg.sim_latency).start()
            self.closing.callback(sim.stop)
            self.bus.key = "EMPTY"
            return (sim.base_url,), cfg.model or SIM_MODEL, cfg.tokenizer or str(SIM_TOKENIZER)
        if cfg.slurm:
            from vftui.collector.rl import slurm  # atroposlib's server manager: rl's alone

            base_urls = tuple(slurm.inference_urls())
            self._step(slurm.described(base_urls))
        else:
            assert cfg.base_url is not None  # not simulated: --base-url was given
            base_urls = tuple(
                endpoint.check_url(url) for url in [cfg.base_url, *cfg.extra_base_urls]
            )
        first = base_urls[0]
        self.bus.key = endpoint.api_key_for(first, cfg.api_key_env, private=cfg.slurm)
        self._step(f"asking {first} for its models")
        probed = endpoint.probe(first, self.bus.key)
        model = endpoint.choose_model(cfg.model, probed, first)
        if cfg.tokenizer:
            return base_urls, model, cfg.tokenizer
        if model == SIM_MODEL:
            return base_urls, model, str(SIM_TOKENIZER)
        return base_urls, model, served_tokenizer(model, probed.roots.get(model), first)

    def _served(self, environment: Environment, base_url: str, files: RunFiles) -> Environment:
        """The environment with its rollouts run by verifiers' env servers (--env-server): a pool spawned for
        the run (stopped with it, its output in the run's log) or the one at the address."""
        from vftui.collector.envs import env_server

        cfg = self.config
        assert cfg.env_server is not None
        return env_server.served(
            environment,
            cfg.env_server,
            cfg.env_args,
            cfg.env_workers,
            env_server.ServerEndpoint(base_url, cfg.api_key_env, cfg.timeout),
            files.log,
            self.closing,
            self._step,
        )

    def _listen(self, files: RunFiles, controls: Controls) -> None:
        """Let dashboards attach (``vftui attach``) and ``vftui runs`` find the run, wherever its jsonl is."""
        server = RunServer(self.config.window, self.tally)
        self.closing.callback(server.close)
        try:
            server.listen(files.socket, controls, private=files.socket_is_private)
        except OSError as e:
            raise UserError(
                f"cannot open the run's control socket {files.socket}: {e.strerror or e}"
            ) from e
        self.bus.subscribe("socket", server.publish)
        index.remember(files)

    def _step(self, what: str) -> None:
        """A step of the preparation, shown while it lasts (loading an environment can take a while)."""
        self.bus.emit(RunStatus(RunState.STARTING, 0, self.config.groups_hint, what))

    def _check_tools(self, environment: Environment, tokenizer: str, loaded: Any) -> None:
        """An environment with tools needs a template that renders them, or the training data loses them."""
        if environment.has_tools and not renders_tool_calls(loaded):
            raise UserError(
                f"the chat template of tokenizer '{tokenizer}' does not render tool calls, so the training data "
                "would lose them; use a tokenizer whose template renders tools (--tokenizer)"
            )

    def _build_env(
        self,
        plan: Plan,
        sampling: Sampling,
        output: Output,
        gate: GroupGate,
        controls: Controls,
        health: HealthMonitor,
    ) -> VerifiersEnv:
        """atroposlib's env and server configs as the mode needs them, and the env built on them."""
        cfg, outcome = self.config, self.outcome
        env_config = VfEnvConfig(
            vf_env_name=cfg.env,
            env_args=json.dumps(cfg.env_args),
            tokenizer_name=plan.tokenizer,
            group_size=cfg.group_size,
            max_token_length=cfg.max_tokens,
            use_wandb=cfg.wandb,
            include_messages=True,
            data_path_to_save_groups=None,  # set below: atroposlib would open its own writer on a new _1 file
            **self.collection.env_settings(plan.groups_total - plan.groups_before),
        )
        endpoint = sampling.endpoint
        servers = [
            APIServerConfig(
                model_name=endpoint.model,
                base_url=url,
                api_key=endpoint.api_key,
                tokenizer_name=plan.tokenizer,
                timeout=endpoint.timeout,
                **self.collection.server_settings(),
            )
            for url in endpoint.base_urls
        ]
        hooks = Hooks(
            gate=gate,
            temperature=lambda: controls.temperature,
            emit=self.bus.emit,
            checkpoint_path=plan.files.checkpoint,
            ledger=output.ledger,
            groups_before=output.groups_before,
            drops_are_done=self.collection.item_range is not None,
            elapsed_before=output.elapsed_before,
            shard=cfg.own_shard,
            max_retries=cfg.retries,
            on_tokens=self.collection.tokens_written,
            extra_meta={
                "model": plan.model,
                "simulated": plan.simulated,
                "collected_with": resumed.collected_with(cfg),
                **({"shard": list(cfg.shard)} if cfg.shard is not None else {}),
            },
            health_metrics=lambda: (
                health.wandb_metrics(outcome.health) if outcome.health is not None else {}
            ),
        )
        try:
            env = VerifiersEnv(
                env_config,
                servers,
                sampling=sampling,
                rollouts=self.collection.rollouts,
                hooks=hooks,
            )
        except ImportError as e:  # atroposlib's OpenAI client reads the proxies as it is made
            if "socks" not in str(e).lower():
                raise
            raise UserError(
                "the environment names a SOCKS proxy (ALL_PROXY or HTTPS_PROXY), which atroposlib's "
                "client cannot load without httpx's socks extra: unset it for vftui or pip install "
                "'httpx[socks]'"
            ) from e
        # in every mode groups go to our crash-safe appender instead of an unflushed jsonlines writer
        env.config.data_path_to_save_groups = str(plan.files.jsonl)
        env.jsonl_writer = store.JsonlAppender(plan.files.jsonl, on_line=self.window.add)
        if cfg.wandb:
            env.name = cfg.wandb_name or f"vftui-{cfg.env.split('/')[-1]}"
            env.wandb_project = cfg.wandb_project
        return env

    def _write_run_file(self, plan: Plan) -> None:
        store.write_json_atomic(
            plan.files.run_json,
            {
                "config": {**self.config.public_dict(), "out": str(plan.files.jsonl)},
                "model": plan.model,
                "endpoint": self.config.endpoint,
                "tokenizer": plan.tokenizer,
                "created": time.time(),
                "version_info": made_by(),
            },
        )


@dataclass(eq=False)
class PreparedRun:
    """A run ready to collect: every part built, its socket listening; ``execute`` runs it once, ``close``
    stops what it started (the socket, the mode's processes, the simulated endpoint, the lock)."""

    config: RunConfig
    bus: Bus
    plan: Plan
    window: store.GroupWindow
    tally: RunTally
    outcome: Outcome
    collection: Collection
    gate: GroupGate
    controls: Controls
    context: ModeContext
    env: VerifiersEnv
    health: HealthMonitor
    closing: contextlib.ExitStack

    async def execute(self) -> RunSummary:
        """Collect until done, stopped or failed; always flushes and checkpoints.

        Library ``print``s (atroposlib's HTML step) go to stderr, so stdout can carry JSON events.
        """
        plan, env = self.plan, self.env
        clock = time.monotonic()
        # The libraries and the environment loaded by now live as long as the run; keeping them out
        # of the collector's reach keeps full collections (which stall control calls as well) short.
        gc.freeze()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_quiet_loop_error)
        handler = EventLogHandler(self.bus.emit)
        loggers = [logging.getLogger(), *map(logging.getLogger, classic.LOGGERS)]
        for log in loggers:
            log.addHandler(handler)
        self.bus.emit(RunStatus(RunState.STARTING, plan.groups_before, plan.groups_total))
        self.bus.emit(self._started(time.time()))
        self.gate.bind(loop, on_force_stop=functools.partial(self._force_stop, loop))
        over = threading.Event()
        watch = threading.Thread(
            target=self._watch_health, args=(over,), name="run-health", daemon=True
        )
        watch.start()
        scoring_limit.limit.limit_s = self.config.score_timeout
        # until the very end: a stop's deadline too
        watchdog = asyncio.ensure_future(scoring_limit.limit.watch())
        # until it ends one of the ways below
        state, error = RunState.FAILED, "the collector crashed"
        try:
            try:
                state, error = await self._collect()
            finally:
                over.set()
                watch.join()
                self._last_health()
                for log in loggers:
                    log.removeHandler(handler)
                state, error = self._flush(state, error, time.monotonic() - clock)
                try:
                    await self.collection.finish(self.context, env)
                except (OSError, store.WriteFailed) as e:
                    state, error = RunState.FAILED, error or f"cannot write the run's results: {e}"
                await env.environment.aclose()
                await self._finish_wandb()
            return self._summary(state, error, time.monotonic() - clock)
        finally:
            watchdog.cancel()
            await asyncio.wait([watchdog])

    def _last_health(self) -> None:
        """The figures at the end, so a run shorter than a second has them too, and a gate over the whole of
        a run too short for the once-a-second check."""
        outcome = self.outcome
        outcome.health, _, tripped = self.health.check()
        self.bus.emit(outcome.health)
        if tripped is not None and outcome.tripped is None and tripped.name != STALL_TIMEOUT:
            outcome.tripped = tripped

    def _force_stop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The second stop, from whatever thread made it: the groups in flight are cancelled on the loop, and
        reward code that blocks the loop is interrupted (``scoring_limit``) so that the cancel can run."""
        with contextlib.suppress(
            RuntimeError
        ):  # the loop has closed: nothing is in flight any more
            loop.call_soon_threadsafe(self.collection.cancel)
        scoring_limit.limit.force_stop()

    def _started(self, started: float) -> RunStarted:
        plan, env = self.plan, self.env
        return RunStarted(
            mode=self.config.mode,
            env=self.config.env,
            model=plan.model,
            endpoint=self.config.endpoint,
            simulated=plan.simulated,
            out_path=str(plan.files.jsonl),
            groups_total=plan.groups_total,
            groups_done=plan.groups_before,
            group_size=self.config.group_size,
            temperature=self.controls.temperature,
            reward_functions=env.reward_func_names,
            tokenizer=plan.tokenizer,
            started_at=started,
            max_tokens=self.config.max_tokens * (env.max_turns or 1),
        )

    async def _collect(self) -> tuple[RunState, str]:
        """The mode's collection, to its end; how it ended (a crash raises)."""
        gate = self.gate
        if self.plan.groups_before >= self.plan.groups_total:
            return RunState.FINISHED, ""
        # a pause pressed while the run was starting holds: it starts paused, and says so
        state = RunState.PAUSED if gate.held else RunState.RUNNING
        self.bus.emit(RunStatus(state, gate.groups_done, self.plan.groups_total))
        try:
            with contextlib.redirect_stdout(sys.stderr):
                await self.collection.collect(self.context, self.env)
        except asyncio.CancelledError:
            pass  # a second stop cancelled the groups in flight: a stopped run, not a failed one
        except RunFailed as e:
            return RunState.FAILED, str(e)
        return RunState.FINISHED, ""

    def _flush(self, state: RunState, error: str, elapsed_s: float) -> tuple[RunState, str]:
        """Close the jsonl and save the checkpoint; a full disk fails the run (the file keeps whole lines)."""
        env = self.env
        try:
            env.jsonl_writer.close()
            env.save_checkpoint(
                env.curr_step,
                {
                    "state": state.value,
                    "elapsed_s": round(env.hooks.elapsed_before + elapsed_s, 3),  # all sessions
                    "mean_reward": self.tally.metrics().get(stats.MEAN_REWARD),
                    "groups_done": self.gate.groups_done,
                    "groups_total": self.plan.groups_total,
                },
            )
        except store.WriteFailed as e:
            return RunState.FAILED, error or str(e)
        return state, error

    def _summary(self, state: RunState, error: str, elapsed_s: float) -> RunSummary:
        plan, outcome, done = self.plan, self.outcome, self.gate.groups_done
        if state is RunState.FINISHED and outcome.tripped is None and done >= plan.groups_total:
            outcome.tripped = eval_gate_tripped(
                eval_gates(self.config.fail_on), outcome.eval_report
            )
        if state is RunState.FINISHED and outcome.tripped is not None:
            error = outcome.tripped.sentence
        elif state is RunState.FINISHED and done < plan.groups_total:
            error = "stopped before all groups were collected"
        self.controls.end(state)
        self.bus.emit(RunStatus(state, done, plan.groups_total, error))
        summary = RunSummary(
            state=state,
            groups_done=done,
            groups_total=plan.groups_total,
            out_path=str(plan.files.jsonl),
            elapsed_s=round(elapsed_s, 3),
            metrics=self.tally.metrics(),
            error=error,
            dropped=self.tally.dropped(),
            truncated=self.tally.truncated(),
            gate=outcome.tripped.name
            if outcome.tripped is not None and state is RunState.FINISHED
            else "",
            gates_held=gates_held(self.config.fail_on, outcome.health, outcome.eval_report)
            if state is RunState.FINISHED and outcome.tripped is None
            else "",
        )
        self.bus.emit(summary)
        return summary

    def _watch_health(self, over: threading.Event) -> None:
        """Once a second, on a thread of its own (reward code that blocks the loop must not hide a stall): the
        health figures, the alerts that start or clear, and the gates."""
        outcome, controls = self.outcome, self.controls
        while not over.wait(HEALTH_EVERY_S):
            outcome.health, changes, tripped = self.health.check()
            self.bus.emit(outcome.health)
            for alert in changes:
                self.bus.emit(alert)
            if tripped is not None and outcome.tripped is None:
                outcome.tripped = tripped
                logger.warning("%s; stopping the run", tripped.sentence)
                with contextlib.suppress(RunEnded):  # it ended meanwhile
                    controls.stop()
                    if tripped.name == STALL_TIMEOUT:
                        controls.stop()  # the groups in flight are the ones stuck: cancel them

    async def _finish_wandb(self) -> None:
        if self.config.wandb:
            import wandb

            if wandb.run is not None:
                wandb.finish()

    def close(self) -> None:
        """Stop what the run started, in reverse: the socket, the mode's processes, the simulated endpoint,
        the lock."""
        self.closing.close()


def collection_for(
    config: RunConfig, emit: Callable[[Event], None], on_rate_limit: Callable[[int, float], None]
) -> Collection:
    """The run's mode, as the object that collects in it; another mode's modules are not imported
    (``tests/test_start_up.py``)."""
    match config.mode:
        case Mode.SFT:
            return SftCollection(config, emit, on_rate_limit)
        case Mode.EVAL:
            from vftui.collector.eval.collection import EvalCollection

            return EvalCollection(config, emit, on_rate_limit)
        case Mode.RL:
            from vftui.collector.rl.collection import RlCollection

            return RlCollection(config, emit)
        case _:
            assert_never(config.mode)


def eval_gate_tripped(gates: list[Gate], report: EvalReport | None) -> Tripped | None:
    """The first of an eval's gates its final figures pass (``pass@1<0.6`` with pass@1 at 0.55), or have no value for
    (no example scored)."""
    if report is None:
        return None
    for gate in gates:
        value = report.figures.get(gate.name, {}).get("mean")
        if value is None:
            return Tripped(
                gate.name,
                math.nan,
                gate.threshold,
                op=gate.op,
                unmeasured=f"no example was scored ({report.errors} errors)",
            )
        if math.isfinite(value) and gate.passed(value):
            return Tripped(gate.name, value, gate.threshold, op=gate.op)
    return None


def _recorded(tokenizer: str) -> str:
    """A tokenizer that is a folder or file here as its absolute path: the run records it, and a resume
    from another folder resolving the same name to another tokenizer is refused, not appended."""
    path = Path(tokenizer).expanduser()
    try:
        return str(path.resolve()) if path.exists() else tokenizer
    except (OSError, RuntimeError):  # a name no file system takes: loading it says so
        return tokenizer


def gates_held(fail_on: str | None, health: Health | None, report: EvalReport | None) -> str:
    """Each ``--fail-on`` gate of a finished run: held, with its last value, or never measured (too few
    groups for its figure). A passing gate printed nothing, so a typo in one read like a pass."""
    held = []
    for gate in read_gates(fail_on):
        figure = (
            report.figures.get(gate.name, {}).get("mean")
            if gate.is_eval and report is not None
            else None
            if gate.is_eval or health is None
            else health.signals.get(gate.name)
        )
        said = "never measured" if figure is None else f"held ({gate.name} {figure:.4g})"
        held.append(f"{gate.name}{gate.op}{gate.threshold:g} {said}")
    return "; ".join(held)


def _recording_drops(drops: DropLog) -> Subscriber:
    """The drop log's subscriber; a drop it cannot write is said, and the run goes on."""

    def record(event: Event) -> None:
        if isinstance(event, GroupDropped):
            try:
                drops.add(event)
            except OSError as e:
                logger.warning("could not record a dropped group in %s: %s", drops.path.name, e)

    return record


def _quiet_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's errors as one scrubbed log line instead of a traceback on stderr.

    asyncio's default prints a traceback, whose text can quote an endpoint's error body and
    so the key. Errors nobody awaited (rollouts verifiers left running when a sibling
    failed) were already reported through the failure that ended them: debug only.
    """
    message = context.get("message", "asyncio error")
    error = context.get("exception")
    line = scrub(f"{message}: {type(error).__name__}: {error}" if error is not None else message)
    level = logging.DEBUG if "never retrieved" in message else logging.WARNING
    logger.log(level, "%s", line)


def _say_rate_limited(limit: int, wait_s: float) -> None:
    logger.warning(
        "the endpoint is rate-limiting: waiting %.1f s, then at most %d requests in flight",
        wait_s,
        limit,
    )
