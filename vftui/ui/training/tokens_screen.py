"""``t``: a step's exported tokens, worst first: the step's tails and each worst token's text and values.

The step is read in a worker (a step can be gigabytes); ``[`` and ``]`` go to the step before and after,
``b`` changes what ranks the tokens. The tokenizer is loaded once, in the background, by the loader the
command gives (the run's own, or ``--tokenizer``); until then, and without one, tokens show as ids.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from vftui.text.printable import one_line
from vftui.training import token_exports
from vftui.training.check_in import number
from vftui.training.layout import TrainingRun
from vftui.training.token_exports import PICKS, ExportedSequence, StepFigures, WorstToken
from vftui.ui.background import in_background
from vftui.ui.decode import TokenDecoder
from vftui.ui.widgets.keys_footer import KeysFooter

DecoderLoader = Callable[[], tuple[TokenDecoder, str]]
SHOWN = (
    ("log_importance_ratio", "log ratio"),
    ("inference_logprobs", "sampler"),
    ("trainer_logprobs", "trainer"),
    ("entropy", "entropy"),
    ("advantages", "adv"),
    ("is_masked", "masked"),
)


NO_STEP = "no whole exported step yet (trainer.enable_token_export on?)"


class StepRead(Message):
    def __init__(self, figures: StepFigures | None, said: str, asked: int) -> None:
        super().__init__()
        self.figures = figures
        self.said = said
        self.asked = asked


class DecoderReady(Message):
    def __init__(self, decoder: TokenDecoder, note: str) -> None:
        super().__init__()
        self.decoder = decoder
        self.note = note


class SequenceRead(Message):
    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text


class SequenceScreen(ModalScreen[None]):
    """``enter`` on a worst token: its whole sequence, each token colored by the column ranked by."""

    BINDINGS = [Binding("escape,enter", "dismiss", "back")]

    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="sequence-text")
        yield KeysFooter()


def colored(seq: ExportedSequence, by: str, decoder: TokenDecoder, at: int) -> Text:
    """The sequence's text, its trained tokens red by their share of the step's worst value, the one at
    ``at`` underlined; untrained tokens dim."""
    values = seq.pick(by)
    trained = seq.trained()
    known = values[trained & ~np.isnan(values)]
    top = float(known.max()) if len(known) else 0.0
    text = Text()
    for i, token in enumerate(seq.tokens):
        value = float(values[i])
        if not trained[i]:
            style = "dim"
        elif top > 0 and value > 0:
            style = "bold red" if value >= 0.5 * top else "red" if value >= 0.1 * top else ""
        else:
            style = ""
        if i == at:
            style += " underline reverse"
        text.append(decoder.piece(token), style=style.strip())
    return text


class TokensScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,t", "dismiss", "back"),
        Binding("left_square_bracket", "step(-1)", "step before"),
        Binding("right_square_bracket", "step(1)", "step after"),
        Binding("b", "by", "rank by"),
    ]

    def __init__(self, run: TrainingRun, load_decoder: DecoderLoader | None = None) -> None:
        super().__init__()
        self.run = run
        self.load_decoder = load_decoder
        self.decoder = TokenDecoder(loading=load_decoder is not None)
        self.decoder_note = ""
        self.by = "mismatch_kl"
        self.step: int | None = None
        self.figures: StepFigures | None = None
        self.asked = 0  # reads asked for: only the last one's answer is shown

    def compose(self) -> ComposeResult:
        yield Static(Text("reading the token exports…", style="dim"), id="tokens-summary")
        yield DataTable(id="tokens-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        if (load := self.load_decoder) is not None:
            in_background(self, lambda: DecoderReady(*load()), "tokenizer")
        self.action_step(0)

    @on(DecoderReady)
    def _decoder_ready(self, message: DecoderReady) -> None:
        self.decoder, self.decoder_note = message.decoder, message.note
        self._show_step()

    def action_step(self, move: int) -> None:
        stable = [s for s in token_exports.steps(self.run.token_exports) if s.stable]
        if not stable:
            self._read(None)
            return
        steps = [s.step for s in stable]
        at = steps.index(self.step) if self.step in steps else len(steps) - 1
        index = min(len(steps) - 1, max(0, at + move))
        self.step = steps[index]
        self._read(stable[index])

    def action_by(self) -> None:
        names = list(PICKS)
        self.by = names[(names.index(self.by) + 1) % len(names)]
        self.action_step(0)

    def _read(self, export: token_exports.ExportStep | None) -> None:
        """Read the step in a daemon thread (a step can take a minute: a quit never waits for it); a read
        asked for later wins."""
        self.asked += 1
        asked, by = self.asked, self.by
        if export is None:
            self.post_message(StepRead(None, NO_STEP, asked))
            return
        self.query_one("#tokens-summary", Static).update(
            Text(f"reading step {export.step}…", style="dim")
        )
        in_background(
            self, lambda: StepRead(token_exports.read_step(export, by, 50), "", asked), "step"
        )

    @on(StepRead)
    def _step_read(self, message: StepRead) -> None:
        if message.asked != self.asked:
            return  # a step asked for since
        self.figures = message.figures
        if message.figures is None:
            self.query_one("#tokens-summary", Static).update(Text(message.said, style="dim"))
            return
        self._show_step()

    @on(DataTable.RowSelected, "#tokens-table")
    def _open_sequence(self, event: DataTable.RowSelected) -> None:
        if self.figures is not None and event.cursor_row < len(self.figures.worst):
            token, by, decoder = self.figures.worst[event.cursor_row], self.by, self.decoder
            in_background(self, lambda: self._sequence(token, by, decoder), "sequence")

    def _sequence(self, token: WorstToken, by: str, decoder: TokenDecoder) -> SequenceRead:
        step = token_exports.ExportStep(
            token.step, self.run.token_exports / f"step_{token.step}", True
        )
        seq = token_exports.find_sequence(step, token.rank, token.sequence, [])
        if seq is None:
            return SequenceRead(Text("the sequence is gone from the step's files", style="yellow"))
        header = Text(
            f"step {token.step}, rank {token.rank} seq {token.sequence}: red by {by} "
            "(bold: half the sequence's worst or more), the token picked reversed, untrained dim\n\n",
            style="bold",
        )
        return SequenceRead(header + colored(seq, by, decoder, token.position))

    @on(SequenceRead)
    def _sequence_read(self, message: SequenceRead) -> None:
        self.app.push_screen(SequenceScreen(message.text))

    def _show_step(self) -> None:
        f = self.figures
        if f is None:
            return
        summary = Text(
            f"step {f.step}: {f.sequences} sequences, {f.trained:,} trained tokens", style="bold"
        )
        if f.mismatch_kl:
            kl = f.mismatch_kl
            summary.append(
                f"   mismatch_kl mean {number(kl['mean'])} p99 {number(kl['p99'])} max {number(kl['max'])}"
            )
        if f.masked_share is not None:
            summary.append(f"   masked {f.masked_share:.1%}")
        if f.ratio:
            summary.append(f"   ratio p1 {number(f.ratio['p1'])} p99 {number(f.ratio['p99'])}")
        summary.append(
            f"\nworst by {self.by} (b changes it; [ and ] change the step; enter: the token's sequence)",
            style="dim",
        )
        for note in ([self.decoder_note] if self.decoder_note else []) + f.problems[:3]:
            summary.append("\n" + one_line(note), style="yellow")
        self.query_one("#tokens-summary", Static).update(summary)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_columns(
            "#", "rank:seq", "pos", "token", self.by, *(label for _, label in SHOWN), "context"
        )
        for n, token in enumerate(f.worst, start=1):
            piece = self.decoder.piece(token.token_id)
            context = Text(self.decoder.text(token.before)[-20:], style="dim")
            context.append(f"[{piece}]", style="bold red")
            context.append(self.decoder.text(token.after)[:20], style="dim")
            values = [_value(token.values.get(col)) for col, _ in SHOWN]
            table.add_row(
                str(n),
                f"{token.rank}:{token.sequence}",
                str(token.position),
                repr(piece),
                number(token.key),
                *values,
                context,
            )


def _value(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return number(float(v)) if isinstance(v, (int, float)) else "?"
