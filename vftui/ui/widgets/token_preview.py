"""The selected rollout as the trainer sees it: token boundaries, masks and logprobs.

A rollout can be thousands of tokens. The tokens are laid out into lines once per
selection (and per width), and drawn with the line API: a repaint renders only the
lines on screen, so a long rollout never slows the keyboard down.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from vftui.events import GroupCollected
from vftui.group_format import MASKED, trained_tokens
from vftui.text.printable import printable
from vftui.ui.decode import TokenDecoder

SHADES = ("on grey15", "on grey23")
HEAT = ["red", "dark_orange", "yellow", "green_yellow", "green"]

WORD = re.compile(r"\S+\s*|\s+")
WORDS_FROM = 24  # cells: a piece longer than a token is text to wrap between its words

Piece = tuple[str, str]
"""A token's display text (``\\n`` ends a line) and its style."""


@functools.lru_cache(maxsize=256)
def parsed(style: str) -> Style:
    return Style.parse(style)


def logprob_style(logprob: float) -> str:
    p = math.exp(min(0.0, logprob))
    return f"bold {HEAT[min(len(HEAT) - 1, int(p * len(HEAT)))]}"


@dataclass(frozen=True)
class Laid:
    """A rollout ready to lay out: its pieces, where the model's own words start, its token counts."""

    pieces: list[Piece]
    first_trained: int  # the piece the reader jumps to
    trained: int
    masked: int


def rollout_pieces(
    group: GroupCollected,
    rollout: int,
    decoder: TokenDecoder,
    show_ids: bool = False,
    limit: int = 8000,
) -> Laid:
    """The rollout's tokens as styled pieces; its messages where it has no token ids (vf-eval's results
    keep none)."""
    tokens, masks = group.tokens[rollout], group.masks[rollout]
    if not tokens and rollout < len(group.messages):
        said = message_pieces(group.messages[rollout])
        answer = next((i for i, (text, _) in enumerate(said) if text == "assistant: "), 0)
        return Laid(said, answer, 0, 0)
    logprobs = group.logprobs[rollout] if group.logprobs else None
    trained = trained_tokens(masks)
    pieces: list[Piece] = []
    first: int | None = None
    i = 0
    for size, text in decoder.pieces(tokens[: min(limit, len(masks))]):
        text = text.replace("\n", "↵\n")
        if show_ids:
            text = f"{text}·{'·'.join(map(str, tokens[i : i + size]))}"
        shade = SHADES[len(pieces) % 2]
        if masks[i] == MASKED:  # a character cut across tokens: as its first token
            style = f"dim {shade}"
        else:
            style = f"{logprob_style(logprobs[i])} {shade}" if logprobs else f"bold cyan {shade}"
            first = len(pieces) if first is None else first
        pieces.append((text, style))
        i += size
    if len(tokens) > limit:
        pieces.append((f"\n… {len(tokens) - limit} more tokens", "italic"))
    return Laid(pieces, first or 0, trained, len(tokens) - trained)


def rollout_header(
    group: GroupCollected, rollout: int, trained: int, masked: int, decoder: TokenDecoder
) -> Text:
    """What the preview (and the pager's first line) says of the rollout: group, rollout, reward, tokens."""
    header = Text()
    header.append(
        f"group {group.index} · rollout {rollout + 1}/{len(group.tokens)} · ", style="bold"
    )
    header.append(f"reward {group.scores[rollout]:.3f} · ")
    tokenized = bool(group.tokens[rollout])
    if tokenized:
        header.append(f"trained {trained}", style="bold cyan").append(" · ")
        header.append(f"masked {masked}", style="dim")
    else:  # vf-eval's results: the messages alone, no tokens a trainer would learn from or not
        messages = group.messages[rollout] if rollout < len(group.messages) else []
        header.append(f"{len(messages)} messages, no token ids kept", style="dim")
    reason = group.finish_reasons[rollout] if rollout < len(group.finish_reasons) else None
    if reason:
        header.append(f" · {reason}")
    if tokenized and not decoder.available:
        header.append(
            " · (tokenizer loading: ids)" if decoder.loading else " · (no tokenizer: ids)",
            style="italic",
        )
    return header


def folded(laid: Laid) -> Laid:
    """The prompt (and tool schemas) before the model's first words as one line: the completion at once."""
    if laid.first_trained <= 0:
        return laid
    note = (f"… {laid.first_trained} prompt pieces folded (f shows them)\n", "italic dim")
    return Laid([note, *laid.pieces[laid.first_trained :]], 1, laid.trained, laid.masked)


def message_pieces(messages: list[dict]) -> list[Piece]:
    """A rollout's messages as text: the model's own words bright, the rest dim."""
    pieces: list[Piece] = []
    for message in messages:
        role = printable(str(message.get("role", "?")))  # text from a file: shown, never obeyed
        pieces.append((f"{role}: ", "bold"))
        content = printable(str(message.get("content") or ""))
        pieces.append((f"{content}\n", "bold cyan" if role == "assistant" else "dim"))
    return pieces


