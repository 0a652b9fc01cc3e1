"""Themes as data files: the shipped ``themes/`` folder, then the user's themes folder."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from textual.app import App
from textual.theme import BUILTIN_THEMES, Theme

from vftui import paths
from vftui.bounds import read_toml
from vftui.errors import UserError
from vftui.text.printable import say

COLOUR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "success",
    "warning",
    "error",
    "boost",
)
DEFAULT_THEME = "vftui-dark"


def shipped_dirs() -> list[Path]:
    """The repository's ``themes/`` (editable installs) or the wheel's data copy."""
    candidates = [
        Path(__file__).resolve().parents[2] / "themes",
        Path(sys.prefix) / "share" / "vftui" / "themes",
    ]
    return [d for d in candidates if d.is_dir()]


def load_theme(path: Path) -> Theme:
    data = read_toml(path, "theme file")
    if not isinstance(data.get("dark", True), bool):
        raise UserError(f"theme file {path} is malformed: dark must be true or false")
    unknown = set(data) - {"name", "dark", *COLOUR_KEYS}
    if unknown or "primary" not in data:
        problem = f"unknown keys {sorted(unknown)}" if unknown else "no 'primary' colour"
        raise UserError(f"theme file {path} is malformed: {problem}")
    colours: dict[str, Any] = {key: str(data[key]) for key in COLOUR_KEYS if key in data}
    theme = Theme(name=str(data.get("name", path.stem)), dark=data.get("dark", True), **colours)
    try:
        theme.to_color_system()
    except Exception as e:  # a colour Textual cannot parse
        raise UserError(f"theme file {path} is malformed: {e}") from e
    return theme


def theme_dirs() -> list[Path]:
    """Where themes are read from, in order: a later folder wins on a name clash."""
    return [*shipped_dirs(), paths.user_themes_dir()]


def available_themes() -> dict[str, Theme]:
    """Shipped themes, then user themes (which win on a name clash).

    A theme file that does not load is skipped with a warning on stderr: one bad file
    must not stop a start that asked for another theme (``resolve`` fails if it was asked for).
    """
    themes: dict[str, Theme] = {}
    for folder in theme_dirs():
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                try:
                    theme = load_theme(path)
                except UserError as e:
                    say(f"vftui: warning: {e}; skipped it", sys.stderr)
                    continue
                themes[theme.name] = theme
    return themes


def resolve(
    name: str | None,
    builtin: Collection[str] = BUILTIN_THEMES,
    ours: Mapping[str, Theme] | None = None,
) -> str:
    """Check a --theme name against ours (read from disk unless given) and Textual's own; return the name to use."""
    name = name or DEFAULT_THEME
    ours = available_themes() if ours is None else ours
    if name not in ours and name not in builtin:
        _explain_broken(name)
        choices = ", ".join(sorted(set(ours) | set(builtin)))
        raise UserError(f"unknown theme '{name}'; available: {choices}")
    return name


def _explain_broken(name: str) -> None:
    """A theme that was asked for but skipped as broken: raise the reason its file did not load."""
    for folder in reversed(theme_dirs()):
        if (folder / f"{name}.toml").is_file():
            load_theme(folder / f"{name}.toml")


def install(app: App, name: str, ours: Mapping[str, Theme] | None = None) -> None:
    """Register our themes with ``app`` (read from disk unless given) and switch it to ``name``."""
    for theme in (available_themes() if ours is None else ours).values():
        app.register_theme(theme)
    app.theme = name
