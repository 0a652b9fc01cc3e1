"""A training run's check-in, as prime-rl's runbook writes one to STATUS.md: step, health, progress,
stability, performance, inference, notes. The same entry ``vftui status`` prints, appends and
gives as JSON.
"""

from __future__ import annotations

import math
import time
from typing import Any

from vftui.text.printable import one_line
from vftui.training.follow import Snapshot
from vftui.training.overview import Figure

HEALTH_MARK = "**Health**: "


def figure(f: Figure) -> str:
    if f.unit == "%":
        return f"{f.label} {f.value:.1%}"
    if f.unit == "% mfu":
        return f"mfu {f.value:.3g}%"
    return f"{f.label} {number(f.value)}{f.unit}"


def number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3g}"


def step_line(snap: Snapshot) -> str:
    step = snap.overview.step
    most = snap.settings.max_steps
    text = f"{'-' if step is None else step} / {most if most else '?'}"
    return text + (" (finished)" if snap.finished else "")


def engine_lines(snap: Snapshot) -> list[str]:
    lines = []
    for e in snap.engines:
        name = f"{e.url}" + (f" engine {e.label}" if e.label else "")
        if e.error:
            lines.append(f"{name}: {e.error}")
            continue
        parts = [
            f"{what} {number(v)}"
            for what, v in (("running", e.running), ("waiting", e.waiting))
            if v is not None
        ]
        if e.kv_cache is not None:
            parts.append(f"KV cache {e.kv_cache:.0%}")
        lines.append(f"{name}: {', '.join(parts) or 'no gauges'}")
    return [one_line(line) for line in lines]


def entry(snap: Snapshot, now: float | None = None) -> str:
    """The runbook's STATUS.md entry for this snapshot."""
    o = snap.overview
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() if now is None else now))
    lines = [
        f"## {stamp}",
        "",
        f"**Run**: {one_line(str(snap.run.path))}",
        f"**Step**: {step_line(snap)}",
        f"{HEALTH_MARK}{snap.verdict.word}",
        "",
        f"**Progress**: {', '.join(map(figure, o.progress)) or 'nothing logged yet'}.",
        f"**Stability**: {', '.join(map(figure, o.stability)) or 'nothing logged yet'}.",
        f"**Performance**: {', '.join(map(figure, o.performance)) or 'nothing logged yet'}"
        + (f"; {o.waits}" if o.waits else "")
        + ".",
    ]
    if snap.engines:
        lines.append(f"**Inference**: {'; '.join(engine_lines(snap))}.")
    alerts = [a for a in snap.verdict.alerts if a.level != "note"]
    if alerts:
        lines += ["", "**Alerts**:"] + [f"- {a.name}: {a.sentence}" for a in alerts]
    notes = [one_line(n) for n in snap.notes] + [
        f'{line.file} {line.time} {line.level}: "{one_line(line.message)}"'
        for line in snap.verdict.logs[-5:]
    ]
    if notes:
        lines += ["", "**Notes**:"] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def as_json(snap: Snapshot) -> dict[str, Any]:
    o = snap.overview

    def figures(found: list[Figure]) -> list[dict[str, Any]]:
        return [{"label": f.label, "name": f.name, "value": f.value, "step": f.step} for f in found]

    return {
        "run": str(snap.run.path),
        "step": o.step,
        "max_steps": snap.settings.max_steps,
        "finished": snap.finished,
        "health": snap.verdict.word,
        "alerts": [
            {
                "name": a.name,
                "value": a.value,
                "threshold": a.threshold,
                "level": a.level,
                "sentence": a.sentence,
            }
            for a in snap.verdict.alerts
        ],
        "signals": snap.verdict.signals,
        "progress": figures(o.progress),
        "stability": figures(o.stability),
        "performance": figures(o.performance),
        "waits": o.waits,
        "inference": [
            {
                "url": e.url,
                "engine": e.label,
                "running": e.running,
                "waiting": e.waiting,
                "kv_cache": e.kv_cache,
                "error": e.error,
            }
            for e in snap.engines
        ],
        "logs": [
            {"file": x.file, "time": x.time, "level": x.level, "message": x.message}
            for x in snap.verdict.logs
        ],
        "token_export_steps": [s.step for s in snap.exports if s.stable],
        "notes": snap.notes,
        "other_metrics": o.other,
    }


def last_health(text: str) -> str | None:
    """The health the last entry of a STATUS.md said, if any."""
    found = None
    for line in text.splitlines():
        if line.startswith(HEALTH_MARK):
            found = line[len(HEALTH_MARK) :].strip()
    return found
