"""One compare source as JSON lines: how ``vftui compare`` brings a source from another machine.

The vftui there reads it (``vftui compare --export-source -- PATH``) and writes it as one ``source`` line (what
it is, how it was made, its group means) and one ``item`` line each; ``SourceAnswer`` reads that here as the
pipe hands it over, every value checked as hostile input: a number that is no finite score, a count out of
range, a text that is no string, a value nested past ``bounds.MAX_NESTING``. An item line that does not check
is left out and counted (a warning of the source); an answer without its ``source`` line is a sentence.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeGuard

from vftui import bounds
from vftui.errors import UserError
from vftui.run_files.bounded_lines import BoundedLines
from vftui.run_files.results import Item, Rollouts, Setup, Source
from vftui.text.json_lines import finite_json, shown

FORM = 1  # of these lines: a vftui that writes another is refused, never misread
MAX_TEXT = (
    100_000  # characters of a name, a key or a warning (messages are bounded by the answer's size)
)
# Every line is kept (an item's rollouts), so what the answer parses to is bounded by its values, all lines
# together (``bounded_lines.values``, at most ``VALUE_BYTES`` each: 8 million, some 600 MB for an answer of ``{}``,
# of which 100 MB held 2.9 GB), and one item's line by its bytes (its text is held once more as it is parsed).
MAX_VALUES, MAX_LINE_BYTES = 8 * 10**6, 64 * 1024**2


def export(source: Source) -> Iterator[str]:
    """``source`` as lines (no newline): its ``source`` line first, then an ``item`` line each."""
    setup = source.setup
    head = {
        "form": FORM,
        "kind": source.kind,
        "env_id": source.env_id,
        "skipped": source.skipped,
        "threshold": source.threshold,
        "errors": source.errors,
        "warnings": source.warnings,
        "group_means": source.group_means,
        "setup": {
            "model": setup.model,
            "temperatures": list(setup.temperatures),
            "env_args": setup.env_args,
            "split": setup.split,
            "versions": setup.versions,
        },
    }
    yield json.dumps({"source": head}, allow_nan=False)
    for item in source.items.values():
        body = {
            "key": item.key,
            "rewards": list(item.rewards),
            "functions": {name: list(values) for name, values in item.functions.items()},
            "truncated": list(item.truncated),
            "completion_chars": list(item.completion_chars),
            "rollouts": finite_json(list(item.rollouts)),  # a foreign file's message may hold a NaN
            "tokens": [list(t) if t is not None else None for t in item.tokens],
            "prompt": item.prompt,
        }
        yield json.dumps({"item": body}, allow_nan=False)


class SourceAnswer(BoundedLines):
    """A host's ``--export-source`` answer, read as the pipe hands it over (``fleet``'s ``Answer`` is its
    kind for ``runs``): the source once its lines end, its path ``HOST:PATH``; an item's line past
    ``MAX_LINE_BYTES`` is left out, and past ``MAX_VALUES`` in all the reader stops (``spent``)."""

    def __init__(self, host: str, path: str) -> None:
        super().__init__(MAX_LINE_BYTES, budget=MAX_VALUES)
        self.host, self.path = host, path
        self.source: Source | None = None

    def end(self) -> Source:
        """The source; a ``UserError`` when no ``source`` line came first."""
        self.close()
        if self.source is None:
            raise UserError(
                f"{self.host}: its vftui answered no compare source for {self.path} "
                f"({self.why or 'nothing at all'})"
            )
        if self.left_out:
            self.source.warnings.append(self.left_out_said(self.host))
        return self.source

    def _line(self, line: bytes) -> None:
        try:
            value = bounds.load_json(line)
            if not isinstance(value, dict) or len(value) != 1:
                raise ValueError("not a 'source' or an 'item' line")
            if self.source is None:
                self.source = _source(value.get("source"), Path(f"{self.host}:{self.path}"))
            else:
                item = _item(value.get("item"))
                if item.key in self.source.items:
                    raise ValueError(f"item {shown(item.key)} a second time")
                self.source.items[item.key] = item
        except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
            self._leave_out(_said(e, line))


def _said(error: Exception, line: bytes) -> str:
    if isinstance(error, json.JSONDecodeError | UnicodeDecodeError):
        return f"not JSON: {shown(line)}"
    return str(error)


def _source(head: Any, path: Path) -> Source:
    """The ``source`` line's fields as a source with no items yet; a ``ValueError`` naming the first that is
    not of its kind."""
    if not isinstance(head, dict):
        raise ValueError("the first line is no 'source' line")
    if head.get("form") != FORM:
        raise ValueError(
            f"its form {reprlib.repr(head.get('form'))} is not this vftui's ({FORM}): "
            "run the same vftui version on both machines"
        )
    setup = head.get("setup")
    if not isinstance(setup, dict):
        raise ValueError("setup is not an object")
    return Source(
        path,
        _text(head, "kind"),
        _text(head, "env_id"),
        {},
        _count(head, "skipped"),
        _score(head, "threshold", none=True),
        _count(head, "errors"),
        _list(head, "warnings", _is_text),
        Setup(
            _text(setup, "model", none=True),
            tuple(_scores(setup, "temperatures")),
            _text(setup, "env_args", none=True),
            _text(setup, "split", none=True),
            _text(setup, "versions", none=True),
        ),
        _scores(head, "group_means"),
    )


def _item(body: Any) -> Item:
    """An ``item`` line's fields as an item: a reward each rollout, and as many of each per-rollout figure."""
    if not isinstance(body, dict):
        raise ValueError("not an 'item' line")
    functions = body.get("functions")
    if not isinstance(functions, dict) or not all(
        isinstance(k, str) and len(k) <= MAX_TEXT for k in functions
    ):
        raise ValueError("functions is not an object of named lists")
    tokens = _list(body, "tokens", lambda t: t is None or _is_pair(t))
    item = Item(
        _text(body, "key"),
        _scores(body, "rewards"),
        {name: _scores(functions, name) for name in functions},
        _list(body, "truncated", lambda v: type(v) is bool),
        _list(body, "completion_chars", _is_count),
        Rollouts(
            _list(
                body,
                "rollouts",
                lambda r: isinstance(r, list) and all(isinstance(m, dict) for m in r),
            )
        ),
        [tuple(t) if t is not None else None for t in tokens],
        # a vftui before prompts were kept sends none: its items pair by id alone
        _text(body, "prompt", none=True),
    )
    rollouts = len(item.rewards)
    counts = (len(item.truncated), len(item.completion_chars), len(item.rollouts), len(item.tokens))
    if not rollouts or any(n != rollouts for n in counts):
        raise ValueError(
            f"item {shown(item.key)} has no reward, or not one of each figure a rollout"
        )
    return item


