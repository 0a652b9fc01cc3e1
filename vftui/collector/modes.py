"""The seam between the run and its mode: what a mode is handed, and what it may ask of atroposlib.

A mode (sft: ``sft.collection``, rl: ``rl.collection``, eval: ``eval.collection``) never sees
atroposlib's objects nor ``VerifiersEnv``: it gets a ``ModeContext`` built once by the run, and
drives the env through the small ``ProcessDriver`` (sft, eval), ``EvalLog`` (eval) or
``ServeDriver`` (rl) that ``VerifiersEnv`` implements. ``Rollouts`` is how a mode gets a group's
rollouts and turns them into trainer tokens, bound to its ``Sampling`` when it is made; the run
and the env call these and never ask which mode they are in. ``Collection`` is what a mode is:
the members every mode must answer, and defaults that do nothing where a mode has nothing to add.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vftui.collector.envs.base import Environment, Rollout
from vftui.collector.gate import GroupGate
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized
from vftui.events import Event
from vftui.run_files.files import RunFiles


@dataclass(frozen=True)
class Endpoint:
    """The inference servers a run samples from (the first was asked for its models)."""

    base_urls: tuple[str, ...]
    model: str
    api_key: str = field(repr=False)
    timeout: float


@dataclass(frozen=True)
class Sampling:
    """What a group's rollouts are made with: the same under a vftui run and atroposlib's own CLI."""

    endpoint: Endpoint
    environment: Environment
    group_size: int
    max_tokens: int


@dataclass(frozen=True)
class ModeContext:
    """All a mode reads of its run while it collects, built once when the run is prepared."""

    sampling: Sampling
    files: RunFiles
    gate: GroupGate


class ProcessDriver(Protocol):
    """sft, eval: atroposlib's per-group steps, one group at a time each, many groups at once."""

    async def begin(self) -> None:
        """As atroposlib's process manager starts: its setup, wandb, the step count."""
        ...

    async def next_item(self) -> dict[str, Any] | None:
        """The next item to collect (waits while paused); None once stopping or enough are in flight."""
        ...

    async def process(self, item: dict[str, Any]) -> None:
        """One group through atroposlib's steps: collect, postprocess, write, log."""
        ...

    def release(self, item: dict[str, Any]) -> None:
        """Give back the slot of an item whose group never started."""
        ...

    def end(self) -> None:
        """Close the run's group writer."""
        ...


class EvalLog(Protocol):
    """eval: atroposlib's own eval files (``evaluate_log``)."""

    async def log_eval(
        self,
        folder: Path,
        metrics: dict[str, Any],
        samples: list[dict[str, Any]],
        model: str,
        span: tuple[float, float],
        temperature: float | None = None,
    ) -> None: ...


class ServeDriver(Protocol):
    """rl: atroposlib's serve loop and what a group needs of its servers and trainer."""

    unsent: int
    """Groups a stop cut off before the trajectory API took them."""

    async def serve(self) -> None:
        """atroposlib's serve loop (``env_manager``), until cancelled."""
        ...

    def servers(self) -> Sequence[Any]:
        """The inference servers as atroposlib sees them (opaque: ``server_watch`` reads them)."""
        ...

    def trainer_step(self) -> int: ...

    def log_row(self, figures: dict[str, float]) -> None:
        """``figures`` in a wandb row of their own, beside the env's next metrics."""
        ...

    def recorded_client(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """A client for one rollout through a ManagedServer, and the recorder of its turns."""
        ...

    def use_tool_parser(self, name: str | None) -> None: ...

    def evaluate_with(self, hook: Callable[[int], Awaitable[dict[str, float]]]) -> None:
        """atroposlib's ``evaluate`` hook, every ``steps_per_eval`` trainer steps, at the trainer's step."""
        ...


class Driver(ProcessDriver, EvalLog, ServeDriver, Protocol):
    """What the env offers every mode; each mode uses its own part."""


class Rollouts(Protocol):
    logprobs: bool  # whether groups carry the server's logprobs (``inference_logprobs``)

    async def attempt(self, item: dict[str, Any], temperature: float) -> list[Rollout]:
        """One try at the group's rollouts."""
        ...

    def time_limit_s(self) -> float | None:
        """A bound on one attempt as a whole, where the client does not bound each request."""
        ...

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        """The rollout's token ids and masks (and logprobs); ``TemplateMismatch`` when they cannot be trusted."""
        ...

    def group_meta(self) -> dict[str, Any]:
        """What the mode records of a group as it begins (rl: the trainer step, for the off-policy lag)."""
        ...


class Collection(ABC):
    """How a run collects in its mode; what a mode has nothing to add to does nothing here."""

    @property
    def item_range(self) -> int | None:
        """eval: how many items it collects (the first of its split, or of its shard), each once, set by ``check``:
        a dropped group is that example's error, done, and no item past them is collected; sft, rl: None (another
        item takes a dropped group's place)."""
        return None

    @abstractmethod
    def check(self, environment: Environment) -> None:
        """Refuse, with one sentence, what this mode cannot collect; take the items it collects (eval: its split)."""

    @abstractmethod
    def groups_total(self, environment: Environment) -> int:
        """The groups the run collects in all (sft, rl: --steps; eval: the examples it evaluates)."""

    @abstractmethod
    def env_settings(self, groups_left: int) -> dict[str, Any]:
        """The atroposlib env config fields this mode sets, for a run with ``groups_left`` to collect."""

    @abstractmethod
    def server_settings(self) -> dict[str, Any]:
        """The atroposlib server config fields this mode sets."""

    @abstractmethod
    def rollouts(self, sampling: Sampling, driver: ServeDriver) -> Rollouts:
        """How this mode gets a group's rollouts (rl: through the driver's ManagedServer)."""

    @abstractmethod
    async def collect(self, context: ModeContext, driver: Driver) -> None:
        """Collect until the groups are done or a stop; raises the run's failure."""

    @abstractmethod
    def cancel(self) -> None:
        """A second stop: cancel the groups in flight."""

    def observe(self, event: Event) -> None:
        """Every event of the run as it is emitted, a resumed run's earlier groups first (eval tallies them)."""
        return None

    def start(self, step: Callable[[str], None], endpoint: Endpoint) -> None:
        """Check the endpoints as this mode uses them and start what it needs beside them, saying each step
        (rl: its servers, the trajectory API, the sim trainer)."""
        return None

    def tokens_written(self, count: int) -> None:
        """Generated tokens of each group written (sft, eval count them into their traffic figures)."""
        return None

    async def finish(self, context: ModeContext, driver: Driver) -> None:
        """After the run's last group is on disk, however it ended (or when a resume found nothing left)."""
        return None

    def close(self) -> None:
        """Stop what ``start`` started."""
        return None
