"""prime-rl's token exports: every trained token's sampler and trainer figures, read a step at a time.

With ``trainer.enable_token_export`` prime-rl (``trainer/rl/token_export.py``, schema 1) writes
``token_exports/step_N/rank_R.jsonl``: one record per packed sequence, ``step, rank, micro_step,
micro_sequence_idx, export_sequence_idx, env_name`` and aligned per-token lists (``COLUMNS``), a
value ``null`` where it was not computed or was not finite; a ``STABLE`` file in the step's folder
once every rank has flushed. ``trainer/rl/loss.py``: log ratio = trainer - inference logprob, ratio =
exp(log ratio), mismatch_kl = ratio - log ratio - 1, prob_delta = exp(trainer) - exp(inference); DPPO
masks a token whose prob_delta passes ``dppo_mask_high`` (positive advantage) or ``-dppo_mask_low``
(negative). A step is read record by record (a step of gigabytes is never held), its figures'
quantiles from a bounded sample.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vftui import bounds, safe_files
from vftui.bounds import LongLine
from vftui.training.picks import PICKS

SCHEMA_VERSION = 1
STABLE = "STABLE"
STEP = re.compile(r"step_(\d{1,9})")
RANK = re.compile(r"rank_(\d{1,6})\.jsonl")
MAX_LINE = 64 * 1024**2  # a 128k-token sequence is ~25 MB of JSON
SAMPLE = 200_000  # values a step's quantiles are taken over, at most (p99: 2,000 values above it)
COLUMNS = (
    "token_ids",
    "position_ids",
    "loss_mask",
    "advantages",
    "inference_logprobs",
    "trainer_logprobs",
    "entropy",
    "mismatch_kl",
    "log_importance_ratio",
    "importance_ratio",
    "prob_delta",
    "is_masked",
    "is_masked_high",
    "is_masked_low",
    "rl_weights",
    "ce_weights",
    "ref_kl_weights",
)
CONTEXT = 6  # tokens either side of a worst token, for its text


@dataclass(frozen=True)
class ExportStep:
    step: int
    path: Path
    stable: bool


NUMBERS = {float, int, bool, type(None)}
BOOLEAN = ("loss_mask", "is_masked", "is_masked_high", "is_masked_low")


@dataclass(frozen=True)
class ExportedSequence:
    """One exported sequence: where it is, its tokens, and its per-token columns as float arrays
    (a flag is 1.0 or 0.0; NaN where the file has null, or a value that is not a finite number)."""

    step: int
    rank: int
    index: int  # export_sequence_idx: its place in the rank's file
    env: str
    tokens: list[int]
    columns: dict[str, np.ndarray]

    def trained(self) -> np.ndarray:
        """Which tokens the loss takes (all of them when the file has no loss mask)."""
        mask = self.columns.get("loss_mask")
        return np.ones(len(self.tokens), dtype=bool) if mask is None else mask == 1.0

    def pick(self, name: str) -> np.ndarray:
        """The per-token values ``name`` (a key of ``PICKS``) ranks by; NaN where there is none."""
        column, how = PICKS[name]
        values = self.columns.get(column)
        if values is None:
            return np.full(len(self.tokens), np.nan)
        return np.abs(values) if how == "abs" else -values if how == "negated" else values

    def value(self, name: str, i: int) -> float | bool | None:
        """A column's value at token ``i`` as the file meant it: a flag, a number, or None."""
        v = float(self.columns[name][i])
        if np.isnan(v):
            return None
        return v == 1.0 if name in BOOLEAN else v


@dataclass(order=True, frozen=True)
class WorstToken:
    key: float
    later: tuple[
        int, int
    ]  # (-sequence read, -position): of tokens of one key, the later is "smaller"
    step: int = field(compare=False)
    rank: int = field(compare=False)
    sequence: int = field(compare=False)
    position: int = field(compare=False)  # the token's place in its sequence
    token_id: int = field(compare=False)
    before: tuple[int, ...] = field(compare=False)
    after: tuple[int, ...] = field(compare=False)
    values: dict[str, Any] = field(compare=False)  # every column's value at the token