def _text(d: dict[str, Any], key: str, none: bool = False) -> Any:
    value = d.get(key)
    if (value is None and none) or _is_text(value):
        return value
    raise ValueError(f"{key} is not a text of at most {MAX_TEXT:,} characters")


def _score(d: dict[str, Any], key: str, none: bool = False) -> float | None:
    value = d.get(key)
    if value is None and none:
        return None
    if not _is_score(value):
        raise ValueError(f"{key} {bounds.refusal(value)}")
    return float(value)


def _count(d: dict[str, Any], key: str) -> int:
    value = d.get(key)
    if not _is_count(value):
        raise ValueError(f"{key} {reprlib.repr(value)} is not a count (0 to {bounds.HUGE:.0e})")
    return int(value)


def _list(d: dict[str, Any], key: str, check: Callable[[Any], bool]) -> list[Any]:
    values = d.get(key)
    if not isinstance(values, list):
        raise ValueError(f"{key} is not a list")
    for value in values:
        if not check(value):
            raise ValueError(f"{key} holds {reprlib.repr(value)}, not one of its kind")
    return values


def _scores(d: dict[str, Any], key: str) -> list[float]:
    """A list of finite scores, each a float (an int ``1`` as ``1.0``, as the readers make them)."""
    return [float(v) for v in _list(d, key, _is_score)]


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT


def _is_score(value: Any) -> TypeGuard[float]:
    return bounds.score(value) is not None


def _is_count(value: Any) -> TypeGuard[int]:
    return type(value) is int and 0 <= value <= bounds.HUGE


def _is_pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(map(_is_count, value))
