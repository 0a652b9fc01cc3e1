"""Collected rollouts to a training set: picked, deduplicated and written in the shape a trainer reads.

Every source ``compare`` reads is read as groups (``results.viewed``: a vftui run or eval, shards,
dumps, verifiers v1 eval folders, prime-rl rollouts, vf-eval results), one group a line, streamed.
A group passes ``--where`` (the dashboard's filter, ``figures.group_filter``); then each rollout is
kept or left out for one reason, counted: its reward is not a number, below ``--min-reward``, cut at
the length limit (``--drop-truncated``), past the group's ``--best-of`` N (ties: the earlier rollout),
or an exact repeat of a completion already kept for the same prompt (``--dedupe``). Formats:

- ``prime-rl``: prime-rl's SFT data (its ``scripts/export_sft.py``): a parquet with ``messages``
  (OpenAI chat wire dicts) and ``tools`` (a JSON string), one row per rollout;
- ``messages``: TRL's conversational shape, ``messages`` and ``tools``, as jsonl (``tools`` a list) or,
  for a ``.parquet`` name, parquet (``tools`` a JSON string, as prime-rl's);
- ``atropos``: Atropos's ScoredDataGroup jsonl, the kept rollouts of each group with the tokens and
  masks they were collected with (never tokenized again).

A dataset is written under a temporary name beside it and renamed whole at the end: a crash or a Ctrl-C
leaves no half-written dataset that looks whole.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui import bounds, safe_files
from vftui.bounds import LongLine
from vftui.errors import UserError
from vftui.events import GroupCollected
from vftui.figures.group_filter import Shown
from vftui.group_format import META
from vftui.run_files.export_formats import REASONS
from vftui.run_files.groupfile import group_event
from vftui.run_files.results import viewed
from vftui.run_files.shard_folder import ShardedRun
from vftui.text.printable import one_line

MAX_LINE = 256 * 1024**2
PER_ROLLOUT = (
    "tokens",
    "masks",
    "scores",
    "messages",
    "inference_logprobs",
    "advantages",
    "ref_logprobs",
)
PER_ROLLOUT_META = ("finish_reasons", "turns", "stripped_end_of_turn")
MESSAGE_KEYS = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")


@dataclass(frozen=True)
class Selection:
    where: Callable[[Shown], bool] | None = None
    min_reward: float | None = None
    drop_truncated: bool = False
    best_of: int | None = None
    dedupe: bool = False


@dataclass
class Tally:
    """What was read, what was kept, and why the rest was not."""

    groups: int = 0
    groups_kept: int = 0
    rollouts: int = 0
    kept: int = 0
    rows: int = 0
    left_out: collections.Counter[str] = field(default_factory=collections.Counter)
    unreadable: int = 0  # lines that are not a group
    first_unreadable: str = ""


def groups_of(source: Path, tally: Tally) -> Iterator[tuple[dict[str, Any], GroupCollected]]:
    """Each group of ``source`` as its raw line and as the view reads it, in file order."""
    found, _ = viewed(source)
    paths = [run.path for run in found.runs] if isinstance(found, ShardedRun) else [found]
    for path in paths:
        with safe_files.open_to_read(path) as f:
            for number, line in enumerate(bounds.read_lines(f, MAX_LINE), start=1):
                if isinstance(line, LongLine) or not line.strip():
                    if isinstance(line, LongLine):
                        _unreadable(
                            tally, f"{path.name} line {number}: {bounds.too_long(line, MAX_LINE)}"
                        )
                    continue
                try:
                    raw = json.loads(line)
                    found_group = _group(number, raw)
                except (ValueError, TypeError, KeyError, RecursionError) as e:
                    if isinstance(e, json.JSONDecodeError):
                        why = "not JSON"
                    elif isinstance(e, UnicodeDecodeError):
                        why = "not UTF-8 text"
                    else:
                        why = str(e) if isinstance(e, ValueError) else type(e).__name__
                    _unreadable(tally, f"{path.name} line {number}: {why}")
                    continue
                yield raw, found_group


def _group(number: int, raw: Any) -> GroupCollected:
    """A line's group, its per-rollout columns checked to line up with its scores (an Atropos group
    whose tokens outnumber its scores would be written misaligned). A score that is no number
    stays NaN: that rollout is left out as ``no_reward``, the group's others are not."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    scores = raw.get("scores")
    if not isinstance(scores, list) or not scores:
        raise ValueError("no scores")
    n = len(scores)
    for key in PER_ROLLOUT:
        column = raw.get(key)
        if column is not None and (not isinstance(column, list) or len(column) != n):
            size = f"{len(column)} entries" if isinstance(column, list) else type(column).__name__
            raise ValueError(f"its {key} ({size}) do not line up with its {n} scores")
    messages = raw.get("messages")
    if messages is not None and not all(
        isinstance(m, list) and all(isinstance(x, dict) for x in m) for m in messages
    ):
        raise ValueError("its messages are not lists of chat messages")
    numbers = [bounds.score(s) for s in scores]
    if None not in numbers:
        return group_event(number, raw)
    stand_in = dict(raw, scores=[0.0 if v is None else v for v in numbers])
    return dataclasses.replace(
        group_event(number, stand_in), scores=[math.nan if v is None else v for v in numbers]
    )


