"""sft (Atropos ``process``): groups from any OpenAI-compatible endpoint, saved as jsonl, many in flight
(``in_flight``: one adaptive request limit keeps as many groups going as the endpoint takes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vftui.collector.envs.base import Environment
from vftui.collector.modes import Driver, Endpoint, ModeContext, Sampling, ServeDriver
from vftui.collector.sft.in_flight import InFlight
from vftui.collector.sft.rollouts import SftRollouts
from vftui.config import RunConfig
from vftui.events import Event, Mode
from vftui.run_files.shards import share_of

PROCESS_SERVER = {"server_type": "openai", "health_check": False}
"""The server settings of atroposlib's process command: any OpenAI-compatible endpoint."""


def process_settings(config: RunConfig, groups_left: int) -> dict[str, Any]:
    """The env settings of atroposlib's process command (sft, eval): it counts the groups; every scored
    group is kept."""
    return {
        "total_steps": groups_left,
        "ensure_scores_are_not_same": False,
        "wandb_name": config.wandb_name,
    }


class SftCollection:
    mode = Mode.SFT
    item_range: int | None = None

    def __init__(
        self,
        config: RunConfig,
        emit: Callable[[Event], None],
        on_rate_limit: Callable[[int, float], None],
    ):
        self.config = config
        self.in_flight = InFlight(config, emit, on_rate_limit)

    def check(self, environment: Environment) -> None:
        share_of(
            self.config.own_shard, self.config.steps, "groups of --steps"
        )  # any environment the tokenizer renders

    def groups_total(self, environment: Environment) -> int:
        return self.config.own_shard.share(self.config.steps)  # --steps counts over all the shards

    def observe(self, event: Event) -> None:
        return None  # the run's own totals and health are enough

    def start(self, step: Callable[[str], None], endpoint: Endpoint) -> None:
        return None  # the endpoint is all it needs, and its model list was read

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        return process_settings(self.config, groups_left)

    def server_settings(self) -> dict[str, Any]:
        return dict(PROCESS_SERVER)

    def rollouts(self, sampling: Sampling, driver: ServeDriver) -> SftRollouts:
        return self.in_flight.rollouts(sampling)

    def tokens_written(self, count: int) -> None:
        self.in_flight.traffic.tokens(count)

    async def collect(self, context: ModeContext, driver: Driver) -> None:
        await self.in_flight.collect(context, driver)

    async def finish(self, context: ModeContext, driver: Driver) -> None:
        return None  # its files are the jsonl and the checkpoint, written as it goes

    def cancel(self) -> None:
        self.in_flight.cancel()

    def close(self) -> None:
        return None
