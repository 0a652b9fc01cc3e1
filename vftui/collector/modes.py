"""What differs between modes, behind two interfaces with one implementation per mode.

``Rollouts`` is how a group's rollouts are got and turned into trainer tokens (for the
atroposlib env, group by group); ``Collection`` is how a run collects: what it checks and
starts first, the atroposlib settings it needs, the loop that drives the env, and what it
stops at the end. sft (``sft.collection``), rl (``rl.collection``) and eval (``eval.collection``,
sft's machinery on the eval split) implement both; the
run and the env call these methods and never ask which mode they are in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, assert_never

from vftui.collector.envs.base import Environment, Rollout
from vftui.collector.tokens import ChatTemplateTokenizer, Tokenized
from vftui.config import RunConfig
from vftui.errors import RunFailed
from vftui.events import Event, Mode

if TYPE_CHECKING:
    from vftui.collector.gate import GroupGate
    from vftui.collector.verifiers_env import VerifiersEnv


class Rollouts(Protocol):
    logprobs: bool  # whether groups carry the server's logprobs (``inference_logprobs``)

    async def attempt(
        self, env: VerifiersEnv, item: dict[str, Any], temperature: float
    ) -> list[Rollout]:
        """One try at the group's rollouts."""
        ...

    def time_limit_s(self, env: VerifiersEnv) -> float | None:
        """A bound on one attempt as a whole, where the client does not bound each request."""
        ...

    def tokenize(
        self, tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], rollout: Rollout
    ) -> Tokenized:
        """The rollout's token ids and masks (and logprobs); ``TemplateMismatch`` when they cannot be trusted."""
        ...

    def group_meta(self, env: VerifiersEnv) -> dict[str, Any]:
        """What the mode records of a group as it begins (rl: the trainer step, for the off-policy lag)."""
        ...


class Collection(Protocol):
    mode: Mode
    rollouts: Rollouts
    fail: Callable[[RunFailed], None] | None
    """rl: ends the run with a group's failure (atroposlib's serve loop would log and drop it); sft: None, it raises."""
    item_range: int | None
    """eval: how many items it collects (the first of its split, or of its shard), each once, set by ``check``: a
    dropped group is that example's error, done, and no item past them is collected; sft, rl: None (another item
    takes a dropped group's place)."""

    def check(self, environment: Environment) -> None:
        """Refuse, with one sentence, what this mode cannot collect; take the items it collects (eval: its split)."""
        ...

    def groups_total(self, environment: Environment) -> int:
        """The groups the run collects in all (sft, rl: --steps; eval: the examples it evaluates)."""
        ...

    def observe(self, event: Event) -> None:
        """Every event of the run as it is emitted, a resumed run's earlier groups first (eval tallies them)."""
        ...

    def start(self, step: Callable[[str], None], base_urls: tuple[str, ...], api_key: str) -> None:
        """Check the endpoints as this mode uses them and start what it needs beside them, saying each step."""
        ...

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        """The atroposlib env config fields this mode sets, for a run with ``groups_left`` to collect."""
        ...

    def server_settings(self) -> dict[str, Any]:
        """The atroposlib server config fields this mode sets."""
        ...

    def configure(self, env: VerifiersEnv) -> None:
        """Set up the env atroposlib built, as atroposlib's own command for this mode does."""
        ...

    def tokens_written(self, count: int) -> None:
        """Generated tokens of each group written (sft counts them into its traffic figures)."""
        ...

    async def collect(self, env: VerifiersEnv, gate: GroupGate) -> None:
        """Collect until the groups are done or a stop; raises the run's failure."""
        ...

    async def finish(self, env: VerifiersEnv) -> None:
        """After the run's last group is on disk, however it ended (or when a resume found nothing left)."""
        ...

    def cancel(self) -> None:
        """A second stop: cancel the groups in flight."""
        ...

    def close(self) -> None:
        """Stop what ``start`` started."""
        ...


def collection_for(
    config: RunConfig, emit: Callable[[Event], None], on_rate_limit: Callable[[int, float], None]
) -> Collection:
    """The run's mode, as the object that collects in it."""
    from vftui.collector.eval.collection import EvalCollection
    from vftui.collector.rl.collection import RlCollection
    from vftui.collector.sft.collection import SftCollection

    match config.mode:
        case Mode.SFT:
            return SftCollection(config, emit, on_rate_limit)
        case Mode.EVAL:
            return EvalCollection(config, emit, on_rate_limit)
        case Mode.RL:
            return RlCollection(config, emit)
        case _:
            assert_never(config.mode)
