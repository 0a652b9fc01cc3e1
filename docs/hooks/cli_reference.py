"""mkdocs hook: the CLI reference page (``cli.md``), built at build time from ``vftui.cli.build_parser()``.

Every command, its description and epilog, and every argument with its own ``help=`` words, as argparse
shows them in ``--help`` (``%%`` and ``%(default)s`` resolved by argparse's formatter): a flag's words live in
the code alone, so the page cannot drift from ``--help``. Arguments hidden from ``--help``
(``argparse.SUPPRESS``) are hidden here too, and ``-h/--help`` is said once for every command.
The page is HTML inside Markdown, every text escaped: help strings hold ``<``, ``*`` and ``_``.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PAGE = "cli.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=render()))
    return files


# where platformdirs looks first; the page shows the folders a user gets, not the builder's
USER_FOLDERS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")


@contextlib.contextmanager
def default_user_folders() -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in USER_FOLDERS if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def render() -> str:
    with default_user_folders():  # the help strings name them, some as vftui.cli is imported
        from vftui.cli import build_parser

        parser = build_parser(with_run_flags=True)
    commands = list(subcommands(parser))
    lines = [
        "# CLI reference",
        "",
        _html(
            "p",
            "Every command and argument, generated from vftui's own argument parser when this site is "
            "built: the words are those of each command's --help. Every command also takes -h/--help.",
        ),
        "",
        "<table><thead><tr><th>command</th><th>what it does</th></tr></thead><tbody>",
    ]
    for name, summary, _ in commands:
        lines.append(
            f'<tr><td><a href="#vftui-{name}"><code>vftui {html.escape(name)}</code></a></td>'
            f"<td>{_text(summary or '')}</td></tr>"
        )
    lines += ["</tbody></table>", ""]
    lines += section(parser, "vftui", None)
    for name, summary, sub in commands:
        lines += section(sub, f"vftui {name}", summary)
    return "\n".join(lines) + "\n"


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str | None, argparse.ArgumentParser]]:
    """Each subcommand: its name, the one line ``help=`` of ``add_parser`` and its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, summaries.get(name), sub


def arguments(parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[argparse.Action]]]:
    """The parser's argument groups as ``--help`` lists them, each with the arguments it shows."""
    for group in parser._action_groups:
        shown = [
            action
            for action in group._group_actions
            if action.help is not argparse.SUPPRESS
            and not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        ]
        if shown:
            yield group.title or "", shown


def section(parser: argparse.ArgumentParser, title: str, summary: str | None) -> list[str]:
    formatter = parser._get_formatter()
    lines = [f"## {title}", ""]
    if summary:
        lines += [_html("p", f"<em>{_text(summary)}</em>", escaped=True), ""]
    if parser.description and parser.description != summary:
        lines += [_paragraphs(parser.description), ""]
    for group, actions in arguments(parser):
        lines.append(_html("p", f"<strong>{_text(group)}</strong>", escaped=True))
        lines.append("<table><thead><tr><th>argument</th><th>what it does</th></tr></thead><tbody>")
        for action in actions:
            invocation = formatter._format_action_invocation(action)
            words = formatter._expand_help(action) if action.help else ""
            lines.append(
                f'<tr><td style="white-space: nowrap"><code>{_text(invocation)}</code></td><td>{_text(words)}</td></tr>'
            )
        lines += ["</tbody></table>", ""]
    if parser.epilog:
        lines += [_block(parser.epilog, formatter), ""]
    return lines


def _paragraphs(text: str) -> str:
    """A description: its paragraphs (blank-line separated), each filled as one, as a browser fills text."""
    return "\n".join(
        _html("p", " ".join(part.split())) for part in text.split("\n\n") if part.strip()
    )


def _block(text: str, formatter: argparse.HelpFormatter) -> str:
    """An epilog: its lines as written where the parser keeps them (RawDescriptionHelpFormatter: exit
    codes and examples), else paragraphs, as argparse fills them."""
    if isinstance(formatter, argparse.RawDescriptionHelpFormatter):
        return f"<pre><code>{_text(text.strip())}</code></pre>"
    return _paragraphs(text)


def _html(tag: str, text: str, escaped: bool = False) -> str:
    return f"<{tag}>{text if escaped else _text(text)}</{tag}>"


def _text(text: str) -> str:
    """Escaped for HTML, with this machine's home folder written ``~`` (defaults such as the config file's
    path are the building user's)."""
    home = str(Path.home())
    if home not in ("", "/"):
        text = text.replace(home + "/", "~/")
    return html.escape(text, quote=False)
