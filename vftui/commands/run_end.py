"""How a run that ended is told: the lines every view prints at its end, and the exit code it gives.

Both read the run's summary; the lines also look at its files on disk (its page, its eval folder), which is
why they live here, above the readers, and not with the plain wording.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from vftui.errors import EXIT_FAILED, EXIT_GATE, EXIT_INTERRUPTED, EXIT_OK, EXIT_STALLED
from vftui.events import RunState, RunSummary
from vftui.figures.signals import STALL_TIMEOUT
from vftui.run_files.files import RunFiles
from vftui.text.wording import SIMULATION_NOTE, counted


def exit_code(summary: RunSummary) -> int:
    if summary.gate:
        return EXIT_STALLED if summary.gate == STALL_TIMEOUT else EXIT_GATE
    if summary.state is RunState.FAILED:
        return EXIT_FAILED
    return EXIT_OK if summary.groups_done >= summary.groups_total else EXIT_INTERRUPTED


def _identical_rate(m: dict[str, float]) -> str:
    """``0.250 (2/8 groups)``; ``-`` where no group had two rollouts to compare."""
    if "metrics/identical_score_rate" not in m:
        return "- (no group of two or more rollouts)"
    return (
        f"{m['metrics/identical_score_rate']:.3f} "
        f"({int(m['metrics/groups_with_identical_scores'])}/"
        f"{int(m.get('metrics/groups_compared', m.get('metrics/groups_total', 0)))} groups)"
    )


def summary(s: RunSummary, simulated: bool, resume: str = "vftui run") -> list[str]:
    """What a run did, as printed at its end by both views: where its page and eval files are, and a stopped
    run's ``--resume`` command (``resume``: the view's own command, so it carries on as it ran)."""
    m = s.metrics
    head = {
        RunState.FINISHED: (
            "finished"
            if s.groups_done >= s.groups_total
            else "stopped by a gate"
            if s.gate
            else "stopped"
        ),
        RunState.FAILED: "FAILED",
    }.get(s.state, s.state.value)
    lines = [f"run {head}: {s.groups_done}/{s.groups_total} groups in {s.elapsed_s:.1f} s"]
    if s.error:
        lines.append(f"  reason: {s.error}")
    if s.dropped:
        reasons = "; ".join(
            f"{n} {reason}" for reason, n in sorted(s.dropped.items(), key=lambda kv: -kv[1])
        )
        left_out = sum(s.dropped.values())
        lines.append(
            f"  {counted(left_out, 'group')} {'was' if left_out == 1 else 'were'} left out (not sent, not "
            f"saved as data): {reasons}"
        )
    if m:
        kept = (
            f", {m['metrics/mean_reward_kept']:.4f} over the groups kept"
            if s.dropped and "metrics/mean_reward_kept" in m
            else ""
        )
        lines.append(
            f"  mean reward {m.get('metrics/mean_reward', 0):.4f}{kept}, "
            f"reward std {m.get('metrics/reward_std', 0):.4f}, "
            f"identical-score rate {_identical_rate(m)}"
        )
        lines.append(
            f"  turns avg {m.get('metrics/avg_num_turns', 0):.2f}, max {int(m.get('metrics/max_num_turns', 0))}"
        )
        cut, rollouts = s.truncated
        if cut:
            lines.append(
                f"  truncated: {cut / rollouts:.1%} of the rollouts kept ({cut:,} of {rollouts:,}) hit the "
                "token limit (--max-tokens)"
            )
        skip = {
            "mean_reward",
            "mean_reward_kept",
            "reward_std",
            "avg_num_turns",
            "max_num_turns",
            "groups_with_identical_scores",
            "groups_total",
            "groups_compared",
            "identical_score_rate",
        }
        per_fn = [
            f"{k.removeprefix('metrics/')} {v:.4f}"
            for k, v in m.items()
            if k.removeprefix("metrics/") not in skip
        ]
        if per_fn:
            lines.append("  " + ", ".join(per_fn))
    if s.gates_held:
        lines.append(f"  gates: {s.gates_held}")
    lines.append(f"  output: {s.out_path}")
    lines += where_to_look(s.out_path)
    left = s.groups_total - s.groups_done
    if left > 0 and (s.state is RunState.FAILED or (s.state is RunState.FINISHED and not s.gate)):
        once = ", once the reason above is dealt with" if s.state is RunState.FAILED else ""
        lines.append(
            f"  {resume} --resume {shlex.quote(s.out_path)}   collects the {counted(left, 'group')} "
            f"left{once}"
        )
    if simulated:
        lines.append(f"  ({SIMULATION_NOTE})")
    return lines


def where_to_look(out_path: str) -> list[str]:
    """The run's page and an eval's folder with what it holds, as they are on disk now (a run on
    another machine: neither)."""
    files, lines = RunFiles(Path(out_path)), []
    if files.html.is_file():
        lines.append(f"  page: {files.html}")
    if files.eval_dir.is_dir():
        held = sorted(f"{p.name}/" if p.is_dir() else p.name for p in files.eval_dir.iterdir())
        lines.append(f"  eval files: {files.eval_dir}/ ({', '.join(held)})")
    return lines