def _unreadable(tally: Tally, said: str) -> None:
    tally.unreadable += 1
    tally.first_unreadable = tally.first_unreadable or one_line(said)[:200]


def _digest(value: Any) -> bytes:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).digest()


class Picker:
    """Which rollouts of each group are kept; remembers kept completions for ``--dedupe``."""

    def __init__(self, selection: Selection, tally: Tally, need_messages: bool) -> None:
        self.selection, self.tally, self.need_messages = selection, tally, need_messages
        self.seen: set[bytes] = set()

    def kept(self, raw: dict[str, Any], group: GroupCollected) -> list[int]:
        s, tally = self.selection, self.tally
        n = len(group.scores)
        tally.groups += 1
        tally.rollouts += n
        if s.where is not None and not s.where(group):
            tally.left_out["where"] += n
            return []
        candidates = []
        for i in range(n):
            reason = self._reason(raw, group, i)
            if reason:
                tally.left_out[reason] += 1
            else:
                candidates.append(i)
        if s.best_of is not None and len(candidates) > s.best_of:
            best = sorted(candidates, key=lambda i: (-group.scores[i], i))[: s.best_of]
            tally.left_out["not_best"] += len(candidates) - len(best)
            candidates = sorted(best)
        if s.dedupe:
            candidates = [i for i in candidates if self._first_of_its_kind(group, i)]
        if candidates:
            tally.groups_kept += 1
        tally.kept += len(candidates)
        return candidates

    def _reason(self, raw: dict[str, Any], group: GroupCollected, i: int) -> str:
        s = self.selection
        score = group.scores[i] if i < len(group.scores) else math.nan
        messages = group.messages[i] if i < len(group.messages) else []
        if self.need_messages and not messages:
            return "no_messages"
        if self.need_messages and not all(_chat_shaped(m) for m in messages):
            return "not_chat"
        if not math.isfinite(score):
            return "no_reward"
        if s.min_reward is not None and score < s.min_reward:
            return "low_reward"
        reasons = group.finish_reasons
        if s.drop_truncated and i < len(reasons) and reasons[i] == "length":
            return "truncated"
        return ""

    def _first_of_its_kind(self, group: GroupCollected, i: int) -> bool:
        messages = group.messages[i] if i < len(group.messages) else None
        # one prompt and one completion: the whole conversation, which they make
        key = _digest(messages if messages else list(group.tokens[i]))
        if key in self.seen:
            self.tally.left_out["duplicate"] += 1
            return False
        self.seen.add(key)
        return True


def _chat_shaped(message: dict[str, Any]) -> bool:
    """What ``wire_message`` writes without losing anything: text content (a string, or parts that
    are all text), and tool calls that each name a function."""
    content = message.get("content")
    if not (content is None or isinstance(content, str) or _text_parts(content) is not None):
        return False
    calls = message.get("tool_calls")
    if calls is None:
        return True
    return isinstance(calls, list) and all(
        isinstance(c, dict) and isinstance(_function(c).get("name", c.get("name")), str)
        for c in calls
    )


