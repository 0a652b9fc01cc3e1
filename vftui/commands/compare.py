"""``vftui compare A B [C ...]``: runs, evals, dumps, vf-eval outputs and folders of a run's shards, of one
environment, side by side.

Each later source is set against the first (A). Printed as a table, or as one JSON object
(``--json``); with ``--fail-if-worse D`` it exits 3 when a later source's reward is below A's
by more than D beyond the 95% interval of the change (the paired bootstrap where items pair: the same
id and prompt; else Welch's t), each of A's items it did not score counted as a failure, for CI.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from vftui.commands import fleet
from vftui.comparing import compared
from vftui.comparing.comparison import (
    Change,
    Pairing,
    Summary,
    histograms,
    measure,
    moved,
    worse_beyond,
)
from vftui.errors import EXIT_GATE, UserError
from vftui.figures.paired import PAIRED_MIN, RESAMPLES, SEED, Flips
from vftui.run_files import source_lines
from vftui.run_files.results import Source, load
from vftui.text import wording
from vftui.text.json_lines import finite_json
from vftui.text.printable import one_line, say
from vftui.ui.terminal import has_screen


def load_all(paths: list[Path]) -> list[Source]:
    """The sources, refused with a sentence when one holds no result it can read, or they name different
    environments."""
    return load_sources(list(paths), fleet.REMOTE_VFTUI)


def load_sources(targets: list[Path | tuple[str, str]], remote: str) -> list[Source]:
    """Each source read where it is: a path here, or a (host, path) there by the vftui ``remote`` runs
    (``fleet.fetch_source``), the hosts asked at once; refused as ``load_all`` says."""
    if len(targets) < 2:
        raise UserError("compare needs at least two runs, evals, dumps or vf-eval outputs")

    def read(target: Path | tuple[str, str]) -> Source:
        return (
            load(target)
            if isinstance(target, Path)
            else fleet.fetch_source(target[0], remote, target[1])
        )

    remote_ones = sum(not isinstance(t, Path) for t in targets)
    if not remote_ones:
        return readable([read(t) for t in targets])
    with (
        ThreadPoolExecutor(max_workers=min(remote_ones, fleet.HOSTS_AT_ONCE)) as pool,
        fleet.asking_hosts(),
    ):
        return readable(list(pool.map(read, targets)))


def export_source(path: Path) -> int:
    """One source as JSON lines on stdout (``source_lines``): what a vftui on another machine compares."""
    for line in source_lines.export(load(path)):
        print(line)
    return 0


def readable(sources: list[Source]) -> list[Source]:
    """The sources, refused with a sentence when one holds no result, or they name different environments."""
    if empty := next((s for s in sources if not s.items), None):  # nothing to compare: never a pass
        why = "; ".join(empty.warnings)  # a remote source's lines left out say why there
        raise UserError(
            f"{empty.path}: no result compare can read in it ({empty.skipped} lines skipped: torn, "
            f"foreign, or a reward that is not a number{'; ' + why if why else ''})"
        )
    named = {s.env_id for s in sources if s.env_id}
    if len({module_name(env) for env in named}) > 1:
        raise UserError(
            f"these are runs of different environments ({', '.join(sorted(named))}); compare runs of one"
        )
    return sources


def module_name(env_id: str) -> str:
    """``owner/alphabet-sort`` as vf-eval names it once installed: ``alphabet_sort``."""
    return env_id.rsplit("/", 1)[-1].replace("-", "_")


def note_unread(sources: list[Source]) -> None:
    """On stderr, each source's ``unread`` lines and its warnings (shards and items missing)."""
    for source in sources:
        path = one_line(str(source.path))
        for line in compared.unread(source):
            print(f"vftui: {path}: {one_line(line)}", file=sys.stderr)
        # a remote source's warnings are what its host said: shown, never obeyed
        for warning in source.warnings:
            print(f"vftui: warning: {path}: {one_line(warning)}", file=sys.stderr)


