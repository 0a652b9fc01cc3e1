"""Starting, driving and stopping one collector run, whatever view is watching.

``Run.prepare()`` resolves everything a user can get wrong (paths, endpoint, key,
tokenizer, environment) before any work, on the main thread (verifiers environments
install signal handlers). ``Run.execute()`` then runs atroposlib's own process manager
(sft) or serve loop (rl, until ``--steps`` groups were sent) on the current asyncio loop
and returns the summary. The view gets every event through
``emit`` and steers the run with ``run.controls``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from atroposlib.envs.base import APIServerConfig

from vftui import paths, run_index, stats, store
from vftui.collector import compat, endpoint, env_loader, hub, managed, trajectory_api
from vftui.collector.controls import Controls
from vftui.collector.group_pool import groups_for, groups_with_spares, process_in_flight
from vftui.collector.health import STALL_TIMEOUT, HealthMonitor, Tripped, parse_gates
from vftui.collector.ledger import ItemLedger
from vftui.collector.output_lock import OutputLock
from vftui.collector.run_socket import RunServer, socket_path
from vftui.collector.server_watch import watch_servers
from vftui.collector.tokens import renders_tool_calls
from vftui.collector.traffic import AdaptiveLimit, LimitedTransport, TrafficStats
from vftui.collector.verifiers_env import Hooks, VerifiersEnv, VfEnvConfig
from vftui.collector.wandb_check import check_wandb_can_log
from vftui.config import RunConfig
from vftui.defaults import DEFAULT_HUB_TOKENIZER
from vftui.errors import RunFailed, UserError
from vftui.events import (
    Event,
    GroupCollected,
    GroupDropped,
    Health,
    LogRecord,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
)
from vftui.groupfile import group_event
from vftui.quiet import quiet_libraries
from vftui.redact import scrub, scrub_event
from vftui.run_files import find_resumable, sidecars
from vftui.sim.server import MODEL as SIM_MODEL
from vftui.sim.server import TOKENIZER_DIR as SIM_TOKENIZER
from vftui.sim.server import BackgroundSimServer

RL_STEP_LIMIT = 1_000_000_000
STATS_EVERY_S = 1.0
HEALTH_EVERY_S = 1.0


class EventLogHandler(logging.Handler):
    """Library log records become LogRecord events (``Run.emit`` scrubs keys from them)."""

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
        self._emit(LogRecord(record.levelname, record.name, message, record.created))


@dataclass(frozen=True)
class Plan:
    """Everything ``prepare`` resolved; the API key is kept out of ``repr``."""

    config: RunConfig
    out_path: Path
    base_url: str
    model: str
    tokenizer: str
    groups_before: int

    @property
    def simulated(self) -> bool:
        """The embedded endpoint, or a ``vftui sim-server`` named with --base-url."""
        return self.config.simulated or self.model == SIM_MODEL

    @property
    def groups_total(self) -> int:
        return self.config.steps


class Run:
    def __init__(self, config: RunConfig, emit: Callable[[Event], None]) -> None:
        self.config = config
        self._view_emit = emit
        self.window = store.GroupWindow(config.window)
        self.totals = stats.Accumulator()
        self.dropped: collections.Counter[str] = collections.Counter()
        self.plan: Plan | None = None
        self.controls: Controls | None = None
        self._api_key = ""
        self._sim: BackgroundSimServer | None = None
        self._env: VerifiersEnv | None = None
        self._task: asyncio.Task | None = None
        self._api: trajectory_api.ApiProcess | None = None
        self._trainer: subprocess.Popen | None = None
        self.ledger = ItemLedger()
        self.request_limit = AdaptiveLimit(config.concurrency)
        self.traffic = TrafficStats()
        self._http: httpx.AsyncClient | None = None
        self._lock: OutputLock | None = None
        self._server: RunServer | None = None
        self.health: HealthMonitor | None = None
        self._health: Health | None = None
        self._tripped: Tripped | None = None
        self._failure: RunFailed | None = None

    def emit(self, event: Event) -> None:
        if not isinstance(event, GroupCollected):  # a group's messages are training data, kept exact
            event = scrub_event(event, self._api_key)
        if isinstance(event, GroupCollected):
            self.totals.add(event)
        elif isinstance(event, GroupDropped):
            self.dropped[event.reason] += 1
            self.totals.add(event)  # scored: it counts in the identical-score rate and the mean reward
        if self.health is not None:
            self.health.observe(event)
        self._view_emit(event)
        if self._server is not None:
            self._server.publish(event)

    # -- before any work ----------------------------------------------------------------

    def prepare(self) -> Plan:
        cfg = self.config
        quiet_libraries()
        if cfg.mode == "sft" and cfg.extra_base_urls:
            raise UserError("sft mode takes one --base-url; several are for balancing inference servers in rl mode")
        out_path, groups_before = self._resolve_output()
        try:
            return self._prepare(out_path, groups_before)
        except BaseException:
            self._forget_output(out_path)
            raise

    def _forget_output(self, out_path: Path) -> None:
        """A run refused before its first group leaves no empty file or run folder behind."""
        if self.config.resume is None and out_path.exists() and out_path.stat().st_size == 0:
            out_path.unlink()
            if out_path.parent.parent == paths.runs_dir():
                with contextlib.suppress(OSError):
                    out_path.parent.rmdir()  # ours, made by new_run_dir, if nothing else is in it

    def _prepare(self, out_path: Path, groups_before: int) -> Plan:
        cfg = self.config
        if cfg.wandb:  # wandb reads its folder once, when its settings first load: before the login check
            os.environ.setdefault("WANDB_DIR", str(out_path.parent))
            check_wandb_can_log()
        self._step(f"loading the environment {cfg.env}")
        vf_env = env_loader.load(cfg.env, cfg.env_args)
        if cfg.simulated:
            self._step("starting the simulated endpoint")
            self._sim = BackgroundSimServer(seed=cfg.seed).start()
            base_url, model, self._api_key = self._sim.base_url, cfg.model or SIM_MODEL, "EMPTY"
            tokenizer = cfg.tokenizer or str(SIM_TOKENIZER)
        else:
            base_url = endpoint.check_url(cfg.base_url)
            for extra in cfg.extra_base_urls:
                endpoint.check_url(extra)
            self._api_key = endpoint.api_key_for(base_url, cfg.api_key_env)
            self._step(f"asking {base_url} for its models")
            model = endpoint.choose_model(cfg.model, endpoint.probe(base_url, self._api_key), base_url)
            default = str(SIM_TOKENIZER) if model == SIM_MODEL else DEFAULT_HUB_TOKENIZER
            tokenizer = cfg.tokenizer or default
        self._step(f"loading the tokenizer {tokenizer}")
        self._check_tools(vf_env, tokenizer, hub.check_tokenizer(tokenizer))
        if cfg.mode == "rl":
            if cfg.start_api:
                self._step(f"starting the trajectory API at {cfg.api_url}")
            self._start_trajectory_side()
        self.plan = Plan(cfg, out_path, base_url, model, tokenizer, groups_before)
        self.controls = Controls(
            cfg.temperature, self.window, out_path.parent, self.emit, groups_total=cfg.steps
        )
        self.controls.groups_done = groups_before
        self._env = self._build_env(vf_env)
        turns = self._env.max_turns if isinstance(self._env.max_turns, int) and self._env.max_turns > 0 else 1
        self.health = HealthMonitor(cfg.window, cfg.max_tokens * turns, compat.reward_weights(vf_env),
                                    thresholds={"identical": cfg.identical_alert}, gates=parse_gates(cfg.fail_on),
                                    stall_timeout=cfg.stall_timeout)
        if groups_before == 0:
            self._write_run_file()
        self._listen(out_path)
        return self.plan

    def _listen(self, out_path: Path) -> None:
        """Let dashboards attach (``vftui attach``) and ``vftui runs`` find the run, wherever its jsonl is."""
        self._server = RunServer(self.config.window, self.totals)
        try:
            self._server.listen(socket_path(out_path), self.controls)
        except OSError as e:
            raise UserError(f"cannot open the run's control socket {socket_path(out_path)}: {e.strerror or e}") from e
        run_index.remember(out_path)

    def _step(self, what: str) -> None:
        """A step of the preparation, shown while it lasts (loading an environment can take a while)."""
        self.emit(RunStatus(RunState.STARTING, 0, self.config.steps, what))

    def _check_tools(self, vf_env: Any, tokenizer: str, loaded: Any) -> None:
        """An environment with tools needs a template that renders them, and in rl a tool parser."""
        if not compat.env_tools(vf_env):
            return
        if not renders_tool_calls(loaded):
            raise UserError(
                f"the chat template of tokenizer '{tokenizer}' does not render tool calls, so the training data "
                "would lose them; use a tokenizer whose template renders tools (--tokenizer)"
            )
        if self.config.mode == "rl":
            managed.check_tool_parser(self.config.env, self.config.tool_parser)

    def _start_trajectory_side(self) -> None:
        """rl: the trajectory API (started with --start-api) and the sim trainer, if asked for."""
        cfg = self.config
        if cfg.start_api:
            self._api = trajectory_api.ApiProcess(cfg.api_url).start()
        if cfg.runs_sim_trainer:
            self._trainer = subprocess.Popen(
                [sys.executable, "-m", "vftui", "sim-trainer", "--api-url", cfg.api_url,
                 "--batch-size", str(cfg.batch_size or cfg.group_size)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )

    def _resolve_output(self) -> tuple[Path, int]:
        """The jsonl to append to and the groups already in it; fills the ledger on --resume."""
        cfg = self.config
        if cfg.resume is not None:
            out = find_resumable(cfg.resume)
            self._lock = OutputLock(out).acquire("stop it before resuming it")
            cut = store.repair_tail(out)
            if cut:
                logging.getLogger(__name__).warning("cut a torn last line (%d bytes) from %s", cut, out)
            saved = _read_checkpoint(sidecars(out)[1])
            written = _groups_written(out)
            for group in written:
                self.totals.add(group)
            # An item is done when its line is in the file (the checkpoint may lag it by one) or
            # the checkpoint says so (a dropped group has no line).
            self.ledger = ItemLedger([*(g.item for g in written), *ItemLedger.done_in(saved)], int(saved.get("iter", 0)))
            done = len(written)
            if self.ledger.lost:
                logging.getLogger(__name__).warning(
                    "%d items were in flight when the run stopped; collecting them again first", len(self.ledger.lost)
                )
            for line in _tail_lines(out, cfg.window):
                self.window.add(line)
            return out, done
        if cfg.out is not None:
            out = cfg.out.expanduser().resolve()
        else:
            try:
                out = paths.new_run_dir(cfg.env) / "groups.jsonl"
            except OSError as e:
                raise UserError(f"cannot create a run folder under {paths.runs_dir()}: {e.strerror}") from e
        if out.exists() and not out.is_file():
            what = "a folder" if out.is_dir() else "not a regular file"
            raise UserError(f"--out {out} is {what}; give a .jsonl file path")
        if not paths.writable_dir(out.parent):
            raise UserError(f"cannot write to the output folder {out.parent}")
        free = out
        while True:  # an existing file gets a _1 suffix, unless its run is still writing it
            self._lock = OutputLock(free).acquire("wait for it to end, or choose another --out")
            if not free.exists():
                free.touch()
                break
            self._lock.release()
            free = store.unique_path(free)
        if free != out:
            logging.getLogger(__name__).warning("%s exists; writing to %s instead", out, free)
        return free, 0

    def _build_env(self, vf_env: Any) -> VerifiersEnv:
        plan, cfg = self.plan, self.config
        assert plan is not None and self.controls is not None
        rl = cfg.mode == "rl"
        env_config = VfEnvConfig(
            vf_env_name=cfg.env,
            env_args=json.dumps(cfg.env_args),
            tokenizer_name=plan.tokenizer,
            group_size=cfg.group_size,
            # sft: atroposlib's process manager counts the groups; rl: the run stops the
            # serve loop itself once --steps groups were sent, so its own limit is out of reach.
            total_steps=RL_STEP_LIMIT if rl else cfg.steps - plan.groups_before,
            max_token_length=cfg.max_tokens,
            use_wandb=cfg.wandb,
            include_messages=True,
            data_path_to_save_groups=None,
            **({"rollout_server_url": cfg.api_url, "batch_size": cfg.batch_size or -1,
                # --concurrency is requests in flight in both modes; atroposlib counts groups
                "max_num_workers": groups_for(cfg.concurrency, cfg.group_size),
                # the API names the env after it ("desired_name"), so it cannot be empty
                "wandb_name": cfg.wandb_name or f"vftui-{cfg.env.split('/')[-1]}"}
               if rl else {"ensure_scores_are_not_same": False, "wandb_name": cfg.wandb_name}),
        )
        servers = [
            APIServerConfig(
                model_name=plan.model,
                base_url=url,
                api_key=self._api_key,
                server_type=cfg.server_type if rl else "openai",
                tokenizer_name=plan.tokenizer,
                timeout=int(cfg.timeout),
                health_check=rl,
            )
            for url in [plan.base_url, *cfg.extra_base_urls]  # sft was refused extra URLs in prepare()
        ]
        if not rl:
            transport = LimitedTransport(self.request_limit, self.traffic, timeout_s=cfg.timeout,
                                         max_body_bytes=cfg.max_response_mb * 1024**2, on_cut=_say_rate_limited)
            self._http = httpx.AsyncClient(transport=transport, timeout=cfg.timeout)
        hooks = Hooks(
            controls=self.controls,
            emit=self.emit,
            checkpoint_path=sidecars(plan.out_path)[1],
            ledger=self.ledger,
            groups_before=plan.groups_before,
            max_retries=cfg.retries,
            max_concurrent=min(cfg.concurrency, cfg.group_size),
            http_client=self._http,
            on_tokens=self.traffic.tokens,
            extra_meta={"model": plan.model, "simulated": plan.simulated},
            health_metrics=lambda: self.health.wandb_metrics(self._health) if self._health is not None else {},
            fail=self._fail if rl else None,
        )
        env = VerifiersEnv(env_config, servers, vf_env=vf_env, hooks=hooks)
        # Process mode as atroposlib's `process` command sets it up; in both modes groups go
        # to our crash-safe appender instead of an unflushed jsonlines writer.
        env.process_mode = not rl
        if rl:
            env.server.tool_parser = cfg.tool_parser  # each rollout's ManagedServer parses calls with it
        else:
            env.n_groups_to_process = env_config.total_steps
            env.group_size_to_process = cfg.group_size
        env.config.data_path_to_save_groups = str(plan.out_path)
        env.jsonl_writer = store.JsonlAppender(plan.out_path, on_line=self.window.add)
        if cfg.wandb:
            env.name = cfg.wandb_name or f"vftui-{cfg.env.split('/')[-1]}"
            env.wandb_project = cfg.wandb_project
        return env

    def _write_run_file(self) -> None:
        plan = self.plan
        assert plan is not None
        run_file, _ = sidecars(plan.out_path)
        store.write_json_atomic(
            run_file,
            {
                "config": {**self.config.public_dict(), "out": str(plan.out_path)},
                "model": plan.model,
                "endpoint": "simulated" if self.config.simulated else plan.base_url,
                "tokenizer": plan.tokenizer,
                "created": time.time(),
            },
        )

    # -- the run itself ---------------------------------------------------------------

    async def execute(self, redirect_prints: bool = True) -> RunSummary:
        """Collect until done, stopped or failed; always flushes and checkpoints.

        Library ``print``s (atroposlib's HTML step) go to stderr so stdout can carry JSON
        events; a Textual view, which captures prints itself, passes ``False``.
        """
        plan, env, controls = self.plan, self._env, self.controls
        assert plan is not None and env is not None and controls is not None, "call prepare() first"
        started = time.time()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_quiet_loop_error)
        handler = EventLogHandler(self.emit)
        loggers = [logging.getLogger(), *map(logging.getLogger, compat.QUIET_LOGGERS)]
        for logger in loggers:
            logger.addHandler(handler)
        self.emit(RunStatus(RunState.STARTING, plan.groups_before, plan.groups_total))
        self.emit(
            RunStarted(
                mode=self.config.mode,
                env=self.config.env,
                model=plan.model,
                endpoint="simulated" if self.config.simulated else plan.base_url,
                simulated=plan.simulated,
                out_path=str(plan.out_path),
                groups_total=plan.groups_total,
                groups_done=plan.groups_before,
                group_size=self.config.group_size,
                temperature=controls.temperature,
                reward_functions=env.reward_func_names,
                tokenizer=plan.tokenizer,
                started_at=started,
            )
        )
        state, error = RunState.FAILED, "the collector crashed"  # until it ends one of the ways below
        controls.bind(loop, on_force_stop=self._cancel)
        watch = asyncio.ensure_future(self._watch_health(controls))
        try:
            if plan.groups_before < plan.groups_total:
                self.emit(RunStatus(RunState.RUNNING, controls.groups_done, plan.groups_total))
                prints = contextlib.redirect_stdout(sys.stderr) if redirect_prints else contextlib.nullcontext()
                with prints:
                    if env.process_mode:
                        await self._process(env, controls)
                    else:
                        await self._serve(env, controls)
            state, error = RunState.FINISHED, ""
        except asyncio.CancelledError:
            state, error = RunState.FINISHED, ""
        except RunFailed as e:
            state, error = RunState.FAILED, str(e)
        finally:
            watch.cancel()
            for logger in loggers:
                logger.removeHandler(handler)
            try:
                env.jsonl_writer.close()
                env.save_checkpoint(env.curr_step, {"state": state.value, "elapsed_s": round(time.time() - started, 3)})
            except store.WriteFailed as e:  # a full disk: the file keeps whole lines, the old checkpoint stays
                state, error = RunState.FAILED, error or str(e)
            await self._finish_wandb()
            if self._http is not None:
                await self._http.aclose()
        if state is RunState.FINISHED and self._tripped is not None:
            error = self._tripped.sentence
        elif state is RunState.FINISHED and controls.groups_done < plan.groups_total:
            error = "stopped before all groups were collected"
        self.emit(RunStatus(state, controls.groups_done, plan.groups_total, error))
        summary = RunSummary(
            state=state,
            groups_done=controls.groups_done,
            groups_total=plan.groups_total,
            out_path=str(plan.out_path),
            elapsed_s=round(time.time() - started, 3),
            metrics=self.totals.metrics(),
            error=error,
            dropped=dict(self.dropped),
            gate=self._tripped.name if self._tripped is not None and state is RunState.FINISHED else "",
        )
        self.emit(summary)
        return summary

    async def _watch_health(self, controls: Controls) -> None:
        """Once a second: the health figures, the alerts that start or clear, and the gates."""
        assert self.health is not None
        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            self._health, changes, tripped = self.health.check()
            self.emit(self._health)
            for alert in changes:
                self.emit(alert)
            if tripped is not None and self._tripped is None:
                self._tripped = tripped
                logging.getLogger(__name__).warning("%s; stopping the run", tripped.sentence)
                controls.stop()
                if tripped.name == STALL_TIMEOUT:
                    controls.stop()  # the groups in flight are the ones stuck: cancel them

    async def _process(self, env: VerifiersEnv, controls: Controls) -> None:
        """sft: groups in flight as the request limit allows, the traffic figures once a second."""
        group_size = self.config.group_size
        self._task = asyncio.ensure_future(
            process_in_flight(env, lambda: groups_with_spares(self.request_limit.size, group_size))
        )
        ticker = asyncio.ensure_future(self._report_traffic(controls))
        try:
            await self._task
        finally:
            ticker.cancel()
            self.emit(self.traffic.snapshot(self.request_limit, controls.groups_in_flight))

    async def _report_traffic(self, controls: Controls) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self.emit(self.traffic.snapshot(self.request_limit, controls.groups_in_flight))

    async def _serve(self, env: VerifiersEnv, controls: Controls) -> None:
        """atroposlib's serve loop, until the groups are sent or a stop is requested."""
        self._task = asyncio.ensure_future(env.env_manager())
        finished = asyncio.ensure_future(controls.wait_finished())
        servers = asyncio.ensure_future(watch_servers(env.server.servers, self.emit))
        try:
            await asyncio.wait({self._task, finished}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
            servers.cancel()
            if not self._task.done():
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if env.unsent:
            logging.getLogger(__name__).warning("%d groups were not sent to the trajectory API; "
                                                "they are in %s", env.unsent, self.plan.out_path)
        if self._failure is not None:
            raise self._failure

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _fail(self, failure: RunFailed) -> None:
        """rl: a group's failure ends the run (the first one says why)."""
        if self._failure is None:
            self._failure = failure
            self._cancel()

    async def _finish_wandb(self) -> None:
        if self.config.wandb:
            import wandb

            if wandb.run is not None:
                wandb.finish()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._trainer is not None:
            self._trainer.terminate()
            self._trainer.wait(timeout=10)
            self._trainer = None
        if self._api is not None:
            self._api.stop()
            self._api = None
        if self._sim is not None:
            self._sim.stop()
            self._sim = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None


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
    logging.getLogger(__name__).log(level, "%s", line)


def _say_rate_limited(limit: int, wait_s: float) -> None:
    logging.getLogger(__name__).warning(
        "the endpoint is rate-limiting: waiting %.1f s, then at most %d requests in flight", wait_s, limit
    )


def _read_checkpoint(path: Path) -> dict[str, Any]:
    """A resumed run's checkpoint; one that does not read is a one-sentence refusal."""
    if not path.exists():
        return {}
    try:
        saved = json.loads(path.read_bytes())
        if not isinstance(saved, dict):
            raise ValueError("it is not a JSON object")
        ItemLedger.done_in(saved)
        int(saved.get("iter", 0))
    except (OSError, ValueError, TypeError) as e:
        raise UserError(f"--resume: the checkpoint {path} is damaged ({e}); remove it to resume from the groups "
                        "in the file alone (groups dropped before would be collected again)") from e
    return saved


def _groups_written(out: Path) -> list[GroupCollected]:
    """Every group line; any other line but a torn last one (cut before) refuses the resume."""
    groups = []
    for entry in store.read_groups(out):
        if isinstance(entry, store.BadLine):
            number, reason = entry.number, entry.reason
        else:
            number, raw = entry
            try:
                groups.append(group_event(len(groups) + 1, raw))
                continue
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                reason = f"not a group vftui can read ({type(e).__name__}: {e})"
        raise UserError(f"--resume: line {number} of {out} is {reason}; only a torn last line is cut, "
                        "so mend or remove that line first")
    return groups


def _tail_lines(path: Path, count: int) -> list[bytes]:
    if not path.exists():
        return []
    with path.open("rb") as f:
        return [line for line in f if line.strip()][-count:]
