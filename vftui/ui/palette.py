"""The command palette's own entries (ctrl+p): every key of the screen in front, by what it does.

Textual's palette lists its own commands (theme, quit, keys, screenshot). These are the app's keys,
read from the bindings active on the screen the palette opened over, so each entry runs the very
action its key runs, and only where that key works: a viewed file offers no pause, the health
screen its close. An entry is found by its name or by its help line (``temp`` finds ``T+``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from textual.app import App
from textual.binding import ActiveBinding, Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape
from textual.screen import Screen

TEXTUALS_OWN = frozenset(
    b.action for b in (*App.BINDINGS, *Screen.BINDINGS) if isinstance(b, Binding)
)
"""Textual's keys (focus, copy, the palette itself): its own entries say them, or a palette has no use for them."""


@dataclass(frozen=True)
class KeyCommand:
    title: str
    help: str
    run: Callable[[], object]


def key_commands(screen: Screen) -> Iterator[KeyCommand]:
    """The actions bound on ``screen`` (and the app, behind it) that work now, each once with all its keys."""
    app = screen.app
    textuals = {command.title.casefold() for command in app.get_system_commands(screen)}
    keys: dict[tuple[int, str], list[str]] = {}
    found: dict[tuple[int, str], ActiveBinding] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if (
            not active.enabled
            or binding.system  # the palette's own key
            or not binding.description
            or binding.action in TEXTUALS_OWN
            or binding.description.casefold() in textuals  # its quit is ours (action_quit)
        ):
            continue
        place = (id(active.node), binding.action)
        keys.setdefault(place, []).append(app.get_key_display(binding))
        found.setdefault(place, active)
    for place, active in found.items():
        binding = active.binding
        help_line = f"{binding.tooltip or binding.description} · key {' '.join(keys[place])}"
        yield KeyCommand(
            binding.description,
            escape(help_line),  # the palette reads it as markup: a filter's [ ] are text
            functools.partial(app.run_action, binding.action, active.node),
        )


class KeyCommands(Provider):
    """The palette's source of the app's own keys (``App.COMMANDS``)."""

    async def discover(self) -> Hits:
        for command in key_commands(self.screen):
            yield DiscoveryHit(command.title, command.run, help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in key_commands(self.screen):
            score = max(matcher.match(command.title), matcher.match(command.help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(command.title), command.run, help=command.help)