def run_compare(
    sources: list[Source],
    as_json: bool,
    fail_if_worse: float | None,
    threshold: float | None,
    no_ui: bool = False,
    theme: str | None = None,
) -> int:
    """The comparison as JSON, as text, or (in a terminal, without --no-ui) in the compare app; with
    ``fail_if_worse``, its verdict on each later source on stderr, passed or failed."""
    note_unread(sources)
    summaries, changes = measure(sources, threshold)
    if fail_if_worse is not None:
        refuse_unjudged(sources, changes)
    worse = [
        s.path
        for s, c in zip(sources[1:], changes, strict=True)
        if fail_if_worse is not None and worse_beyond(c, fail_if_worse)
    ]
    if as_json:
        print(json.dumps(finite_json(as_dict(summaries, changes, fail_if_worse, worse))))
    elif no_ui or not has_screen():
        say(report(summaries, changes), sys.stdout)
    else:
        from vftui.ui import themes
        from vftui.ui.compare_app import CompareApp

        ours = themes.available_themes()
        CompareApp(summaries, changes, fail_if_worse, themes.resolve(theme, ours=ours), ours).run()
    if fail_if_worse is not None:
        letters = compared.letters(len(sources))
        for letter, source, change in zip(letters[1:], sources[1:], changes, strict=True):
            said = compared.verdict(str(source.path), str(sources[0].path), change, fail_if_worse)
            figure = compared.signed(change.judged.reward)
            say(f"vftui: {said} ({letter} - A reward {figure})", sys.stderr)
    return EXIT_GATE if worse else 0


def refuse_unjudged(sources: list[Source], changes: list[Change]) -> None:
    """The gate never passes a change it has no interval for (under ``PAIRED_MIN`` items judged, or one in
    a source that shares none): a sentence."""
    for source, change in zip(sources[1:], changes, strict=True):
        if change.pairing.unpaired is not None:
            raise UserError(
                f"--fail-if-worse cannot judge {one_line(str(source.path))} against "
                f"{one_line(str(sources[0].path))}: {_not_paired(change.pairing)}; the gate judges the "
                "same examples in both (compare runs of the same split)"
            )
        if change.judged.reward.high is None:
            raise UserError(
                f"--fail-if-worse cannot judge {one_line(str(source.path))} against "
                f"{one_line(str(sources[0].path))}: {_too_few(change)}, too few for a 95% interval "
                f"of the change (it needs {PAIRED_MIN} or more); compare more examples"
            )


def _not_paired(pairing: Pairing) -> str:
    """Why the items do not pair, for the gate's refusal."""
    other = (
        f"{wording.counted(pairing.different, 'id')} in common hold other prompts"
        if pairing.different
        else "they share no example id"
    )
    return f"only {wording.counted(pairing.pairs, 'item')} pair (same id and prompt): {other}"


def _too_few(change: Change) -> str:
    """What the gate had too few of: items paired (and those of A it counted as failures). Only a paired
    change gets here: an unpaired one is refused before (``_not_paired``)."""
    missed = change.judged.unscored
    counting = f" and {missed:,} it did not score" if missed else ""
    return f"only {wording.counted(change.paired, 'item')} in common{counting}"


def as_dict(
    summaries: list[Summary], changes: list[Change], margin: float | None, worse: list[Path]
) -> dict[str, Any]:
    low, high, counts = histograms(summaries)
    letters = compared.letters(len(summaries))  # A to Z, then AA, AB, ...
    return {
        "sources": [
            {"label": letter, **_summary_dict(s), "histogram": bins}
            for letter, s, bins in zip(letters, summaries, counts, strict=True)
        ],
        "histogram_range": [low, high],
        "changes": [
            {
                "label": letter,
                "against": str(summaries[0].source.path),
                "source": str(s.source.path),
                "paired": c.paired,
                "test": c.test,
                "bootstrap": {"resamples": RESAMPLES, "seed": SEED} if c.paired else None,
                "reward": c.reward.as_dict(),
                "pass_at_k": {n: e.as_dict() for n, e in c.passes.items()},
                "mcnemar": _mcnemar_dict(c.flips),
                "pairing": _pairing_dict(letter, c),
                "gate": {  # what --fail-if-worse judges; null where it judges nothing (unpaired)
                    "reward": c.judged.reward.as_dict(),
                    "unscored": c.judged.unscored,
                    "unscored_reward": c.judged.floor,
                }
                if c.pairing.unpaired is None
                else None,
                "functions": {n: e.as_dict() for n, e in c.functions.items()},
                "items": [
                    {"key": i.key, "before": i.before, "after": i.after, "change": i.change}
                    for i in c.items
                ],
            }
            for letter, s, c in zip(letters[1:], summaries[1:], changes, strict=True)
        ],
        "fail_if_worse": margin,
        "worse": [str(p) for p in worse],
    }


def _pairing_dict(letter: str, change: Change) -> dict[str, Any]:
    """How the items lined up: those paired by id and prompt, by id alone, those of one id and two prompts,
    those in one source only, and why the change is unpaired (null where it is paired)."""
    p = change.pairing
    return {
        "same_prompt": p.by_prompt,
        "by_id_alone": p.by_id,
        "different_prompt": p.different,
        "only_in_first": p.only_first,
        "only_in_source": p.only_later,
        "unpaired": p.unpaired,
        "said": compared.unpaired(letter, change),
    }


