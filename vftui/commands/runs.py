"""``vftui runs``: the runs as a table, JSON lines, or in a terminal the runs screen (``ui.runs_app``)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from vftui import paths
from vftui.commands import fleet
from vftui.defaults import SHARED_FLAGS
from vftui.errors import UserError
from vftui.run_files import folder_runs
from vftui.run_files import prune as pruning
from vftui.run_files.index import forget_missing
from vftui.run_files.listing import COLUMNS, RunLine, all_runs, cells
from vftui.text.printable import printable, say
from vftui.ui.terminal import has_screen, hung_up


def run_runs(
    as_json: bool = False,
    prune: bool = False,
    theme: str | None = None,
    no_ui: bool = False,
    hosts: str | None = None,
    remote: str = fleet.REMOTE_VFTUI,
    folder: str | None = None,
) -> int:
    """The runs as a table, JSON lines, or (in a terminal) the runs screen, whose keys open a run; with
    ``folder``, those found under it (a table or JSON lines only)."""
    if folder is not None and prune:
        raise UserError("--prune forgets and deletes vftui's own runs; it takes no FOLDER")
    if hosts is not None:
        return _fleet(fleet.hosts(hosts), remote, as_json, folder)
    if folder is not None:
        return _under(folder, as_json)
    if not (as_json or prune or no_ui) and has_screen():
        return _runs_screen(theme)
    skipped: list[str] = []
    gone = forget_missing() if prune else 0  # before the listing, which would note them
    lines = all_runs(skipped)
    if prune:
        pruned = [pruning.prune(r) for r in lines]
        forgotten, deleted = sum(p.forgotten for p in pruned), sum(p.deleted for p in pruned)
        say(
            f"pruned: {forgotten} runs kept elsewhere forgotten (their files stay), {gone} no longer there "
            f"forgotten, {deleted} empty runs deleted "
            f"(their own files, and a folder vftui made for one once empty); the runs under {paths.runs_dir()} "
            "that hold groups stay",
            sys.stderr,
        )
        skipped[:] = [p.note for p in pruned if p.note]
        lines = all_runs(skipped)
    for note in [*skipped, *(f"run {r.id}: {r.problem}" for r in lines if r.problem)]:
        say(f"vftui: note: {note}", sys.stderr)
    _print(lines, as_json)
    return 0


def _under(folder: str, as_json: bool) -> int:
    """The runs found under ``folder``, whatever wrote them, with their kind as a column."""
    root = Path(folder).expanduser()
    if not folder.strip():  # Path("") is the folder it runs in, which no one named
        raise UserError("vftui runs FOLDER: the folder named is empty; name the folder to look in")
    if not root.is_dir():
        what = (
            "is not a folder"
            if root.exists()
            else "a link that leads nowhere, or loops"
            if root.is_symlink()
            else "no such folder"
        )
        raise UserError(
            f"{printable(folder)}: {what}; vftui runs FOLDER lists the runs under a folder"
        )
    lines, notes = folder_runs.runs_under(root)
    _note(notes, lines)
    _print(lines, as_json, kinds=True, none=f"no runs found under {printable(folder)}")
    return 0


def _fleet(names: list[str], remote: str, as_json: bool, folder: str | None = None) -> int:
    """Each host's runs (or those under ``folder`` there) with the host as a column; a host that fails, or
    answers lines that are not runs, is one line on stderr (exit 1), the others are listed all the same."""
    answers = fleet.list_runs(names, remote, folder)
    for answer in answers:
        if answer.problem:
            say(f"vftui: {answer.host}: {printable(answer.problem)}", sys.stderr)
        _note(answer.notes, answer.runs, f"{answer.host}: ")
    lines = sorted(
        (run for answer in answers for run in answer.runs), key=lambda r: r.created, reverse=True
    )
    none = f"no runs found under {printable(folder)} there" if folder is not None else None
    if lines or not all(answer.problem for answer in answers):  # no host answered: nothing to list
        _print(lines, as_json, hosted=True, kinds=folder is not None, none=none)
    return 1 if any(answer.problem for answer in answers) else 0


def _note(notes: list[str], lines: list[RunLine], where: str = "") -> None:
    """On stderr, what a walk left out and each run its files could not describe (``say``: shown, never
    obeyed, a host's included)."""
    for note in [*notes, *(f"{r.out_path}: {r.problem}" for r in lines if r.problem)]:
        say(f"vftui: note: {where}{note}", sys.stderr)


def _print(
    lines: list[RunLine],
    as_json: bool,
    hosted: bool = False,
    kinds: bool = False,
    none: str | None = None,  # what to say of no runs
) -> None:
    if as_json:
        for r in lines:
            print(json.dumps(r.as_dict()))
        return
    if not lines:
        say(none or "no runs yet (vftui run starts one)", sys.stdout)
        return
    header = (*(("HOST",) if hosted else ()), *(("KIND",) if kinds else ()), *COLUMNS)
    rows = [
        header,
        *(
            ((r.host,) if hosted else ()) + ((r.kind or "-",) if kinds else ()) + cells(r)
            for r in lines
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        say(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1],
            sys.stdout,
        )


def _runs_screen(theme: str | None) -> int:
    """The runs screen, and the dashboard its keys open; quitting that dashboard comes back to the list
    (on the same run), as in k9s: only ``q`` on the list ends the command."""
    from vftui.ui import themes
    from vftui.ui.runs_app import RunsApp

    ours = themes.available_themes()
    chosen_theme = themes.resolve(theme, ours=ours)
    last: Path | None = None
    notice = ""
    while True:
        chosen = RunsApp(chosen_theme, ours, selected=last, notice=notice).run()
        if chosen is None:
            return 0
        how, last = chosen
        try:
            _open(how, last, theme)
            notice = ""
        except UserError as e:  # the run ended or went since the list was drawn: said on the list
            notice = str(e)
        if hung_up():  # the dashboard ended with its terminal: a list drawn now would spin on it
            return 128 + signal.SIGHUP


def _open(how: str, path: Path, theme: str | None) -> None:
    if how == "attach":
        from vftui.commands.attach import run_attach

        run_attach(path, theme)
        return
    from vftui.commands.view import run_viewer

    run_viewer(path, None, theme, SHARED_FLAGS["identical_alert"].default, "file")
