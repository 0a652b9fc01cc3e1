"""sft (Atropos ``process``): groups from any OpenAI-compatible endpoint, saved as jsonl, many in flight
(``in_flight``: one adaptive request limit keeps as many groups going as the endpoint takes)."""

from __future__ import annotations

from vftui.collector.envs.base import Environment
from vftui.collector.sft.in_flight import InFlight
from vftui.run_files.shards import share_of


class SftCollection(InFlight):
    """--steps groups of any environment the tokenizer renders; its files are the jsonl and the checkpoint,
    written as it goes."""

    def check(self, environment: Environment) -> None:
        share_of(self.config.own_shard, self.config.steps, "groups of --steps")

    def groups_total(self, environment: Environment) -> int:
        return self.config.own_shard.share(self.config.steps)  # --steps counts over all the shards
