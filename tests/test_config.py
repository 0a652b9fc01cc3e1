"""RunConfig made of the shared settings and each mode's own: one flat model, its rules in one order."""

from __future__ import annotations

import pytest

from vftui.config import RunConfig, load_config
from vftui.config.eval import EvalSettings
from vftui.config.fields import SharedSettings
from vftui.config.rl import RlSettings
from vftui.errors import UserError

pytestmark = pytest.mark.unit


def test_the_settings_are_flat_shared_then_evals_then_rls():
    """The order of ``run --help``, of run.json's keys and of the first complaint about several fields."""
    shared = list(SharedSettings.model_fields)
    evals = [name for name in EvalSettings.model_fields if name not in shared]
    rls = [name for name in RlSettings.model_fields if name not in shared]
    assert list(RunConfig.model_fields) == [*shared, *evals, *rls]
    assert evals == ["num_examples", "rollouts_per_example", "pass_threshold"]


URL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        ({"eval_every": 2, "fail_on": "pass@1<0.5"}, "--eval-every is for --mode rl"),
        ({"fail_on": "pass@1<0.5", "slurm": True}, "--fail-on pass@1<0.5 is a gate over an eval's"),
        (
            {"mode": "eval", "rollouts_per_example": 2, "fail_on": "pass@4<0.5", "slurm": True},
            "--fail-on pass@4: an eval of 2 rollout(s)",
        ),
        ({"slurm": True, "sim_latency": 1.0}, "--slurm finds rl's inference servers"),
        (
            {"mode": "rl", "slurm": True, "base_url": URL, "sim_latency": 1.0},
            "--slurm finds the inference servers in the SLURM allocation, so",
        ),
        ({"base_url": URL, "extra_base_urls": [URL], "sim_latency": 1.0}, "--sim-latency slows"),
        ({"mode": "rl", "base_url": URL, "sim_latency": 1.0, "shard": "0/2"}, "--sim-latency"),
    ],
)
def test_when_two_rules_fail_the_first_in_their_order_is_said(flags, sentence):
    with pytest.raises(UserError) as refused:
        load_config(flags, environ={})
    assert str(refused.value).startswith(sentence)
