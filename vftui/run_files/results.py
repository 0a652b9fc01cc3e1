"""Any saved rollouts as per-item results: a run's or an eval's groups jsonl, a dump, Atropos
output, an eval folder or ``vf-eval``'s ``results.jsonl``, for ``vftui compare`` and ``vftui view``.

Items are keyed by their ``example_id`` (the dataset's own id; vf-eval's key), falling back to
the item index, so the same example lines up across runs whatever order they finished in. Each item
keeps a fingerprint of its prompt too: the same key in two runs of different splits is another example.
No collector or view imports: plain files in, plain figures out.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import os
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui import bounds, safe_files
from vftui.errors import UserError
from vftui.group_format import MASKED, META, trained_tokens
from vftui.run_files import prime_rl, records, shard_folder, store, v1_traces, vf_eval, view_cache
from vftui.run_files.drops import read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.records import EvalMetadata, RunRecord, Settings
from vftui.run_files.shard_folder import ShardedRun, foreign, gaps
from vftui.run_files.shards import Shard
from vftui.run_files.vf_eval import RESULTS

SAMPLES = (
    "samples.jsonl"  # atroposlib's evaluate_log; ours hold vf-eval's row keys, so they read alike
)
MIXED = "mixed"  # an item's prompt where its rollouts' prompts differ: it pairs with nothing


def prompt_fingerprint(messages: list[dict[str, Any]]) -> str | None:
    """A stable digest of a rollout's prompt (its messages before the first assistant one, each's role and
    content, as vftui's own eval files split them), so items pair only where the prompt is the same; None
    where there is no prompt message (the source records none)."""
    return _digest(_prompt(messages))


def _prompt(messages: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each message's role and content, up to the first assistant one."""
    prompt = []
    for message in messages:
        if message.get("role") == "assistant":
            break
        prompt.append((message.get("role"), message.get("content")))
    return prompt


