"""RunConfig: the shared settings, eval's and rl's in one flat model (fields in that order: ``run --help``,
VFTUI_* names, config-file keys and run.json stay flat); the rules over several settings run in one order."""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from vftui.config.eval import EvalSettings
from vftui.config.fields import SharedSettings, flag_of
from vftui.config.rl import RlSettings
from vftui.text.redact import scrub

URL_SETTINGS = (
    "base_url",
    "extra_base_urls",
    "api_url",
)  # shown and saved with any password hidden
RULES = (
    RlSettings.eval_every_is_rls,
    EvalSettings.eval_gates_are_evals,
    EvalSettings.pass_at_k_is_reported,
    RlSettings.slurm_is_rls,
    RlSettings.slurm_or_base_url,
    SharedSettings.sim_latency_is_the_simulations,
    SharedSettings.env_server_is_not_rls,
    RlSettings.no_shard_in_rl,
    RlSettings.several_base_urls_are_rls,
)  # when two fail, the first one's sentence is the one said


class RunConfig(RlSettings, EvalSettings):
    """One run's settings, each with its default and its ``--help`` text (the CLI is built from them).

    ``base_url=None`` means the embedded simulation.
    """

    @model_validator(mode="after")
    def _rules(self) -> RunConfig:
        for rule in RULES:
            rule(self)
        return self

    def public_dict(self) -> dict[str, Any]:
        """The settings as saved beside a run and sent to wandb: no key is among them, and a URL's password is
        hidden."""
        data = self.model_dump(mode="json")
        for key in ("resume", "no_ui", "json_events", "theme"):
            data.pop(key)
        for key in URL_SETTINGS:
            value = data[key]
            data[key] = (
                [scrub(url) for url in value] if isinstance(value, list) else value and scrub(value)
            )
        return data


FLAG_OF_FIELD = {
    name: flag_of(name, field) or name for name, field in RunConfig.model_fields.items()
}