@dataclass
class StepFigures:
    """A step's tails that means hide, and what could not be read."""

    step: int
    stable: bool
    sequences: int = 0
    tokens: int = 0
    trained: int = 0  # tokens under the loss mask
    masked: int = 0
    masked_high: int = 0
    masked_low: int = 0
    mismatch_kl: dict[str, float] = field(default_factory=dict)  # mean, p99, max
    abs_log_ratio: dict[str, float] = field(default_factory=dict)  # p99, max
    ratio: dict[str, float] = field(default_factory=dict)  # p1, p50, p99
    entropy: dict[str, float] = field(default_factory=dict)  # mean
    sampler_logprob: dict[str, float] = field(default_factory=dict)  # mean, p1, p50
    sampled: bool = False  # quantiles over a sample of the trained tokens
    worst: list[WorstToken] = field(default_factory=list)
    envs: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def masked_share(self) -> float | None:
        return self.masked / self.trained if self.trained else None


def steps(folder: Path) -> list[ExportStep]:
    """The exported steps, oldest first; ``stable`` once prime-rl marked the step whole."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if (m := STEP.fullmatch(entry.name)) and entry.is_dir(follow_symlinks=False):
                path = Path(entry.path)
                found.append(ExportStep(int(m.group(1)), path, (path / STABLE).is_file()))
    return sorted(found, key=lambda s: s.step)


def rank_files(step_dir: Path) -> list[tuple[int, Path]]:
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(step_dir):
            if m := RANK.fullmatch(entry.name):
                found.append((int(m.group(1)), Path(entry.path)))
    return sorted(found)


def sequences(step_dir: Path, problems: list[str]) -> Iterator[ExportedSequence]:
    """Each readable record of the step's rank files in order; each one left out is a sentence in ``problems``."""
    for rank, path in rank_files(step_dir):
        try:
            f = safe_files.open_to_read(path)
        except OSError as e:
            problems.append(f"{path.name}: cannot be read ({e.strerror or e})")
            continue
        with f:
            for number, line in enumerate(bounds.read_lines(f, MAX_LINE), start=1):
                if isinstance(line, LongLine):
                    problems.append(
                        f"{path.name} line {number}: {bounds.too_long(line, MAX_LINE)}, left out"
                    )
                    continue
                if not line.strip():
                    continue
                if not line.endswith(b"\n"):
                    problems.append(
                        f"{path.name} line {number}: not whole yet (being written), left out"
                    )
                    continue
                found = record(line, rank)
                if isinstance(found, str):
                    problems.append(f"{path.name} line {number}: {found}, left out")
                else:
                    yield found


def record(line: bytes, rank: int) -> ExportedSequence | str:
    """A sequence from one line, or why it is not one."""
    try:
        value = json.loads(
            line
        )  # a flat record: its lists are read flat, so no nesting walk is needed
    except RecursionError:
        return f"not a record: it nests deeper than {bounds.MAX_NESTING} levels"
    except (ValueError, UnicodeDecodeError) as e:
        return f"not JSON ({e})"
    if not isinstance(value, dict):
        return "not a JSON object"
    version = value.get("schema_version")
    if version != SCHEMA_VERSION:
        return f"schema_version {json.dumps(version)[:20]}, not {SCHEMA_VERSION}"
    tokens = value.get("token_ids")
    if not isinstance(tokens, list) or not all(type(t) is int and t >= 0 for t in tokens):
        return "its token_ids are not a list of token ids"
    columns: dict[str, np.ndarray] = {}
    for name in COLUMNS:
        column = value.get(name)
        if column is None:
            continue
        if not isinstance(column, list):
            return f"its {name} is not a list"
        if len(column) != len(tokens):
            return f"its columns are not aligned ({len(tokens)} token_ids, {len(column)} {name})"
        columns[name] = floats(column)
    step = value.get("step")
    index = value.get("export_sequence_idx")
    env = value.get("env_name")
    return ExportedSequence(
        step if type(step) is int else -1,
        rank,
        index if type(index) is int else -1,
        env if isinstance(env, str) else "",
        tokens,
        columns,
    )


