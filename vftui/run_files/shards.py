"""A run's shard: one of N runs that split a dataset's items between them, each item in one of them.

Shard I of N takes the items whose index modulo N is I (0-based), in order: I, I + N, I + 2N...
So N runs with shards 0/N ... N-1/N of ``--steps S`` (or ``--num-examples S``) take together items
0 ... S-1, exactly the items one unsharded run of S takes, each once. A run counts its own items
by their position in its shard (its ledger and checkpoint), and writes each group with the item's
index in the whole dataset, so shards line up with each other and with unsharded runs.

In a SLURM job array each task is a shard by default (``from_slurm``). No heavy imports: the
views read shards too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vftui.bounds import LARGE
from vftui.errors import UserError

SLURM_TASK, SLURM_COUNT, SLURM_MIN, SLURM_STEP = (
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
)


@dataclass(frozen=True, order=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, item: int) -> bool:
        return item % self.count == self.index

    def item(self, position: int) -> int:
        """The dataset item at ``position`` in this shard's own order."""
        return self.index + position * self.count

    def position(self, item: int) -> int:
        """Where ``item`` (one of this shard's) is in its own order."""
        return (item - self.index) // self.count

    def share(self, total: int) -> int:
        """How many of the first ``total`` items are this shard's."""
        return len(range(self.index, total, self.count))

    def as_json(self) -> list[int]:
        return [self.index, self.count]


WHOLE = Shard(0, 1)  # an unsharded run: every item
MAX_COUNT = (
    LARGE  # shards of one run: a SLURM array's tasks are fewer; more is a typo or a damaged file
)


def share_of(shard: Shard, total: int, what: str) -> int:
    """The shard's share of the first ``total`` items; a shard that would collect none is refused."""
    share = shard.share(total)
    if share == 0:
        raise UserError(
            f"--shard {shard} takes none of the {total} {what} (its first would be item {shard.index}); "
            f"split them into at most {total} shards"
        )
    return share


def parse(value: Any) -> Shard:
    """``"I/N"`` as given, or ``[I, N]`` as saved; a ``ValueError`` says what does not fit."""
    if isinstance(value, Shard):
        return value
    if isinstance(value, str):
        first, slash, second = value.strip().partition("/")
        try:
            parts = [int(first), int(second)] if slash else []
        except ValueError:
            parts = []
        if not parts:
            raise ValueError(
                f"cannot read '{_shown(value)}': write I/N, this run's shard I of N (0-based), e.g. 0/4"
            )
    elif (
        isinstance(value, (list, tuple)) and len(value) == 2 and all(type(v) is int for v in value)
    ):
        parts = list(value)
    else:
        raise ValueError("write I/N, this run's shard I of N (0-based), e.g. 0/4")
    index, count = parts
    given = _shown(f"{index}/{count}")
    if count < 1:
        raise ValueError(f"{given}: N, the number of shards, must be 1 or more")
    if count > MAX_COUNT:
        raise ValueError(f"{given}: N, the number of shards, must be at most {MAX_COUNT:,}")
    if not 0 <= index < count:
        raise ValueError(f"{given}: shards are numbered from 0, so I must be 0 to {count - 1}")
    return Shard(index, count)


SHOWN = (
    40  # characters of a shard as given that a sentence shows (a damaged file's may be megabytes)
)


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}…"


def from_slurm(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """This SLURM array task's shard as ``("I/N", where it came from)``; None outside a job array.

    SLURM numbers an array's tasks from its ``--array`` minimum (often 1), in steps of its ``:step``;
    the shard is the task's place among them: (ID - MIN) / STEP of COUNT.
    """
    if SLURM_TASK not in environ or SLURM_COUNT not in environ:
        return None
    given = {name: environ.get(name) for name in (SLURM_TASK, SLURM_MIN, SLURM_STEP, SLURM_COUNT)}
    source = "from " + ", ".join(
        f"{name}={value}" for name, value in given.items() if value is not None
    )
    try:
        task, count = int(environ[SLURM_TASK]), int(environ[SLURM_COUNT])
        first, step = int(environ.get(SLURM_MIN, "0")), int(environ.get(SLURM_STEP, "1"))
    except ValueError:
        raise UserError(
            f"the SLURM job array's variables are not whole numbers ({source.removeprefix('from ')}); "
            "give --shard I/N"
        ) from None
    offset = task - first
    if step < 1 or offset < 0 or offset % step or offset // step >= count:
        raise UserError(
            f"cannot tell this task's shard from the SLURM job array ({source.removeprefix('from ')}): "
            "its tasks are not numbered MIN, MIN+STEP, ... up to COUNT of them; give --shard I/N"
        )
    return f"{offset // step}/{count}", source
