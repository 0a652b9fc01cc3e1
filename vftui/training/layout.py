"""Where a prime-rl run keeps its files, and what its resolved configs say.

prime-rl (PrimeIntellect-ai/prime-rl at 559b44772e47) writes a run under ``{output_dir}/{run_name}/``:
``configs/{rl,trainer,orchestrator,inference}.json`` (the resolved settings), ``metrics.jsonl``
(``monitors/file.py``), ``logs/attempt_<n>/`` with ``logs/latest`` a link to the current attempt
(``utils/pathing.py``), ``rollouts/step_N/`` and, with ``trainer.enable_token_export``,
``token_exports/step_N/rank_R.jsonl``. Given only the output folder, the run is its most recently
changed subfolder, as prime-rl's own runbook picks it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vftui import bounds
from vftui.errors import UserError
from vftui.text.printable import one_line

METRICS = "metrics.jsonl"
CONFIGS = "configs"
LOGS = Path("logs", "latest")
TOKEN_EXPORTS = "token_exports"
ROLLOUTS = "rollouts"
MARKS = (METRICS, CONFIGS, "logs", ROLLOUTS, TOKEN_EXPORTS)  # any one makes a folder a run


@dataclass(frozen=True)
class Settings:
    """What the resolved configs say that the views need; None where they do not say it."""

    max_steps: int | None = None
    model: str | None = None  # the tokenizer's name: ``tokenizer.name``, else ``model.name``
    token_export: bool | None = None
    dppo_mask_low: float | None = None
    dppo_mask_high: float | None = None
    renormalised: str = (
        ""  # a sampling setting (top_p < 1, top_k) that renormalises the sampler's logprobs
    )
    note: str = ""  # why a config could not be read


@dataclass(frozen=True)
class TrainingRun:
    """A prime-rl run folder; ``others`` counts the sibling runs passed over when an output folder was named."""

    path: Path
    others: int = 0

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    @property
    def token_exports(self) -> Path:
        return self.path / TOKEN_EXPORTS

    @property
    def name(self) -> str:
        return self.path.name

    def settings(self) -> Settings:
        return read_settings(self.path / CONFIGS)


def is_run(path: Path) -> bool:
    return any((path / mark).exists() for mark in MARKS)


def is_training(path: Path) -> bool:
    """A run folder with what ``watch`` follows (metrics, logs, token exports), not only rollouts to view."""
    return path.is_dir() and any((path / p).exists() for p in (METRICS, LOGS, TOKEN_EXPORTS))


def find(path: Path) -> TrainingRun:
    """The run at ``path``, or the newest run in the output folder ``path``; a ``UserError`` otherwise."""
    path = path.expanduser()
    shown = one_line(str(path))
    if not path.exists():
        raise UserError(f"{shown} does not exist: name a prime-rl run folder or its output folder")
    if not path.is_dir():
        raise UserError(f"{shown} is not a folder: name a prime-rl run folder or its output folder")
    path = path.resolve()
    if is_run(path):
        return TrainingRun(path)
    runs = []
    with contextlib.suppress(OSError):
        runs = [p for p in path.iterdir() if p.is_dir() and is_run(p)]
    if not runs:
        raise UserError(
            f"{shown} is not a prime-rl run: it holds no {METRICS}, configs/, logs/, rollouts/ or "
            "token_exports/, and no run folder that does"
        )
    newest = max(runs, key=_changed)
    return TrainingRun(newest, others=len(runs) - 1)


def _changed(path: Path) -> float:
    """When the run last wrote: its metrics file, else the folder."""
    for candidate in (path / METRICS, path):
        with contextlib.suppress(OSError):
            return candidate.stat().st_mtime
    return 0.0


def read_settings(configs: Path) -> Settings:
    """The settings of ``rl.json``, else of ``trainer.json`` and ``orchestrator.json``; never raises."""
    found: dict[str, Any] = {}
    notes = []
    for name in ("rl.json", "trainer.json", "orchestrator.json"):
        path = configs / name
        if not path.exists():
            continue
        try:
            value = bounds.read_json(path)
        except (OSError, ValueError) as e:
            notes.append(f"configs/{name} cannot be read ({e})")
            continue
        if isinstance(value, dict):
            found[name] = value
    rl, trainer, orchestrator = (
        found.get(n, {}) for n in ("rl.json", "trainer.json", "orchestrator.json")
    )
    loss = _get(rl, "trainer", "loss") or _get(trainer, "loss") or {}
    sampling = _get(rl, "orchestrator", "train", "sampling") or _get(
        orchestrator, "train", "sampling"
    )
    return Settings(
        max_steps=_int(
            _get(rl, "max_steps"), _get(trainer, "max_steps"), _get(orchestrator, "max_steps")
        ),
        model=_text(
            _get(rl, "tokenizer", "name"),
            _get(rl, "model", "name"),
            _get(trainer, "tokenizer", "name"),
            _get(trainer, "model", "name"),
            _get(orchestrator, "model", "name"),
        ),
        token_export=_bool(
            _get(rl, "trainer", "enable_token_export"), _get(trainer, "enable_token_export")
        ),
        dppo_mask_low=_float(_get(loss, "dppo_mask_low")),
        dppo_mask_high=_float(_get(loss, "dppo_mask_high")),
        renormalised=_renormalised(sampling),
        note="; ".join(notes),
    )


def _renormalised(sampling: Any) -> str:
    """prime-rl samples train rollouts at top_p 1; a top_p below 1 or a top_k in ``extra_body`` makes the
    server renormalise over fewer tokens, and its logprobs then differ from the trainer's by design."""
    if not isinstance(sampling, dict):
        return ""
    found = sampling.get("extra_body")
    extra: dict[str, Any] = found if isinstance(found, dict) else {}
    said = []
    for key in ("top_p", "top_k", "min_p"):
        value = extra.get(key, sampling.get(key) if key != "top_p" else None)
        number = bounds.score(value)
        if number is not None and (number < 1 if key == "top_p" else number > 0):
            said.append(f"{key}={number:g}")
    return ", ".join(said)


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _int(*values: Any) -> int | None:
    return next((v for v in values if type(v) is int and 0 < v < bounds.HUGE), None)


def _float(*values: Any) -> float | None:
    return next((float(v) for v in values if bounds.score(v) is not None), None)


def _bool(*values: Any) -> bool | None:
    return next((v for v in values if isinstance(v, bool)), None)


def _text(*values: Any) -> str | None:
    return next((v for v in values if isinstance(v, str) and v.strip()), None)
