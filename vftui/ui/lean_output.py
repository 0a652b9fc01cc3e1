"""Fewer bytes to the terminal: each style change written once, not once per piece of text.

Textual writes every segment as ``ESC[<style>m text ESC[0m``, so a row of bars or table
cells in the same colour repeats the same style and reset for each cell. Over SSH that
is most of what the dashboard sends. ``StyleRuns`` rewrites that stream: it keeps the
terminal in the last style it set and writes only the codes that differ (the foreground
alone when only it changed), going back to the default before anything that could paint
with the current style (clearing, scrolling) and at the end of every write. The screen
looks the same; the bytes are fewer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textual.drivers.linux_driver import LinuxDriver

from vftui.ui.terminal import answers

CSI = re.compile(r"\x1b\[([0-9;:?<=>]*)([@-~])")
RESET = "\x1b[0m"


@dataclass(frozen=True)
class Pen:
    """A terminal style as Textual writes it: attribute codes, then foreground, then background."""

    attributes: frozenset[str] = frozenset()
    fg: str = ""
    bg: str = ""

    @classmethod
    def parse(cls, params: str) -> Pen:
        codes = [c for c in params.split(";") if c] if params else []
        attributes: set[str] = set()
        fg, bg = "", ""
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in ("38", "48"):  # 256-colour (5;n) or true-colour (2;r;g;b)
                span = 3 if i + 1 < len(codes) and codes[i + 1] == "5" else 5
                value = ";".join(codes[i : i + span])
                fg, bg = (value, bg) if code == "38" else (fg, value)
                i += span
                continue
            number = int(code) if code.isdigit() else -1
            if 30 <= number <= 37 or 90 <= number <= 97 or number == 39:
                fg = code
            elif 40 <= number <= 47 or 100 <= number <= 107 or number == 49:
                bg = code
            elif number == 0:
                attributes, fg, bg = set(), "", ""
            else:
                attributes.add(code)
            i += 1
        return cls(frozenset(attributes), fg, bg)

    def change_to(self, new: Pen) -> str:
        """The shortest codes that turn this style into ``new``."""
        if new == self:
            return ""
        if (
            not new.attributes >= self.attributes
            or (self.fg and not new.fg)
            or (self.bg and not new.bg)
        ):
            return RESET if new == DEFAULT else f"\x1b[0;{new.codes()}m"
        codes = sorted(new.attributes - self.attributes)
        codes += [c for c, old in ((new.fg, self.fg), (new.bg, self.bg)) if c and c != old]
        return f"\x1b[{';'.join(codes)}m"

    def codes(self) -> str:
        return ";".join([*sorted(self.attributes), *(c for c in (self.fg, self.bg) if c)])


DEFAULT = Pen()


class StyleRuns:
    """Rewrites one stream of terminal output; call it with each write, in order."""

    def __init__(self) -> None:
        self._pens: dict[str, Pen] = {}

    def __call__(self, data: str) -> str:
        out: list[str] = []
        current = wanted = DEFAULT
        position = 0

        def text(piece: str) -> None:
            nonlocal current
            if piece.strip("\r\n"):  # line breaks paint nothing: no style needed for them
                out.append(current.change_to(wanted))
                current = wanted
                out.append(piece)
            elif piece:
                out.append(piece)

        for match in CSI.finditer(data):
            text(data[position : match.start()])
            params, final = match.groups()
            if final == "m":
                wanted = self._pen(params)
            elif final == "H" or params.startswith(
                "?"
            ):  # moving the cursor or a mode paints nothing
                out.append(match.group())
            else:
                out.append(current.change_to(DEFAULT))
                current = wanted = DEFAULT
                out.append(match.group())
            position = match.end()
        text(data[position:])
        out.append(current.change_to(DEFAULT))
        return "".join(out)

    def _pen(self, params: str) -> Pen:
        pen = self._pens.get(params)
        if pen is None:
            if (
                len(self._pens) > 4096
            ):  # a theme has a few dozen styles; this only bounds the memory
                self._pens.clear()
            pen = self._pens[params] = Pen.parse(params)
        return pen


class LeanLinuxDriver(LinuxDriver):
    """Textual's terminal driver, writing through ``StyleRuns``, and quiet once the terminal hangs up."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._runs = StyleRuns()
        self._hung_up = False

    def hang_up(self) -> None:
        """SIGHUP: if the terminal is gone (a dropped SSH session), stop reading it and drop what would be written.

        Left alone, the input thread spins on the dead terminal and the writer thread stops
        taking writes, so the app's next frame blocks it for good and it never exits. A SIGHUP
        sent while the terminal is still there (``kill -HUP``) changes nothing here: the app
        stops as on SIGTERM and leaves the terminal as it found it.
        """
        if answers(self.fileno):
            return
        self._hung_up = True
        self.exit_event.set()

    def write(self, data: str) -> None:
        if not self._hung_up:
            super().write(self._runs(data))


def lean_driver(default: type) -> type:
    """The driver an app should use instead of ``default`` (Textual's pick for this terminal)."""
    return LeanLinuxDriver if default is LinuxDriver else default