def floats(column: list[Any]) -> np.ndarray:
    """A column as floats, NaN for anything that is not a finite number within ``bounds.MAX_SCORE``."""
    try:
        if not set(map(type, column)) <= NUMBERS:
            raise TypeError  # numpy would read "1.5" as 1.5: text is not a number here
        values = np.array(column, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        values = np.array(
            [
                float(v) if isinstance(v, bool) or bounds.score(v) is not None else np.nan
                for v in column
            ],
            dtype=np.float64,
        )
    with np.errstate(invalid="ignore"):
        values[~(np.abs(values) <= bounds.MAX_SCORE)] = np.nan
    return values


class _Sample:
    """A column's values over a step: exact mean and max, quantiles over at most ``SAMPLE`` values."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.chunks: list[np.ndarray] = []
        self.held = 0
        self.count = 0
        self.total = 0.0
        self.most = -math.inf
        self.sampled = False
        self.keep = 1.0  # the share of values kept once sampling

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        array = np.asarray(values, dtype=np.float64)
        self.count += len(array)
        self.total += float(array.sum())
        self.most = max(self.most, float(array.max()))
        if self.keep < 1.0:
            array = array[self.rng.random(len(array)) < self.keep]
        self.chunks.append(array)
        self.held += len(array)
        if self.held > SAMPLE:
            whole = np.concatenate(self.chunks)
            self.chunks = [whole[self.rng.random(len(whole)) < 0.5]]
            self.held = len(self.chunks[0])
            self.keep /= 2
            self.sampled = True

    def figures(self, quantiles: dict[str, float]) -> dict[str, float]:
        if not self.count:
            return {}
        out = {"mean": self.total / self.count, "max": self.most}
        whole = np.concatenate(self.chunks)
        for name, q in quantiles.items():
            out[name] = float(np.quantile(whole, q))
        return out


def read_step(
    export: ExportStep, pick: str = "mismatch_kl", worst: int = 20, seed: int = 0
) -> StepFigures:
    """A step's figures and its ``worst`` tokens by ``pick``, among the trained ones."""
    figures = StepFigures(export.step, export.stable)
    return tally(sequences(export.path, figures.problems), figures, pick, worst, seed)


def tally(
    found: Iterable[ExportedSequence], figures: StepFigures, pick: str, worst: int, seed: int = 0
) -> StepFigures:
    """``figures`` of the sequences ``found``: their tails and ``worst`` tokens by ``pick``."""
    rng = np.random.default_rng(seed)
    samples = {
        name: _Sample(rng)
        for name in (
            "mismatch_kl",
            "log_importance_ratio",
            "importance_ratio",
            "entropy",
            "inference_logprobs",
        )
    }
    heap: list[WorstToken] = []
    for seq in found:
        figures.sequences += 1
        figures.envs[seq.env] = figures.envs.get(seq.env, 0) + 1
        figures.tokens += len(seq.tokens)
        trained = seq.trained()
        figures.trained += int(trained.sum())
        for name, attr in (
            ("is_masked", "masked"),
            ("is_masked_high", "masked_high"),
            ("is_masked_low", "masked_low"),
        ):
            if (flags := seq.columns.get(name)) is not None:
                setattr(figures, attr, getattr(figures, attr) + int((flags[trained] == 1.0).sum()))
        for name, sample in samples.items():
            if (values := seq.columns.get(name)) is not None:
                kept = values[trained]
                kept = kept[~np.isnan(kept)]
                sample.add(np.abs(kept) if name == "log_importance_ratio" else kept)
        _worst(seq, figures.sequences, np.where(trained, seq.pick(pick), np.nan), worst, heap)
    figures.mismatch_kl = samples["mismatch_kl"].figures({"p99": 0.99})
    figures.abs_log_ratio = samples["log_importance_ratio"].figures({"p99": 0.99})
    ratio = samples["importance_ratio"].figures({"p1": 0.01, "p50": 0.5, "p99": 0.99})
    figures.ratio = {k: v for k, v in ratio.items() if k != "mean"}
    figures.entropy = {k: v for k, v in samples["entropy"].figures({}).items() if k == "mean"}
    logprobs = samples["inference_logprobs"].figures({"p1": 0.01, "p50": 0.5})
    figures.sampler_logprob = {k: v for k, v in logprobs.items() if k != "max"}
    figures.sampled = any(s.sampled for s in samples.values())
    figures.worst = sorted(
        heap, key=lambda t: (-t.key, t.rank, t.sequence, t.position)
    )  # ties: file order
    return figures


def _worst(
    seq: ExportedSequence, seq_number: int, keys: np.ndarray, most: int, heap: list[WorstToken]
) -> None:
    """Keep in ``heap`` the ``most`` largest keys so far (ties: the earlier token stays)."""
    found = np.flatnonzero(~np.isnan(keys))
    found = found[np.lexsort((found, -keys[found]))[:most]]  # the largest, ties in file order
    for i in map(int, found):
        key = float(keys[i])
        if len(heap) >= most and key <= heap[0].key:
            continue  # a tie with the smallest kept: the earlier token stays
        token = WorstToken(
            key,
            (-seq_number, -i),
            seq.step,
            seq.rank,
            seq.index,
            i,
            seq.tokens[i],
            tuple(seq.tokens[max(0, i - CONTEXT) : i]),
            tuple(seq.tokens[i + 1 : i + 1 + CONTEXT]),
            {name: seq.value(name, i) for name in seq.columns},
        )
        (heapq.heappush if len(heap) < most else heapq.heapreplace)(heap, token)


def find_sequence(
    export: ExportStep, rank: int, index: int, problems: list[str]
) -> ExportedSequence | None:
    for seq in sequences(export.path, problems):
        if seq.rank == rank and seq.index == index:
            return seq
    return None


def write_sequence(
    step_dir: Path,
    rank: int,
    index: int,
    env: str,
    token_ids: Sequence[int],
    loss_mask: Sequence[bool],
    advantages: Sequence[float],
    inference_logprobs: Sequence[float],
    trainer_logprobs: Sequence[float],
    entropy: Sequence[float],
    dppo_mask_low: float = 0.2,
    dppo_mask_high: float = 0.2,
) -> None:
    """Append one record as prime-rl's exporter writes it, its derived columns by its formulas (sims, tests)."""
    log_ratio = [t - i for t, i in zip(trainer_logprobs, inference_logprobs, strict=True)]
    ratio = [math.exp(min(r, 700.0)) for r in log_ratio]
    delta = [
        math.exp(min(t, 0.0)) - math.exp(min(i, 0.0))
        for t, i in zip(trainer_logprobs, inference_logprobs, strict=True)
    ]
    high = [
        m and a > 0 and d > dppo_mask_high
        for m, a, d in zip(loss_mask, advantages, delta, strict=True)
    ]
    low = [
        m and a < 0 and d < -dppo_mask_low
        for m, a, d in zip(loss_mask, advantages, delta, strict=True)
    ]

    def finite(values: Sequence[float]) -> list[float | None]:
        return [v if math.isfinite(v) else None for v in values]

    row = {
        "schema_version": SCHEMA_VERSION,
        "step": int(step_dir.name.removeprefix("step_")),
        "rank": rank,
        "micro_step": 0,
        "micro_sequence_idx": index,
        "export_sequence_idx": index,
        "env_name": env,
        "token_ids": list(token_ids),
        "position_ids": list(range(len(token_ids))),
        "loss_mask": list(loss_mask),
        "advantages": finite(advantages),
        "inference_logprobs": finite(inference_logprobs),
        "trainer_logprobs": finite(trainer_logprobs),
        "entropy": finite(entropy),
        "mismatch_kl": finite([r - lr - 1 for r, lr in zip(ratio, log_ratio, strict=True)]),
        "log_importance_ratio": finite(log_ratio),
        "importance_ratio": finite(ratio),
        "prob_delta": finite(delta),
        "is_masked": [h or lo for h, lo in zip(high, low, strict=True)],
        "is_masked_high": high,
        "is_masked_low": low,
        "rl_weights": [None] * len(token_ids),
        "ce_weights": [None] * len(token_ids),
        "ref_kl_weights": [None] * len(token_ids),
    }
    step_dir.mkdir(parents=True, exist_ok=True)
    fd = safe_files.open_append(step_dir / f"rank_{rank}.jsonl")
    try:
        os.write(fd, (json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n").encode())
    finally:
        os.close(fd)


def mark_stable(step_dir: Path) -> None:
    (step_dir / STABLE).touch()