def _mcnemar_dict(flips: Flips | None) -> dict[str, Any] | None:
    """McNemar's exact test of pass/fail and the items that flipped each way; None where nothing pairs."""
    if flips is None:
        return None
    return {
        "test": "exact",
        "pass_threshold": flips.threshold,
        "both_pass": flips.both,
        "both_fail": flips.neither,
        "pass_to_fail": flips.lost,
        "fail_to_pass": flips.gained,
        "p": flips.p_value,
    }


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {
        "path": str(s.source.path),
        "kind": s.source.kind,
        "env_id": s.source.env_id,
        "items": len(s.source.items),
        "errors": s.source.errors,
        "rollouts": s.rollouts,
        "reward": s.reward.as_dict(),
        "pass@1": s.pass1.as_dict(),
        "pass_threshold": s.threshold,
        "skipped_lines": s.source.skipped,
        "functions": {n: e.as_dict() for n, e in s.functions.items()},
        "truncated": s.truncated,
        "identical": s.identical,
        "completion_chars": s.completion_chars,
        "warnings": s.source.warnings,
        "setup": dataclasses.asdict(s.source.setup),
    }


def report(summaries: list[Summary], changes: list[Change]) -> list[str]:
    """The sources, how they were made and their figures side by side, the histograms, each change and the
    items that dropped and gained most."""
    letters = compared.letters(len(summaries))
    pad = len(letters[-1])  # AA and on past 26 sources
    lines = [compared.title(summaries)]
    lines += [
        f"  {letter:<{pad}}  {s.source.path} ({s.source.kind})"
        for letter, s in zip(letters, summaries, strict=True)
    ]
    setup = compared.setup_rows(summaries)
    if differ := compared.differing(setup):
        lines.append(f"  they differ in: {', '.join(differ)}")
    rows = [(label, list(map(compared.cut, values))) for label, values in setup]
    rows += compared.figure_rows(summaries)
    width = max(len(label) for label, _ in rows)
    columns = [
        max(len(letter), *(len(values[n]) for _, values in rows)) + 2
        for n, letter in enumerate(letters)
    ]
    lines.append(
        f"  {'':<{width}}  " + "".join(f"{x:<{w}}" for x, w in zip(letters, columns, strict=True))
    )
    lines += [
        f"  {label:<{width}}  "
        + "".join(f"{v:<{w}}" for v, w in zip(values, columns, strict=True)).rstrip()
        for label, values in rows
    ]
    low, high, counts = histograms(summaries)
    lines.append(f"  reward histogram, {compared.histogram_span(low, high)} (rollouts):")
    lines += [
        f"    {letter:<{pad}}  {compared.bars(bins)}"
        for letter, bins in zip(letters, counts, strict=True)
    ]
    for letter, change in zip(letters[1:], changes, strict=True):
        lines.append("  " + compared.change_line(letter, change))
        lines.append(f"    {compared.pass_changes(change)}")
        if change.flips is not None:
            flips = change.flips
            lines.append(f"    {compared.mcnemar(flips)} ({compared.unflipped(flips)})")
            lines.append(f"    {compared.flipped('pass -> fail', flips.lost)}")
            lines.append(f"    {compared.flipped('fail -> pass', flips.gained)}")
        lines.append(f"    {compared.pairing(letter, change)}")
        lines += [f"    {said}" for said in (compared.unpaired(letter, change),) if said]
        lines += [f"    {said}" for said in (compared.unscored(letter, change),) if said]
        if functions := compared.function_changes(change):
            lines.append(f"    by function: {functions}")
        lines += _moved(change)
    return lines


def _moved(change: Change) -> list[str]:
    """The items that dropped most, worst first, and those that gained most, best first."""
    drops, gains = moved(change.items, compared.SHOWN_EACH)
    lines = []
    for shown, how in ((drops, "dropped"), (gains, "gained")):
        everyone = sum(1 for i in change.items if (i.change < 0) == (how == "dropped") and i.change)
        if shown:
            lines.append(f"    items that {how} most ({len(shown)} of {everyone} that {how}):")
            lines += [
                f"      {i.key:<12} {wording.number(i.before)} -> {wording.number(i.after)}  "
                f"{wording.number(i.change, '+')}"
                for i in shown
            ]
    if unchanged := sum(1 for i in change.items if i.change == 0):
        lines.append(f"    {wording.counted(unchanged, 'item')} unchanged")
    return lines
