"""``vftui tokens RUN``: a step's exported tokens, worst first, decoded with the run's tokenizer.

Reads prime-rl's token exports (``training.token_exports``) a step at a time: the step's tails that
means hide (p99 and max mismatch, the masked share, ratio quantiles), its worst trained tokens by the
column picked (position, text, every value), and with ``--sequence RANK:SEQ`` one sequence with each
token colored by that column. The tokenizer is ``--tokenizer``, else the one the run's configs name;
one that cannot be loaded here shows token ids, and says so: text is never decoded with a guess.
A vftui rl run (Atropos) has the sampler's logprob of each trained token only: its least likely
sampled tokens come first (``run_files.rl_tokens``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.text import Text

from vftui.errors import UserError
from vftui.run_files.files import RunFiles
from vftui.run_files.records import run_record
from vftui.run_files.rl_tokens import rollouts
from vftui.text.printable import one_line, say
from vftui.training import token_exports
from vftui.training.check_in import number
from vftui.training.layout import TrainingRun, find
from vftui.training.token_exports import PICKS, ExportedSequence, ExportStep, StepFigures
from vftui.ui.decode import TokenDecoder


def load_decoder(name: str | None, given: bool) -> tuple[TokenDecoder, str]:
    """The decoder of ``name``, and a note when there is none; ``given`` (``--tokenizer``): a failure is an error."""
    if not name:
        return TokenDecoder(), "the run's configs name no model: token ids shown (pass --tokenizer)"
    try:
        from transformers import AutoTokenizer

        from vftui.collector.gguf_tokenizer import is_gguf, tokenizer_folder

        source = str(tokenizer_folder(name)) if is_gguf(name) else name
        return TokenDecoder(AutoTokenizer.from_pretrained(source, local_files_only=True)), ""
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds for "not here"
        why = one_line(str(e).split("\n")[0])[:160]
        if given:
            raise UserError(f"--tokenizer {one_line(name)} cannot be loaded here: {why}") from None
        return TokenDecoder(), (
            f"the run's tokenizer {one_line(name)} cannot be loaded here ({why}): token ids shown "
            "(pass --tokenizer FOLDER or a .gguf)"
        )


def pick_step(run: TrainingRun, step: int | None) -> ExportStep:
    exported = token_exports.steps(run.token_exports)
    if not exported:
        hint = (
            ""
            if run.settings().token_export
            else " (set trainer.enable_token_export = true in its config)"
        )
        raise UserError(f"{one_line(run.name)} has no token exports{hint}")
    if step is None:
        stable = [s for s in exported if s.stable]
        if not stable:
            raise UserError(
                f"no exported step is whole yet (step {exported[-1].step} is being written): wait"
            )
        return stable[-1]
    for found in exported:
        if found.step == step:
            if not found.stable:
                raise UserError(
                    f"step {step} is still being written (no STABLE file yet): wait, or name an earlier step"
                )
            return found
    steps = ", ".join(str(s.step) for s in exported[-5:])
    raise UserError(f"step {step} was not exported (the last exported: {steps})")


@dataclass
class TokenSource:
    """What ``tokens`` reads: a prime-rl step's exports, or a vftui rl run's groups."""

    name: str  # shown
    path: Path
    read: Callable[
        [list[str]], Iterator[ExportedSequence]
    ]  # its sequences, problems said in the list
    figures: StepFigures
    tokenizer: str | None
    where: tuple[
        str, str
    ]  # what a sequence's two numbers are called: ("rank", "seq") or ("group", "rollout")
    notes: list[str] = field(default_factory=list)


def prime_rl_source(run: TrainingRun, step: int | None) -> TokenSource:
    export = pick_step(run, step)
    settings = run.settings()
    notes = []
    if settings.renormalised:
        notes.append(
            f"sampling renormalised the sampler's logprobs ({settings.renormalised}): part of the "
            "mismatch is by design (trl #6789)"
        )
    return TokenSource(
        f"step {export.step} of {one_line(run.name)}",
        run.path,
        lambda problems: token_exports.sequences(export.path, problems),
        StepFigures(export.step, export.stable),
        settings.model,
        ("rank", "seq"),
        notes,
    )


def vftui_source(target: Path, step: int | None) -> TokenSource:
    if step is not None:
        raise UserError("--step names a prime-rl step: a vftui rl run's tokens are read whole")
    try:
        files = RunFiles.find(target, "vftui tokens")
        path, record = files.jsonl, run_record(files)
    except UserError:
        if not target.is_file():
            raise UserError(
                f"vftui tokens {one_line(str(target))}: neither a prime-rl run nor a vftui rl run"
            ) from None
        path, record = target, None  # a groups file alone (a dump): no tokenizer recorded
    return TokenSource(
        one_line(path.name),
        path,
        lambda problems: rollouts(path, problems),
        StepFigures(-1, True),
        record.tokenizer if record and record.tokenizer else None,
        ("group", "rollout"),
        [
            "an Atropos rl run keeps only the sampler's logprobs: the least likely sampled tokens first"
        ],
    )


def source(target: Path, step: int | None) -> TokenSource:
    """A prime-rl run (or its output folder) or a vftui rl run; one sentence when it is neither."""
    path = target.expanduser()
    if path.is_dir() and not RunFiles.all_in(path):
        return prime_rl_source(find(path), step)
    return vftui_source(path, step)


def run_tokens(
    target: Path,
    step: int | None,
    by: str | None,
    worst: int,
    sequence: str | None,
    tokenizer: str | None,
    as_json: bool,
) -> int:
    if worst < 1 or worst > 10_000:
        raise UserError("--worst takes 1 to 10000 tokens")
    found = source(target, step)
    atropos = found.where == ("group", "rollout")
    by = by or ("sampler_logprob" if atropos else "mismatch_kl")
    if atropos and by != "sampler_logprob":
        raise UserError(
            f"--by {by}: a vftui rl run has the sampler's logprobs only (--by sampler_logprob)"
        )
    wanted = _which(found, sequence) if sequence is not None else None
    decoder, note = load_decoder(tokenizer or found.tokenizer, given=tokenizer is not None)
    figures = token_exports.tally(found.read(found.figures.problems), found.figures, by, worst)
    if atropos and not figures.sequences and figures.problems:  # /etc/passwd: no line a group
        raise UserError(
            f"vftui tokens {one_line(str(target))}: no rl group in it ({figures.problems[0]})"
        )
    notes = ([note] if note else []) + found.notes + figures.problems
    if as_json:
        print(json.dumps(_as_json(found, figures, by, decoder, notes), indent=2))
        return 0
    console = Console(highlight=False, soft_wrap=True)
    say(_summary(found, figures, by), sys.stdout)
    for line in _worst_lines(found, figures, by, decoder):
        console.print(line)
    if wanted is not None:
        _show_sequence(console, found, wanted, by, decoder)
    for n in notes:
        say(f"note: {n}", sys.stdout)
    return 0


def _summary(found: TokenSource, f: StepFigures, by: str) -> list[str]:
    envs = ", ".join(f"{one_line(e or '?')} {n}" for e, n in f.envs.items() if e)
    lines = [
        f"{found.name}: {f.sequences} sequences, {f.tokens:,} tokens, {f.trained:,} trained"
        + (f" ({envs})" if envs else ""),
    ]
    tails = []
    if f.mismatch_kl:
        kl = f.mismatch_kl
        tails.append(
            f"mismatch_kl mean {number(kl['mean'])} p99 {number(kl['p99'])} max {number(kl['max'])}"
        )
    if f.abs_log_ratio:
        lr = f.abs_log_ratio
        tails.append(f"|log ratio| p99 {number(lr['p99'])} max {number(lr['max'])}")
    if f.ratio:
        tails.append(
            f"ratio p1 {number(f.ratio['p1'])} p50 {number(f.ratio['p50'])} p99 {number(f.ratio['p99'])}"
        )
    if f.masked_share is not None:
        tails.append(
            f"masked {f.masked_share:.1%} (high {f.masked_high / f.trained:.1%}, low {f.masked_low / f.trained:.1%})"
        )
    if f.entropy:
        tails.append(f"entropy mean {number(f.entropy['mean'])}")
    if f.sampler_logprob:
        lp = f.sampler_logprob
        tails.append(
            f"sampler logprob mean {number(lp['mean'])} p1 {number(lp['p1'])} p50 {number(lp['p50'])}"
        )
    lines.append("tails: " + (" | ".join(tails) if tails else "no trained tokens with figures"))
    if f.sampled:
        lines.append(
            f"(quantiles over a sample of {token_exports.SAMPLE:,} tokens; means and maxima exact)"
        )
    lines.append(f"worst {len(f.worst)} trained tokens by {by}:")
    return lines


SHOWN = (
    ("mismatch_kl", "kl"),
    ("log_importance_ratio", "log ratio"),
    ("inference_logprobs", "sampler"),
    ("trainer_logprobs", "trainer"),
    ("entropy", "entropy"),
    ("advantages", "adv"),
    ("is_masked", "masked"),
)


def _value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return number(float(v))


def _worst_lines(found: TokenSource, f: StepFigures, by: str, decoder: TokenDecoder) -> list[Text]:
    lines = []
    first, second = found.where
    for n, token in enumerate(f.worst, start=1):
        piece = decoder.piece(token.token_id)
        values = "  ".join(
            f"{label} {_value(token.values.get(col))}"
            for col, label in SHOWN
            if col in token.values
        )
        line = Text(
            f"{n:>3}. {first} {token.rank} {second} {token.sequence} pos {token.position}  "
        )
        line.append(repr(piece), style="bold red")
        shown = -token.key if PICKS[by][1] == "negated" else token.key
        line.append(f"  {by} {number(shown)}  {values}\n       ")
        line.append(one_line(decoder.text(token.before)), style="dim")
        line.append(f"[{one_line(piece)}]", style="bold red")
        line.append(one_line(decoder.text(token.after)), style="dim")
        lines.append(line)
    return lines


def _which(found: TokenSource, which: str) -> tuple[int, int]:
    rank_text, _, index_text = which.partition(":")
    if not (rank_text.isdigit() and index_text.isdigit()):
        first, second = (w.upper() for w in found.where)
        raise UserError(
            f"--sequence {one_line(which)}: write {first}:{second}, as the worst tokens list them (0:3)"
        )
    return int(rank_text), int(index_text)


def _show_sequence(
    console: Console, found: TokenSource, wanted: tuple[int, int], by: str, decoder: TokenDecoder
) -> None:
    rank, index = wanted
    which = f"{rank}:{index}"
    seq = next((s for s in found.read([]) if s.rank == rank and s.index == index), None)
    if seq is None:
        raise UserError(f"{found.name} has no sequence {which}")
    values = seq.pick(by)
    trained = seq.trained()
    known = values[trained & ~np.isnan(values)]
    high = float(np.quantile(known, 0.99)) if len(known) else 0.0
    text = Text(
        f"sequence {which} of {found.name}, colored by {by} (red: its top 1%; dim: not trained):\n"
    )
    for i, token in enumerate(seq.tokens):
        value = float(values[i])
        style = "dim" if not trained[i] else "bold red" if value >= high > 0 else ""
        text.append(decoder.piece(token), style=style)
    console.print(text)


def _as_json(
    found: TokenSource, f: StepFigures, by: str, decoder: TokenDecoder, notes: list[str]
) -> dict[str, Any]:
    worst = []
    for token in f.worst:
        item = asdict(token)
        item["text"] = decoder.piece(token.token_id) if decoder.available else None
        item["context"] = (
            decoder.text(token.before)
            + "["
            + decoder.piece(token.token_id)
            + "]"
            + decoder.text(token.after)
            if decoder.available
            else None
        )
        worst.append(item)
    return {
        "run": str(found.path),
        "step": None if f.step < 0 else f.step,
        "sequence_is": list(found.where),
        "by": by,
        "sequences": f.sequences,
        "tokens": f.tokens,
        "trained": f.trained,
        "masked": f.masked,
        "masked_high": f.masked_high,
        "masked_low": f.masked_low,
        "masked_share": f.masked_share,
        "mismatch_kl": f.mismatch_kl,
        "abs_log_ratio": f.abs_log_ratio,
        "importance_ratio": f.ratio,
        "entropy": f.entropy,
        "sampler_logprob": f.sampler_logprob,
        "quantiles_sampled": f.sampled,
        "envs": f.envs,
        "worst": worst,
        "notes": notes,
    }