def _text_parts(content: Any) -> str | None:
    """Content parts that are all text, joined; None where one is not (an image)."""
    if not isinstance(content, list):
        return None
    texts = [
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    return "".join(texts) if len(texts) == len(content) else None


def wire_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message in OpenAI's chat wire shape, every key of ``MESSAGE_KEYS`` present (None where absent),
    so each row has one schema; content parts that are all text are joined into one string."""
    out: dict[str, Any] = {key: _text(message.get(key)) for key in MESSAGE_KEYS}
    parts = _text_parts(message.get("content"))
    if parts is not None:
        out["content"] = parts
    calls = message.get("tool_calls")
    out["tool_calls"] = [_wire_call(c) for c in calls if isinstance(c, dict)] if calls else None
    return out


def _function(call: dict[str, Any]) -> dict[str, Any]:
    found = call.get("function")
    return found if isinstance(found, dict) else {}


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call in OpenAI's nested shape, from it or from verifiers' flat one (id, name, arguments)."""
    function = _function(call)
    return {
        "id": _text(call.get("id")),
        "type": "function",
        "function": {
            "name": _text(function.get("name", call.get("name"))),
            "arguments": _arguments(function.get("arguments", call.get("arguments"))),
        },
    }


def _text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def rows(
    fmt: str, raw: dict[str, Any], group: GroupCollected, kept: list[int], parquet: bool
) -> list[dict[str, Any]]:
    """What ``kept`` rollouts of a group become: rows of messages, or one Atropos group."""
    if not kept:
        return []
    if fmt == "atropos":
        return [_atropos_group(raw, kept)]
    tools = raw.get("tools") or []
    tools_column: Any = json.dumps(tools) if (fmt == "prime-rl" or parquet) else tools
    return [
        {"messages": [wire_message(m) for m in group.messages[i]], "tools": tools_column}
        for i in kept
    ]


def _atropos_group(raw: dict[str, Any], kept: list[int]) -> dict[str, Any]:
    n = len(raw["scores"])
    out = dict(raw)
    for key in PER_ROLLOUT:
        if isinstance(raw.get(key), list) and len(raw[key]) == n:
            out[key] = [raw[key][i] for i in kept]
    meta = raw.get(META)
    if isinstance(meta, dict):
        meta = dict(meta)
        for key in PER_ROLLOUT_META:
            if isinstance(meta.get(key), list) and len(meta[key]) == n:
                meta[key] = [meta[key][i] for i in kept]
        if isinstance(meta.get("metrics"), dict):
            meta["metrics"] = {
                k: [v[i] for i in kept] if isinstance(v, list) and len(v) == n else v
                for k, v in meta["metrics"].items()
            }
        out[META] = meta
    return out


class Written:
    """A dataset being written under a temporary name beside ``out``; ``done`` renames it whole."""

    def __init__(self, out: Path, force: bool) -> None:
        self.out, self.force = out, force
        if out.exists() or out.is_symlink():
            if out.is_symlink() or not out.is_file():
                raise UserError(
                    f"{one_line(str(out))} is not a regular file; vftui writes only a file"
                )
            if not force:
                raise UserError(
                    f"{one_line(str(out))} exists: name a new file, or pass --force to replace it"
                )
        if not out.parent.is_dir():
            raise UserError(f"{one_line(str(out.parent))}: no such folder")
        self.tmp = out.with_name(f".{out.name}.{secrets.token_hex(4)}.part")

    def create(self) -> int:
        """The temporary file, new; a folder it cannot be made in is one sentence."""
        try:
            return safe_files.create_new(self.tmp, 0o644)
        except OSError as e:
            raise UserError(
                f"cannot write in {one_line(str(self.out.parent))}: {e.strerror or e}"
            ) from None

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.tmp.unlink()

    def done(self) -> None:
        """Renamed whole; without ``force`` it takes OUT's name only while nothing has it (another
        export or dump that made the same file since the check loses nothing)."""
        if self.force:
            os.replace(self.tmp, self.out)
            return
        try:
            os.link(self.tmp, self.out)
        except FileExistsError:
            raise UserError(
                f"{one_line(str(self.out))} was made while this export ran; nothing replaced it"
            ) from None
        self.discard()


def write_jsonl(written: Written, found: Iterator[dict[str, Any]]) -> int:
    count = 0
    fd = written.create()
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for row in found:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
        f.flush()
        os.fsync(f.fileno())
    return count


PARQUET_BATCH = 1000  # rows a parquet row group is written in: what memory holds at once


def parquet_schema() -> Any:
    """One schema for every row: messages in the wire shape (every key, None where absent), tools a
    JSON string, as prime-rl's own export writes them."""
    import pyarrow as pa

    call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.struct(
        [(key, pa.list_(call) if key == "tool_calls" else pa.string()) for key in MESSAGE_KEYS]
    )
    return pa.schema([("messages", pa.list_(message)), ("tools", pa.string())])


def write_parquet(written: Written, found: Iterator[dict[str, Any]]) -> int:
    """Rows through pyarrow's parquet writer, a batch at a time: a big source is never held."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema()
    count = 0
    fd = written.create()
    with os.fdopen(fd, "wb") as f, pq.ParquetWriter(f, schema) as writer:
        while batch := list(itertools.islice(found, PARQUET_BATCH)):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


class Stopped(Exception):
    """An export given up before its end (the dashboard that started it closed): nothing written."""


class NothingKept(UserError):
    """The selection kept nothing: nothing is written, and a script's next step must not run."""

    exit_code = 1

    def __init__(self, said: str, tally: Tally) -> None:
        super().__init__(said)
        self.tally = tally


SUFFIXES = (".parquet", ".jsonl")


def export(
    sources: list[Path],
    out: Path,
    fmt: str,
    chosen: Selection,
    force: bool,
    progress: Callable[[Tally], None] = lambda tally: None,
) -> Tally:
    """Write the rollouts of ``sources`` that ``chosen`` keeps to ``out`` in ``fmt``, whole or not at
    all; ``progress`` is called after each group, and what it raises (``Stopped``: the dashboard
    closing) stops the export with nothing written. The command and the dashboard's export key
    both call this."""
    if out.suffix.lower() not in SUFFIXES:
        raise UserError(
            f"name OUT with .parquet or .jsonl (not {one_line(out.suffix or out.name)}): "
            "the suffix says what is written"
        )
    parquet = out.suffix.lower() == ".parquet"
    if fmt == "prime-rl" and not parquet:
        raise UserError(
            "--format prime-rl writes a parquet: name OUT with .parquet (prime-rl reads its folder)"
        )
    if fmt == "atropos" and parquet:
        raise UserError(
            "--format atropos writes jsonl (ScoredDataGroup lines): name OUT with .jsonl"
        )
    written = Written(out, force)
    tally = Tally()
    picker = Picker(chosen, tally, need_messages=fmt != "atropos")

    def found() -> Iterator[dict[str, Any]]:
        for source in sources:
            for raw, group in groups_of(source, tally):
                yield from rows(fmt, raw, group, picker.kept(raw, group), parquet)
                progress(tally)

    rows_found = found()
    first = next(rows_found, None)
    if first is None and not tally.groups and tally.unreadable:
        raise UserError(
            f"no groups in {' '.join(one_line(str(s)) for s in sources)}: "
            f"{tally.unreadable:,} lines that are not a group (first: {tally.first_unreadable}); "
            "nothing written"
        )
    if first is None:
        why = ", ".join(f"{n:,} {REASONS[r]}" for r, n in tally.left_out.most_common())
        raise NothingKept(
            f"nothing to export: of {tally.rollouts:,} rollouts none was kept "
            f"({why or 'the sources hold no groups'}); nothing written",
            tally,
        )
    everything = itertools.chain([first], rows_found)
    try:
        tally.rows = (
            write_parquet(written, everything) if parquet else write_jsonl(written, everything)
        )
        written.done()
    except BaseException:
        written.discard()
        raise
    return tally


def summary(out: Path, fmt: str, tally: Tally) -> list[str]:
    """What an export wrote, kept and left out (by reason): the command's and the dashboard's words."""
    lines = [
        f"wrote {one_line(str(out))} ({fmt}): {tally.rows:,} rows, {tally.kept:,} of "
        f"{tally.rollouts:,} rollouts kept from {tally.groups_kept:,} of {tally.groups:,} groups"
    ]
    lines += [f"  left out {n:,}: {REASONS[r]}" for r, n in tally.left_out.most_common()]
    if tally.unreadable:
        lines.append(
            f"  {tally.unreadable:,} lines that are not a group skipped "
            f"(first: {tally.first_unreadable})"
        )
    return lines