def _digest(prompt: list[tuple[Any, Any]]) -> str | None:
    if not prompt:
        return None
    canonical = json.dumps(prompt, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Fingerprints:
    """The fingerprints of rows' prompts by item, each computed (by ``digest``) only when the item's prompt is
    not the one its last row held: an example's rows repeat it, and hashing each row's made reading a large
    vf-eval output 2.5 times as slow."""

    def __init__(self, digest: Callable[[Any], str | None]) -> None:
        self._digest = digest
        self._last: dict[str, tuple[Any, str | None]] = {}

    def of(self, key: str, prompt: Any) -> str | None:
        last = self._last.get(key)
        if last is not None and last[0] == prompt:
            return last[1]
        fingerprint = self._digest(prompt)
        self._last[key] = (prompt, fingerprint)
        return fingerprint


class Rollouts:
    """An item's rollouts' messages, each kept as its compact JSON and read back when a view shows one.

    Held as parsed dicts, a groups file of short messages took 6 to 18 times its size in memory (100 MB
    of tool turns: 636 MB) for ``compare`` and ``report``, which show a few rollouts of the many they
    read; as text it is about the file's own size.
    """

    __slots__ = ("_packed",)

    def __init__(self, each: Iterable[list[dict[str, Any]]] = ()) -> None:
        self._packed: list[bytes] = []
        for messages in each:
            self.append(messages)

    def append(self, messages: list[dict[str, Any]]) -> None:
        text = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
        self._packed.append(text.encode("utf-8", "surrogatepass"))

    def extend(self, other: Rollouts) -> None:
        self._packed.extend(other._packed)

    def __len__(self) -> int:
        return len(self._packed)

    def __getitem__(self, r: int) -> list[dict[str, Any]]:
        return json.loads(self._packed[r].decode("utf-8", "surrogatepass"))

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        return (self[r] for r in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rollouts) and self._packed == other._packed

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it stands for

    def __repr__(self) -> str:
        return f"Rollouts({len(self)} rollouts)"


@dataclass
class Item:
    """One example's rollouts in one source."""

    key: str
    rewards: list[float] = field(default_factory=list)
    functions: dict[str, list[float]] = field(default_factory=dict)
    truncated: list[bool] = field(default_factory=list)
    completion_chars: list[int] = field(default_factory=list)
    rollouts: Rollouts = field(default_factory=Rollouts)  # each rollout's messages
    # each rollout's (trained, masked) token counts from its masks; None where the source keeps no masks
    tokens: list[tuple[int, int] | None] = field(default_factory=list)
    # its prompt's ``prompt_fingerprint``: None where its source records none, ``MIXED`` where rollouts differ
    prompt: str | None = None

    @property
    def mean(self) -> float:
        return sum(self.rewards) / len(self.rewards)

    @classmethod
    def figures_only(cls, key: str) -> Item:
        """An item that keeps only what its figures need, packed (about 35 bytes a rollout, not 120): a
        run's page keeps one per item for as long as the run goes on. Its rollouts and tokens are not kept."""
        return cls(key, array("d"), {}, array("b"), array("q"))  # type: ignore[arg-type]

    def saw_prompt(self, fingerprint: str | None) -> None:
        """One more rollout's prompt: an unrecorded one (None) changes nothing, another than the item's makes it
        ``MIXED`` (a key that names two examples in one source is no example to pair)."""
        if fingerprint is not None and self.prompt != fingerprint:
            self.prompt = fingerprint if self.prompt is None else MIXED

    def extend(self, other: Item) -> None:
        """``other``'s rollouts too: the same example in another shard (a run past its dataset's end)."""
        self.saw_prompt(other.prompt)
        packed = isinstance(self.rewards, array)
        self.rewards.extend(other.rewards)
        for name, values in other.functions.items():
            self.functions.setdefault(name, array("d") if packed else []).extend(values)  # type: ignore[arg-type]
        self.truncated.extend(other.truncated)
        self.completion_chars.extend(other.completion_chars)
        if not packed:
            self.rollouts.extend(other.rollouts)
            self.tokens.extend(other.tokens)


@dataclass(frozen=True)
class Setup:
    """How a source was made, as its files record it (None, or no temperature: they do not say)."""

    model: str | None = None
    temperatures: tuple[float, ...] = ()  # every one its rollouts were sampled at, lowest first
    env_args: str | None = None  # as JSON, its keys in order
    split: str | None = None
    versions: str | None = None  # "name version, ..." of what made it

    def merged(self, other: Setup) -> Setup:
        """A folder's shards as one: what they all record, each value they differ in joined with `` | ``."""

        def both(mine: str | None, theirs: str | None) -> str | None:
            values = [v for v in (mine, theirs) if v is not None]
            return " | ".join(dict.fromkeys(" | ".join(values).split(" | "))) if values else None

        return Setup(
            both(self.model, other.model),
            tuple(sorted({*self.temperatures, *other.temperatures})),
            both(self.env_args, other.env_args),
            both(self.split, other.split),
            both(self.versions, other.versions),
        )


@dataclass
class Source:
    """A file's results, by item key, with the environment it names (``""`` when it does not say)."""

    path: Path
    kind: str  # "groups", "shards" (a run's shards), "vf-eval", "atropos samples", "verifiers v1", "prime-rl"
    env_id: str
    items: dict[str, Item]
    skipped: int = 0  # lines that are not results (torn, foreign, a reward that is not a number)
    threshold: float | None = None  # the pass threshold the eval recorded, if it did
    errors: int = 0  # an eval's examples that failed to score: in none of its items, nor any figure
    warnings: list[str] = field(
        default_factory=list
    )  # a folder of shards: shards missing, items missing
    setup: Setup = field(default_factory=Setup)
    # each group's mean reward in the order written (a groups file's, a shard's after another's): the
    # reward over groups; empty for sources of rows (vf-eval, v1), whose items are their order
    group_means: list[float] = field(default_factory=list)
    # a training run's (an rl run's, a prime-rl run's): each group's trainer step and mean reward, in
    # the order written; what the compare charts overlay by step
    step_means: list[tuple[int, float]] = field(default_factory=list)


def load(path: Path) -> Source:
    """``path`` read as results, whatever saved it; a sentence when it cannot be."""
    path = path.expanduser()
    if not path.exists():
        what = safe_files.not_regular(path)  # a link loop, a link to nothing: said as what it is
        raise UserError(f"{path} is {what}" if what else f"{path}: no such file or folder")
    if (stream := prime_rl.stream_of(path)) is not None:
        reader = prime_rl.read(stream)
        source = _from_v1(reader.run, "prime-rl")
        source.step_means = [
            (g.step, math.fsum(r.reward for r in g.rollouts) / len(g.rollouts))
            for g in reader.groups.values()
            if g.rollouts
        ]
        return source
    if path.is_dir():
        found = _file_in(path)
        return load(found) if isinstance(found, Path) else _load_shards(found)
    if (described := RunFiles.of_record(path)) is not None:
        return load(described.jsonl)
    return _load_file(path)[0]


def figures_of(path: Path) -> Source:
    """A file of groups or vf-eval rows as ``load`` reads it, each item keeping its figures alone (no message):
    what a listing of many runs holds of each. v1 traces are the caller's to read (``is_v1``)."""
    return _from_rows(path, keep_messages=False)[0]


def _load_file(path: Path) -> tuple[Source, list[int]]:
    """A results file, and the items of its groups (a groups file's: vf-eval's rows have none)."""
    if is_v1(path):
        return _from_v1(v1_traces.read(path)), []
    return _from_rows(path)


def _from_rows(path: Path, keep_messages: bool = True) -> tuple[Source, list[int]]:
    """A file of groups or vf-eval rows, and the items of its groups; without ``keep_messages``, its items'
    figures alone."""
    lines = store.JsonObjects(path)
    rows = iter(lines)  # read as it is parsed: a big file is never held as rows
    # its form is that of its first line of either (a damaged first line does not hide the rest); the
    # objects before it are results of neither form, so each form's reader skips them: counted here
    first, before, failed_before = None, 0, set[str]()
    for row in rows:
        if "scores" in row or ("reward" in row and "example_id" in row):
            first = row
            break
        before += 1
        failed_before |= vf_eval.failed_examples([row])  # an errored row with no reward at all
    if first is None:
        if not before:
            raise UserError(
                f"{path}: no results in it (an empty file, or no line is a JSON object)"
            )
        raise UserError(
            f"{path}: neither groups (a 'scores' list a line) nor vf-eval results ('example_id' and "
            "'reward' a line)"
        )
    every = itertools.chain([first], rows)
    if "scores" in first:
        tally = GroupsTally(keep_messages)
        for row in every:
            tally.add(row)
        source = tally.source(path)
        source.skipped += lines.skipped + before
        return source, tally.indices
    metadata = vf_eval.read_metadata(_eval_folder(path))
    items, skipped, failed = _from_vf_rows(every, failed_before, keep_messages)
    kind = "atropos samples" if path.name == SAMPLES else "vf-eval"
    return Source(
        path,
        kind,
        metadata.env_id,
        items,
        lines.skipped + skipped + before,
        metadata.pass_threshold,
        errors=failed + metadata.errors_listed,
        setup=_eval_setup(metadata),
    ), []


def _load_shards(sharded: ShardedRun) -> Source:
    """A folder of one run's shards as one source: their items together, each line's item checked to be its
    shard's (an overlap is refused), the shards and items missing as warnings."""
    merged = Source(sharded.folder, "shards", sharded.env, {}, warnings=sharded.missing())
    setups: list[Setup] = []
    counts: dict[Shard, int] = {}
    top = -1  # the highest item any shard holds
    for run in sharded.runs:
        source, indices = _load_file(run.path)
        if (
            overlap := next(filter(None, (foreign(run, item) for item in indices)), None)
        ) is not None:
            raise UserError(overlap)
        counts[run.shard], top = len(indices), max(top, max(indices, default=-1))
        merged.skipped += source.skipped
        merged.errors += source.errors
        merged.threshold = source.threshold if merged.threshold is None else merged.threshold
        setups.append(source.setup)
        merged.group_means += source.group_means
        for key, item in source.items.items():
            merged.items.setdefault(key, Item(key)).extend(item)
    merged.warnings += gaps(counts, sharded.count, top)
    merged.setup = functools.reduce(Setup.merged, setups)
    return merged


def viewable(path: Path) -> Path | ShardedRun:
    """The groups file ``vftui view`` opens for ``path``: a run or eval folder's, or vf-eval results in
    the groups form (made once, in the cache, per version of the results); or a folder of a run's shards."""
    return viewed(path)[0]


def viewed(path: Path) -> tuple[Path | ShardedRun, Path | None]:
    """``viewable(path)``, and what the view calls it where that is a copy in the cache: the eval whose
    results it holds (vf-eval's output folder, a run's ``.eval`` folder), never the cache's file."""
    path = path.expanduser()
    if (stream := prime_rl.stream_of(path)) is not None:
        return prime_rl.groups_file(
            stream
        ), stream.only or stream.run  # titled by its run or step file
    if path.is_dir():
        found = _file_in(path)
        if isinstance(found, ShardedRun):
            return found, None
        path = found
    if (described := RunFiles.of_record(path)) is not None:
        path = described.jsonl
    if not path.is_file():
        what = safe_files.not_regular(path)
        raise UserError(
            f"{path} is {what}, not a file vftui reads"
            if what
            else f"{path}: no such file or folder"
        )
    if is_v1(path):
        return _v1_groups(path), path.parent  # titled by verifiers' run folder
    first = next(iter(store.JsonObjects(path)), None)
    if first is not None and "rewards" in first and "reward" not in first:
        raise UserError(
            f"{path} holds an eval's per-example figures; view its results.jsonl or its run instead"
        )
    if first is None or "scores" in first or "example_id" not in first:
        return path, None  # groups (or nothing the view can read: it says which lines it skipped)
    converted = _cached_view(path)
    if not view_cache.reuse(converted):
        view_cache.prune()
        converted.parent.mkdir(parents=True, exist_ok=True)
        groups, failed = vf_eval_groups(path)
        store.write_text_atomic(  # the view counts them as an eval's errors, as compare does
            RunFiles(converted).drops,
            "".join(
                json.dumps(
                    {"item": len(groups) + n, "reason": f"example {key}: {NO_NUMBER}", "scores": []}
                )
                + "\n"
                for n, key in enumerate(failed)
            ),
        )
        store.write_text_atomic(converted, "".join(json.dumps(group) + "\n" for group in groups))
    return converted, _eval_folder(path)


def _eval_folder(results: Path) -> Path:
    """The eval whose results file this is: vf-eval's folder, or the one atroposlib's ``samples.jsonl`` is in."""
    return results.parent if results.name != SAMPLES else results.parent.parent


def _cached_view(path: Path) -> Path:
    """Where the groups form of ``path`` is kept: one file per version of it."""
    stat = path.stat()
    version = f"{view_cache.FORM}|{path.resolve()}|{stat.st_mtime_ns}|{stat.st_size}"
    digest = hashlib.sha256(version.encode()).hexdigest()[:16]
    return view_cache.folder() / f"{path.parent.name}-{digest}.jsonl"


def _v1_groups(path: Path) -> Path:
    """verifiers' v1 traces in the groups form, their failed tasks in its drop log (the view counts them as
    an eval's errors), made once per version of the file."""
    converted = _cached_view(path)
    if not view_cache.reuse(converted):
        view_cache.prune()
        run = v1_traces.read(path)
        converted.parent.mkdir(parents=True, exist_ok=True)
        drops = RunFiles(converted).drops
        failed = v1_traces.failed_tasks(run)
        store.write_text_atomic(
            drops,
            "".join(
                json.dumps({"item": item, "reason": why, "scores": [], "metrics": {}}) + "\n"
                for item, why in failed.items()
            ),
        )
        lines = (json.dumps(group, allow_nan=False) + "\n" for group in v1_traces.as_groups(run))
        store.write_text_atomic(converted, "".join(lines))
    return converted


def is_v1(path: Path) -> bool:
    """verifiers' v1 traces: named so (any other content is refused as not theirs), or episodes."""
    if path.name == v1_traces.TRACES:
        return True
    first = next(iter(store.JsonObjects(path)), None)
    return first is not None and "traces" in first and "task" in first


def vf_eval_groups(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """vf-eval's rows as groups, one an example (no token ids: vf-eval keeps none), and the examples left
    out, in order: one with a row whose reward is no number is an error (as ``_from_vf_rows`` counts it)."""
    metadata = vf_eval.read_metadata(_eval_folder(path))
    rows_read = list(store.JsonObjects(path))
    failed = vf_eval.failed_examples(rows_read)
    by_example: dict[str, list[dict[str, Any]]] = {}
    for row in rows_read:
        if row.get("example_id") is not None and str(row["example_id"]) not in failed:
            by_example.setdefault(str(row["example_id"]), []).append(row)
    groups = [vf_eval.group(n, rows, metadata) for n, rows in enumerate(by_example.values())]
    return groups, sorted(failed)


def _file_in(folder: Path) -> Path | ShardedRun:
    """The results file of a run folder, an eval folder, its ``atropos/`` or a vf-eval output folder; or the
    shards of one run the folder holds."""
    for name in (RESULTS, SAMPLES, v1_traces.TRACES):
        # one that does not read is refused by name, never passed over
        if os.path.lexists(folder / name):
            return folder / name
    if (sharded := shard_folder.find(folder)) is not None:
        return sharded
    runs = RunFiles.all_in(folder)
    if len(runs) == 1:
        return runs[0].jsonl
    if len(runs) > 1:
        raise UserError(f"{folder} holds {len(runs)} runs; name one's .jsonl file")
    evals = _evals_in(folder)  # an rl run's evals (``--eval-every``), a folder each
    if len(evals) == 1:
        return folder / evals[0] / RESULTS
    if evals:
        raise UserError(
            f"{folder} holds {len(evals)} evals ({evals[0]} ... {evals[-1]}): name one, or give them in "
            f"order to report or compare (e.g. {folder}/{evals[0]} {folder}/{evals[-1]})"
        )
    if (
        traces := v1_traces.traces_in(folder)
    ) is not None:  # a verifiers run's <uuid>/ folder in it
        return traces
    raise UserError(
        f"{folder} holds no run, eval, vf-eval results or verifiers traces; name a .jsonl file"
    )


def _evals_in(folder: Path) -> list[str]:
    """The folders in ``folder`` that hold an eval's results (an rl run's evals), by name."""
    try:
        with os.scandir(folder) as listing:
            names = sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    return [name for name in names if os.path.lexists(folder / name / RESULTS)]


def _key(meta: dict[str, Any], fallback: Any) -> str:
    example = meta.get("example_id")
    return str(example if example is not None else meta.get("item", fallback))


class GroupsTally:
    """A groups file's results, a group at a time: the reader adds every line of a file; a run's page adds
    each group as it is written and keeps only their figures (``keep_messages`` False: ``Item.figures_only``).

    ``skipped`` counts the groups that are not results (no finite scores); ``indices`` the dataset items of
    those that are (as recorded: a line without one has none); ``means`` their mean rewards in order.
    """

    def __init__(self, keep_messages: bool = True) -> None:
        self.items: dict[str, Item] = {}
        self.skipped = 0
        self.indices: list[int] = []
        self.means: list[float] = []
        self.step_means: list[tuple[int, float]] = []  # an rl run's groups: (trainer step, mean)
        self.model: str | None = None  # the first group's that names one
        self.temperatures: set[float] = set()  # every one a group was sampled at
        self._keep_messages = keep_messages
        self._seen = 0

    def add(self, group: dict[str, Any]) -> Item | None:
        """The group's rollouts added to its item; the group alone as an item (its messages always in it),
        or None when it is not a result."""
        n, self._seen = self._seen, self._seen + 1
        meta = v1_traces.as_dict(group.get(META))
        if self.model is None and isinstance(meta.get("model"), str):
            self.model = meta["model"]
        self.temperatures.update(_temperatures([group.get("generation_params")]))
        raw = group.get("scores")
        read = [bounds.score(s) for s in raw] if isinstance(raw, list) else []
        scores = [s for s in read if s is not None]
        if not read or len(scores) < len(read):
            self.skipped += 1
            return None
        if type(meta.get("item")) is int:
            self.indices.append(meta["item"])
        self.means.append(math.fsum(scores) / len(scores))
        if type(step := meta.get("trainer_step")) is int:
            self.step_means.append((step, self.means[-1]))
        added = _group_item(group, meta, scores, _key(meta, n))
        if (item := self.items.get(added.key)) is None:
            made = Item(added.key) if self._keep_messages else Item.figures_only(added.key)
            item = self.items[added.key] = made
        item.extend(added)
        return added

    def source(self, path: Path) -> Source:
        """The groups added, as the source ``path`` is: its run.json's env, mode and pass threshold, an
        eval's errors from its drop log."""
        record = _record(path)
        settings = record.config if record is not None else Settings()
        evaluated = settings.mode == "eval"
        errors = (
            len({drop.item for drop in read_drops(RunFiles(path))[0]} - set(self.indices))
            if evaluated
            else 0
        )
        return Source(
            path,
            "groups",
            settings.env,
            self.items,
            self.skipped,
            settings.pass_threshold if evaluated else None,
            errors=errors,
            setup=_run_setup(self, record, path),
            group_means=self.means,
            step_means=self.step_means,
        )


def _group_item(group: dict[str, Any], meta: dict[str, Any], scores: list[float], key: str) -> Item:
    """One group's rollouts as an item of its own."""
    item = Item(key)
    masks = v1_traces.as_list(group.get("masks"))
    messages = m if isinstance(m := group.get("messages"), list) else [[] for _ in scores]
    reasons = r if isinstance(r := meta.get("finish_reasons"), list) else [None] * len(scores)
    for r, score in enumerate(scores):
        item.rewards.append(score)
        item.truncated.append(reasons[r] == "length" if r < len(reasons) else False)
        rollout = vf_eval.row_messages(messages[r]) if r < len(messages) else []
        item.rollouts.append(rollout)
        item.completion_chars.append(_completion_chars(rollout))
        mask = masks[r] if r < len(masks) and isinstance(masks[r], list) else []
        item.tokens.append((trained_tokens(mask), mask.count(MASKED)) if mask else None)
        # a group is one example's rollouts, sampled from one prompt: its first recorded one is the item's
        item.prompt = item.prompt or prompt_fingerprint(rollout)
    metrics = v1_traces.as_dict(meta.get("metrics"))
    for name, values in metrics.items():
        numbers = [bounds.score(v) for v in values] if isinstance(values, list) else []
        item.functions[name] = [v for v in numbers if v is not None]
    return item


NO_NUMBER = "a reward that is no number"


def _from_vf_rows(
    rows: Iterable[dict[str, Any]],
    failed_before: set[str] | None = None,
    keep_messages: bool = True,
) -> tuple[dict[str, Item], int, int]:
    """The rows by example, how many rows were not results (no example id, or a reward that is not a finite
    number: a missing reward is not a zero), and how many examples had such a reward: errors, in no figure,
    as an eval counts an example that failed to score (dropping the row alone scored the example over its
    other rollouts, higher where a judge gave NaN to its bad answers)."""
    items: dict[str, Item] = {}
    prompts = Fingerprints(_row_fingerprint)
    skipped, failed = 0, set(failed_before or ())  # ``failed_before``: of rows read before these
    for row in rows:  # one pass: a big output is never held as parsed rows
        reward = bounds.score(row.get("reward"))
        if reward is None or row.get("example_id") is None:
            skipped += 1
            failed |= vf_eval.failed_examples([row])
            continue
        key = str(row["example_id"])
        if (item := items.get(key)) is None:
            item = items[key] = Item(key) if keep_messages else Item.figures_only(key)
        item.rewards.append(reward)
        item.truncated.append(bool(row.get("is_truncated")))
        messages = vf_eval.row_messages(row.get("prompt")) + vf_eval.row_messages(
            row.get("completion")
        )
        if keep_messages:  # ``Item.figures_only`` keeps no rollout
            item.rollouts.append(messages)
            item.tokens.append(None)
        item.saw_prompt(prompts.of(key, row.get("prompt")))
        item.completion_chars.append(_completion_chars(messages))
        for name, value in vf_eval.row_metrics(row).items():
            if (number := bounds.score(value)) is not None:
                item.functions.setdefault(name, []).append(number)
    return {key: item for key, item in items.items() if key not in failed}, skipped, len(failed)


def _from_v1(run: v1_traces.V1Eval, kind: str = "verifiers v1") -> Source:
    """verifiers' v1 rollouts by task (an eval's, or a prime-rl run's); a task with a failed rollout is an
    error (its other rollouts still count)."""
    items: dict[str, Item] = {}
    prompts = Fingerprints(_digest)
    for rollout in run.rollouts:
        item = items.setdefault(rollout.key, Item(rollout.key))
        item.rewards.append(rollout.reward)
        item.truncated.append(rollout.truncated)
        item.rollouts.append(rollout.messages)
        item.saw_prompt(prompts.of(rollout.key, _prompt(rollout.messages)))
        item.tokens.append(None)
        item.completion_chars.append(_completion_chars(rollout.messages))
        for name, value in rollout.functions.items():
            item.functions.setdefault(name, []).append(value)
    taskset = v1_traces.taskset_config(run)
    env_args = {k: v for k, v in taskset.items() if k != "id"} if taskset else None
    return Source(
        run.path,
        kind,
        run.env,
        items,
        run.skipped,
        errors=len(v1_traces.failed_tasks(run)),
        setup=Setup(
            run.model,
            run.temperatures,
            _json(env_args) if env_args is not None else None,
            None,
            run.versions,
        ),
    )


def _row_fingerprint(prompt: Any) -> str | None:
    """The fingerprint of a vf-eval row's ``prompt``: a completion env's plain string is the user's words."""
    return prompt_fingerprint(
        [{"role": "user", "content": prompt}]
        if isinstance(prompt, str)
        else vf_eval.row_messages(prompt)
    )


def _completion_chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages if m.get("role") == "assistant")


def _record(path: Path) -> RunRecord | None:
    """What a run saved beside its jsonl, if it did."""
    try:
        return records.run_record(RunFiles(path))
    except records.Damaged as e:
        raise UserError(str(e)) from e


def _run_setup(tally: GroupsTally, record: RunRecord | None, path: Path) -> Setup:
    """A run's setup from its groups (each records its model and temperature) and its run.json (the env args,
    the mode, the versions that made it; an older eval's: its metadata.json's)."""
    model = tally.model or (record.model if record is not None and record.model else None)
    settings = record.config if record is not None else None
    # a mistyped version_info is "unknown", never a damaged run (``_versions`` reads only a mapping)
    versions = record.version_info if record is not None and record.version_info else None
    if (
        settings is not None and settings.mode == "eval" and versions is None
    ):  # made before run.json said
        # a damaged metadata.json: the versions are unknown, the groups compare all the same
        with contextlib.suppress(UserError):
            versions = vf_eval.read_metadata(RunFiles(path).eval_dir).version_info
    return Setup(
        model,
        tuple(sorted(tally.temperatures)),
        _json(settings.env_args) if settings is not None else None,
        _split(settings.env_args, settings.mode) if settings is not None else None,
        _versions(versions),
    )


def _eval_setup(metadata: EvalMetadata) -> Setup:
    """An eval's setup from its metadata.json (vf-eval's, or ours); vf-eval evaluates in eval mode."""
    recorded = metadata.model_fields_set
    env_args = metadata.env_args if isinstance(metadata.env_args, dict) else None
    return Setup(
        metadata.model if "model" in recorded else None,
        _temperatures([metadata.sampling_args]),
        _json(env_args) if env_args is not None else None,
        _split(env_args or {}, "eval") if recorded else None,
        _versions(metadata.version_info),
    )


def _temperatures(sampling: Iterable[Any]) -> tuple[float, ...]:
    found = {
        t
        for args in sampling
        if isinstance(args, dict) and (t := bounds.score(args.get("temperature"))) is not None
    }
    return tuple(sorted(found))


def _split(env_args: dict[str, Any], mode: str) -> str | None:
    """The split the env args name, else the environment's default for the mode."""
    if isinstance(env_args.get("split"), str):
        return env_args["split"]
    return f"default ({mode} mode)" if mode else None


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _versions(info: Any) -> str | None:
    """``name version, ...`` of a metadata's ``version_info`` (vf-eval's ``vf_version`` as ``vf``); None where it
    names none."""
    if not isinstance(info, dict):
        return None
    named = [
        f"{name.removesuffix('_version')} {v}"
        for name, v in sorted(info.items())
        if isinstance(v, str | int | float)
    ]
    return ", ".join(named) or None