def wrap_pieces(
    pieces: list[Piece], width: int, starts: list[int] | None = None
) -> list[list[Segment]]:
    """Lines of at most ``width`` cells; a token moves whole to the next line when it can, and a long
    piece (a message) breaks between words. ``starts`` gets the line each piece begins on."""
    lines = _Lines(max(1, width))
    for text, style_name in pieces:
        if starts is not None:
            starts.append(len(lines.done))
        for k, part in enumerate(text.split("\n")):
            if k:
                lines.newline()
            if part:
                lines.place(part, parsed(style_name))
    lines.newline()
    return lines.done


class _Lines:
    """Segments laid into lines of ``width`` cells."""

    def __init__(self, width: int) -> None:
        self.width, self.used = width, 0
        self.done: list[list[Segment]] = []
        self.line: list[Segment] = []

    def newline(self) -> None:
        self.done.append(self.line)
        self.line, self.used = [], 0

    def place(self, part: str, style: Style) -> None:
        size = cell_len(part)
        if (
            size > self.width - self.used and size > WORDS_FROM
        ):  # a message, not a token: between its words
            for word in WORD.findall(part):
                self._add(word, cell_len(word.rstrip()), style)
        else:
            self._add(part, size, style)

    def _add(self, text: str, size: int, style: Style) -> None:
        """``text`` on this line if its ``size`` fits, else on the next; chopped only when wider than a line."""
        if self.used and self.used + size > self.width:
            self.newline()
        for n, chunk in enumerate(
            chop_cells(text, self.width) if cell_len(text) > self.width else [text]
        ):
            if n:
                self.newline()
            self.line.append(Segment(chunk, style))
            self.used += cell_len(chunk)


class TokenText(ScrollView, can_focus=True):
    """The laid-out tokens; scroll with the arrow keys when focused.

    Lines are wrapped to the width, so it never scrolls sideways, and the scrollbar's
    gutter is always kept so the width does not change when a long rollout needs it.
    """

    DEFAULT_CSS = "TokenText { overflow-x: hidden; scrollbar-gutter: stable; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._pieces: list[Piece] = []
        self._lines: list[list[Segment]] = []
        self._starts: list[int] = []
        self._jump_to = 0

    @property
    def plain(self) -> str:
        return "\n".join("".join(s.text for s in line) for line in self._lines)

    def show(self, pieces: list[Piece], jump_to: int = 0) -> None:
        """Lay ``pieces`` out and scroll to piece ``jump_to`` (the completion), a line of context above it."""
        self._pieces, self._jump_to = pieces, jump_to
        self._layout()
        self.call_after_refresh(
            self._jump
        )  # once the new height is laid out: the scrollbar then agrees

    def _jump(self) -> None:
        line = self._starts[self._jump_to] if self._jump_to < len(self._starts) else 0
        self.scroll_to(0, max(0, line - 1), animate=False, immediate=True, force=True)

    def on_resize(self) -> None:
        """Laid out again at the new width: the completion's first line moved, so jump to it again."""
        self._layout()
        self.call_after_refresh(self._jump)

    def _layout(self) -> None:
        self._starts = []
        self._lines = wrap_pieces(
            self._pieces, self.scrollable_content_region.width or 80, self._starts
        )
        self.virtual_size = Size(self.scrollable_content_region.width, len(self._lines))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = int(self.scroll_offset.y) + y
        if row >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        return (
            Strip(self._lines[row])
            .apply_style(self.rich_style)
            .crop_extend(0, width, self.rich_style)
        )


class TokenPreview(Vertical):
    """``group``'s rollout number ``rollout``, bound from the app (``data_bind``), as ``decoder`` spells it.

    A new group also resets the rollout: the preview is laid out once, after both changed.
    """

    BORDER_TITLE = "tokens"
    # repaint=False: its header and its text repaint themselves, not the panel's border with them
    group: reactive[GroupCollected | None] = reactive(
        None, always_update=True, init=False, repaint=False
    )
    rollout: reactive[int] = reactive(0, init=False, repaint=False)
    show_ids: reactive[bool] = reactive(False, init=False, repaint=False)
    fold: reactive[bool] = reactive(False, init=False, repaint=False)  # the prompt folded away
    decoder: reactive[TokenDecoder] = reactive(
        TokenDecoder, always_update=True, init=False, repaint=False
    )

    def compose(self):
        yield Static(id="token-counts")
        yield TokenText(id="token-text")

    def on_mount(self) -> None:
        self._show()

    def watch_group(self) -> None:
        self._changed()

    def watch_rollout(self) -> None:
        self._changed()

    def watch_show_ids(self) -> None:
        self._changed()

    def watch_fold(self) -> None:
        self._changed()

    def watch_decoder(self) -> None:
        self._changed()

    def _changed(self) -> None:
        if not self._pending:
            self._pending = True
            self.call_later(self._show)

    _pending = False

    def _show(self) -> None:
        self._pending = False
        group = self.group
        counts = self.query_one("#token-counts", Static)
        body = self.query_one(TokenText)
        if group is None:
            counts.update("no group selected", layout=False)
            body.show([])
            return
        rollout = self.rollout % len(group.tokens)
        laid = rollout_pieces(group, rollout, self.decoder, self.show_ids)
        if self.fold:
            laid = folded(laid)
        header = rollout_header(group, rollout, laid.trained, laid.masked, self.decoder)
        counts.update(header, layout=False)
        body.show(laid.pieces, laid.first_trained)
