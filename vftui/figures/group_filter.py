"""The groups filter: the dashboard's ``/``, ``vftui view``'s and ``vftui export --where``'s one language.

A filter is terms that must all hold (``varied reward<0.8 turns>=2``) over a group as the table
shows it: a live ``GroupCollected``, a file's row, a group read for export.
"""

from __future__ import annotations

import json
import operator
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from vftui import stats

FILTER_TERM = re.compile(
    r"^(reward|mean|std|item|turns|t|length|secs)\s*(<=|>=|<|>|=)\s*(-?[\d.]+)$"
)
FILTER_HELP = (
    "terms: identical, varied, reward>0.5, std<0.1, item=3, turns>=2, t<=0.7, length>500, secs>10, "
    '~word or ~"a phrase" (in a prompt, completion or tool call, any case) (all must hold)'
)
SEARCH = "~"


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


class Searchable(Protocol):
    @property
    def messages(self) -> Sequence[Sequence[dict[str, Any]]]: ...


Search = Callable[[str], Callable[[Any], bool]]
"""What a ``~needle`` term becomes: a check of a group, given the needle in lower case."""


def searchable(conversations: Sequence[Sequence[Any]]) -> str:
    """The words a text search looks in, lower-cased: every message's content (its text parts),
    reasoning, and each tool call's name and arguments, of every rollout."""
    found: list[str] = []
    for messages in conversations:
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, dict):
                continue
            found += _texts(message.get("content"))
            found += _texts(message.get("reasoning_content"))
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    function = call.get("function")
                    inner = function if isinstance(function, dict) else call
                    found += _texts(inner.get("name")) + _texts(inner.get("arguments"))
    return "\n".join(found).lower()


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if isinstance(value, dict):
        return [json.dumps(value)]
    return []


def in_messages(needle: str) -> Callable[[Searchable], bool]:
    """A group in memory (its messages at hand) holds ``needle``."""
    return lambda g: needle in searchable(g.messages)


def search_terms(text: str) -> list[str]:
    """The needles of a filter's ``~`` terms, lower-cased (a ValueError for unbalanced quotes)."""
    return [term[1:].lower() for term in _terms(text) if term.startswith(SEARCH) and term[1:]]


def _terms(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:  # "No closing quotation"
        raise ValueError(f"cannot read the filter: {str(e).lower()}") from None


def parse_filter(text: str, search: Search = in_messages) -> Callable[[Any], bool]:
    """A predicate from a filter like ``varied reward<0.8 ~sorted``; bad syntax is a ValueError.
    ``search`` makes a ``~needle`` term's check: by default over the group's own messages."""
    checks: list[Callable[[Shown], bool]] = []
    for term in _terms(text):
        if term.startswith(SEARCH):
            if not term[1:]:
                raise ValueError(f"'~' searches for what follows it; {FILTER_HELP}")
            checks.append(search(term[1:].lower()))
        elif term == "identical":
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
