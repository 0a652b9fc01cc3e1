"""An eval's figures in a wandb row of their own, beside the env's rows, as wandb keeps rows: one a step,
what is logged again at a step merged into it, what is logged below its last step dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vftui.collector.wandb_rows import OwnRows

pytestmark = pytest.mark.unit


class Wandb:
    """What wandb keeps of ``log(figures, step)`` calls."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}
        self.dropped: list[dict] = []

    def log(self, figures: dict, step: int) -> None:
        if self.rows and step < max(self.rows):
            self.dropped.append(figures)
        else:
            self.rows.setdefault(step, {}).update(figures)


# each operation: an eval that finished (None) or the env's next row, that many steps on (0: the same step)
operations = st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=40)


@given(operations)
def test_every_eval_is_a_row_of_its_own_in_order_and_nothing_is_dropped(ops):
    rows, wandb, step, evals = OwnRows(), Wandb(), 0, 0
    for op in ops:
        if op is None:
            rows.add({"eval/n": evals})
            evals += 1
        else:
            step += op
            wandb.log({"env/step": step}, step)
            if (row := rows.take(step)) is not None:
                wandb.log(row, step)
    for at, row in rows.rest(step):
        wandb.log(row, at)
    assert not wandb.dropped
    logged = [row["eval/n"] for _, row in sorted(wandb.rows.items()) if "eval/n" in row]
    assert logged == list(range(evals)), "each eval once, none merged into another's row"


def test_two_evals_before_the_envs_next_step_take_the_next_two_steps():
    """What happened: both finished while the trainer stayed at one step, and wandb kept the second's figures."""
    rows = OwnRows()
    rows.add({"eval/pass@1": 0.2})
    rows.add({"eval/pass@1": 0.4})
    assert rows.take(6) == {"eval/pass@1": 0.2}
    assert rows.take(6) is None, "one row a step"
    assert list(rows.rest(6)) == [(7, {"eval/pass@1": 0.4})]
