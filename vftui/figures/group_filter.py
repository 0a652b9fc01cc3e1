"""The groups filter: the dashboard's ``/``, ``vftui view``'s and ``vftui export --where``'s one language.

A filter is terms that must all hold (``varied reward<0.8 turns>=2``) over a group as the table
shows it: a live ``GroupCollected``, a file's row, a group read for export.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from vftui.figures import stats

FILTER_TERM = re.compile(
    r"^(reward|mean|std|item|turns|t|length|secs)\s*(<=|>=|<|>|=)\s*(-?[\d.]+)$"
)
FILTER_HELP = (
    "terms: identical, varied, reward>0.5, std<0.1, item=3, turns>=2, t<=0.7, length>500, secs>10 "
    "(all must hold)"
)


class Shown(Protocol):
    """A group as the table, its orders and its filter read it: a live ``GroupCollected`` or a file's row."""

    @property
    def item(self) -> int: ...
    @property
    def scores(self) -> Sequence[float]: ...
    @property
    def turns(self) -> Sequence[float]: ...
    @property
    def temperature(self) -> float: ...
    @property
    def completion_length(self) -> float: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def identical(self) -> bool: ...


# The table's orders (o cycles them): as groups came, or the items that most need a look first.
def _term(
    value: Callable[[Shown], float],
    compare: Callable[[float, float], bool],
    number: float,
) -> Callable[[Shown], bool]:
    """One ``field<number`` term of a filter."""
    return lambda g: compare(value(g), number)


def parse_filter(text: str) -> Callable[[Shown], bool]:
    """A predicate from a filter like ``varied reward<0.8``; bad syntax is a ValueError."""
    checks: list[Callable[[Shown], bool]] = []
    for term in text.split():
        if term == "identical":
            checks.append(lambda g: g.identical)
        elif term in ("varied", "!identical"):  # scores that differ: a group of one has none to
            checks.append(lambda g: stats.alike(g.scores) is False)
        elif match := FILTER_TERM.match(term):
            field_name, op, number = match.group(1), match.group(2), float(match.group(3))
            value = {
                "reward": lambda g: stats.mean(g.scores),
                "mean": lambda g: stats.mean(g.scores),
                "std": lambda g: stats.population_std(g.scores),
                "item": lambda g: g.item,
                "turns": lambda g: stats.mean([float(t) for t in g.turns]),
                "t": lambda g: g.temperature,
                "length": lambda g: g.completion_length,
                "secs": lambda g: g.elapsed_s,
            }[field_name]
            compare = {
                "<": operator.lt,
                "<=": operator.le,
                ">": operator.gt,
                ">=": operator.ge,
                "=": operator.eq,
            }[op]
            checks.append(_term(value, compare, number))
        else:
            raise ValueError(f"cannot read '{term}'; {FILTER_HELP}")
    return lambda g: all(check(g) for check in checks)
