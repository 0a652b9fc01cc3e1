"""Argument parsing only: build a RunConfig and hand it to a view."""

from __future__ import annotations

import argparse
import difflib
import errno
import math
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from vftui import __version__, cli_export, cli_training, paths
from vftui.collector.quiet import quiet_libraries
from vftui.defaults import SHARED_FLAGS
from vftui.errors import STOP_SIGNALS, RunFailed, UserError
from vftui.run_files.groupfile import ORDERS
from vftui.text.printable import one_line, shortened
from vftui.text.redact import scrub
from vftui.ui.terminal import end_with_parent, has_screen, in_browser

DESCRIPTION = """\
vftui runs the Atropos verifiers collector and shows what it produces.

With no --base-url, a run uses the embedded default: the built-in alphabet-sort
environment, a simulated OpenAI-compatible endpoint on loopback and a small
tokenizer shipped in the package. It is labelled SIMULATION everywhere.
"""

RUN_EPILOG = f"""\
settings come from flags, then VFTUI_<NAME> environment variables (VFTUI_GROUP_SIZE=4),
then the TOML config file (default {paths.default_config_file()}), then defaults.

exit codes: 0 completed, 1 the run failed, 2 bad input, 3 a --fail-on gate stopped it,
4 --stall-timeout passed, 130 stopped before the end.
Ctrl-C, q, SIGTERM and SIGHUP (a closed terminal) stop gracefully: the groups in flight
are finished and saved, for --score-timeout at most (a second one cancels them and ends
the run within 2 s, whatever its reward code does), the terminal is restored and the
summary printed. A run started with --detach is in a session of its own: no terminal
stops it; vftui attach opens a dashboard on it, vftui runs lists it.
examples:
  vftui run --mode sft --steps 20 --no-ui
  vftui run --mode eval --num-examples 100 --rollouts-per-example 8 --fail-on 'pass@1<0.6'
  vftui run --no-ui --fail-on 'identical>0.8,truncated>0.3,stall>300' --stall-timeout 600
  vftui run --env-args '{{"max_turns": 3}}' --out groups.jsonl
  vftui run --base-url https://api.openai.com/v1 --model gpt-4.1-mini \\
            --env owner/name --tokenizer Qwen/Qwen2.5-1.5B-Instruct
"""


RUN_HELP = "collect groups from a verifiers environment"


def _run_parser(sub: argparse._SubParsersAction) -> None:
    from vftui.config import RunConfig
    from vftui.config.fields import details, flag_of

    p = sub.add_parser(
        "run",
        help=RUN_HELP,
        description="Collect scored groups with the Atropos verifiers collector.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = {
        "rl": p.add_argument_group(
            "rl mode (Atropos serve: tokens and logprobs to the trajectory API)"
        ),
        "eval": p.add_argument_group(
            "eval mode (Atropos evaluate: the eval split, pass@k, vf-eval's files)"
        ),
    }
    for name, field in RunConfig.model_fields.items():
        flag = flag_of(name, field)
        if flag is None:
            continue
        extra = {k: v for k, v in details(field).items() if k != "flag"}
        where = groups.get(extra.pop("group", None), p)
        where.add_argument(
            flag, dest=name, default=None, help=_help(field), **_argparse_kind(field, extra)
        )
    p.add_argument(
        "--config",
        type=path_argument,
        metavar="FILE",
        help=f"TOML config file (default {paths.default_config_file()})",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="show every log record of the collector"
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="run in the background, headless, in a session of its "
        "own: it goes on when the terminal closes; prints how to attach (vftui attach) once it is ready. "
        "Without it, a run started from a terminal stops gracefully when that terminal goes",
    )


def _shared(parser: argparse.ArgumentParser, name: str) -> None:
    """A flag ``run`` takes too, with the same words and default (``defaults.SHARED_FLAGS``)."""
    parser.add_argument("--" + name.replace("_", "-"), dest=name, **SHARED_FLAGS[name].argparse)


def _help(field) -> str:
    """The field's words, and its default when they do not say it."""
    default = field.default
    if (
        default is None
        or default is False
        or default == {}
        or default == []
        or "default" in field.description
    ):
        return field.description
    return f"{field.description} (default {default})"


def named(text: str) -> str:
    """A path (or HOST:PATH) on the command line: an empty one names nothing (``Path("")`` is the current
    folder, which compare, report, view and --resume then searched)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names nothing")
    return text


def path_argument(text: str) -> Path:
    return Path(named(text))


def _argparse_kind(field, extra: dict) -> dict:
    """How argparse reads the flag: an action, or the field's type."""
    action = extra.pop("action", None)
    if action == "optional":
        return {"action": argparse.BooleanOptionalAction, **extra}
    if action in ("store_true", "append"):
        return {"action": action, **extra}
    kinds = [
        t
        for t in (getattr(field.annotation, "__args__", None) or (field.annotation,))
        if t is not type(None)
    ]
    kind = kinds[0] if kinds and kinds[0] in (int, float, Path) else str
    return {"type": path_argument if kind is Path else kind, **extra}


def _watch_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="follow a prime-rl run folder live, or a trajectory API's status (read only)",
        description="Given RUN_DIR, follow a prime-rl run live: its health and why, progress, stability, "
        "performance and inference over steps, its logs' warnings and its token exports. Else attach to an "
        "Atropos trajectory API and show whether a trainer is registered, its step and the queue. Read "
        "only: nothing is registered, sent or written.",
    )
    cli_training.add_watch_flags(p)
    _shared(p, "api_url")
    p.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help="poll interval (default 2 for an API, 0.5 for a RUN_DIR: a new step shows within a second)",
    )
    p.add_argument(
        "--no-ui", action="store_true", help="print a status line per poll instead of the app"
    )
    p.add_argument(
        "--count",
        type=int,
        help="with --no-ui, stop after this many polls (default: until interrupted)",
    )
    _shared(p, "theme")


def _sim_trainer_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim-trainer",
        help="a simulated trainer: registers with a trajectory API and pulls batches (no model)",
        description="Register with an Atropos trajectory API as a trainer and pull batches, printing a line "
        "per batch, so an rl run can make progress without a GPU. Nothing is trained.",
    )
    _shared(p, "api_url")
    p.add_argument(
        "--batch-size",
        type=int,
        default=8,
        help="sequences per batch; a multiple of the group size (default 8)",
    )
    p.add_argument(
        "--batches", type=int, help="stop after this many batches (default: run until interrupted)"
    )


def _sim_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim-server",
        help="serve the simulated OpenAI-compatible endpoint on its own",
        description="Serve vftui's simulated endpoint (a seeded noisy alphabet-sort policy, not a real model) "
        "so other tools can point at it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8001, help="port (default 8001)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noisy policy (default 0)")
    p.add_argument(
        "--latency-ms",
        type=_at_most(3_600_000),
        default=0.0,
        help="added delay per request, up to an hour (default 0)",
    )
    p.add_argument(
        "--rate-limit",
        type=_at_most(1e6),
        default=0.0,
        metavar="R",
        help="answer at most R requests a second, like a hosted API: beyond it, 429 with Retry-After "
        "(default 0: no limit)",
    )
    p.add_argument(
        "--think-words",
        type=int,
        default=0,
        metavar="N",
        help="start each answer with N words of thinking, for rollouts as long as a reasoning model's "
        "(default 0)",
    )
    p.add_argument(
        "--max-running",
        type=int,
        default=0,
        metavar="N",
        help="run at most N requests at once, the rest wait, as in a full vLLM batch; /metrics shows "
        "both (default 0: no limit)",
    )


def _view_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="open saved groups (a run, an eval, a dump, Atropos output, vf-eval results) in the dashboard",
        description="Browse a groups jsonl in the dashboard's panels; press / to filter groups. "
        "Malformed lines are reported with their line numbers and skipped.",
    )
    p.add_argument(
        "file",
        type=named,
        help="a groups .jsonl, a run or eval folder, vf-eval's results.jsonl or its "
        "folder (shown one group an example), a verifiers v1 eval or prime-rl run folder, or a "
        "folder of one run's shards (--shard runs beside each other, or a folder each), shown as "
        "one run; HOST:PATH opens one on another machine through ssh -t (the vftui there reads it)",
    )
    p.add_argument(
        "--tokenizer",
        help="tokenizer to decode the token preview (default: the run's, if recorded)",
    )
    _shared(p, "theme")
    _shared(p, "identical_alert")
    p.add_argument(
        "--order",
        choices=sorted(ORDERS),
        default="file",
        help="group order: as written, which is the order groups finished when several were in flight "
        "(file, default), by dataset item (item) or by start time (time)",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep reading the lines another process appends to the file (a run elsewhere, a shared "
        "file system) until you quit; a file that shrinks or is replaced is read again from the start",
    )
    _remote_vftui(p)


def _attach_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attach",
        help="open the dashboard on a running run (headless, detached or another terminal's), every key included",
        description="Attach a dashboard to a run that is running: pause, temperature, dump and quit work as in "
        "the dashboard that starts a run. Quitting asks whether to stop the run or leave it running; a "
        "dropped terminal leaves it running. Several dashboards may attach at once. Only the run's owner "
        "can attach (its control socket is the owner's alone).",
    )
    p.add_argument(
        "run",
        nargs="?",
        type=named,
        help="the run's folder, its .jsonl or its id (default: the newest running run); "
        "HOST:RUN attaches to a run on another machine through ssh -t (as vftui runs --host lists it)",
    )
    _shared(p, "theme")
    _remote_vftui(p)


def _remote_vftui(parser: argparse.ArgumentParser) -> None:
    from vftui.commands.fleet import REMOTE_VFTUI

    parser.add_argument(
        "--remote-vftui",
        default=REMOTE_VFTUI,
        metavar="CMD",
        help=f"the command that runs vftui on other machines (default {REMOTE_VFTUI}; e.g. "
        "~/venv/bin/vftui)",
    )


def _runs_parser(sub: argparse._SubParsersAction) -> None:
    from vftui.run_files.folder_runs import MAX_DEPTH, MAX_ENTRIES, READ_WHOLE_BYTES

    p = sub.add_parser(
        "runs",
        help="list your runs, running or not: id, state, start, duration, env, mode, model, groups, reward, path",
        description="List every run you started (wherever its --out is), newest first: its short id (every "
        "command takes it in place of the run's path: vftui attach ID, view ID, compare ID ID, run --resume ID), "
        "state (running, paused, finished, stopped, failed, or interrupted when it was killed), start, duration, "
        "env, mode, model, groups, rate, mean reward and jsonl.",
    )
    p.add_argument(
        "folder",
        nargs="?",
        metavar="FOLDER",
        help="list the runs found under FOLDER instead, whatever wrote them (a KIND column): vftui's, "
        "verifiers v1 eval folders (traces.jsonl), prime-rl output folders (rollouts/), vf-eval results "
        f"folders; up to {MAX_DEPTH} folders down and {MAX_ENTRIES:,} entries, never through a link or "
        "into hidden folders; figures its small files do not tell are - (a run's rollouts are read only "
        f"up to {READ_WHOLE_BYTES // 1024**2} MB). A table or --json, never the runs screen",
    )
    p.add_argument("--json", action="store_true", help="one JSON object a run, a line each")
    p.add_argument(
        "--prune",
        action="store_true",
        help="forget every run kept elsewhere that is not running (its "
        "files stay), and delete the runs in the default runs folder that collected nothing: their own "
        "files, and a folder vftui made for one once nothing else is in it",
    )
    p.add_argument(
        "--host",
        metavar="H1,H2",
        help="list the runs on these machines instead, through ssh (each "
        "one's vftui runs --json [FOLDER]: FOLDER is then a folder there, ~/ its home; ~/.ssh/config "
        "applies, $VFTUI_SSH replaces the ssh command), with the host as a column; a host that fails is "
        "one line on stderr and the exit code is 1",
    )
    _remote_vftui(p)
    _screen_or_table(p, "the runs screen")


def _screen_or_table(parser: argparse.ArgumentParser, screen: str) -> None:
    """A command that opens ``screen`` in a terminal and prints a table elsewhere: --no-ui and --theme."""
    parser.add_argument(
        "--no-ui",
        action="store_true",
        help=f"print the table instead of opening {screen} (the "
        "default when stdout is not a terminal)",
    )
    _shared(parser, "theme")


def _compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="set runs, evals, dumps and vf-eval outputs of one environment side by side",
        description="Compare the rollouts of one environment saved by several runs: per source the mean reward, "
        "pass@1 and each reward function's mean with 95% intervals over items, truncation, the identical-score "
        "rate, completion length, a reward histogram and how it was made (model, temperature, env args, "
        "split, versions); each later source against the first (A), paired by item where both have it, with "
        "the items that dropped most and those that gained most.",
        epilog="exit codes: 0 compared, 2 bad input, 3 --fail-if-worse: a source is worse than A beyond the "
        "interval.\nexample: vftui compare runs/base/eval.eval runs/step-200/eval.eval --fail-if-worse 0.02"
        "\n         vftui compare gpu-1:~/outputs/base/ab12 gpu-2:~/outputs/step-200/cd34",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "sources",
        type=named,
        nargs="+",
        metavar="SOURCE",
        help="a run folder or its .jsonl (or its id), an eval folder (NAME.eval), a dump, Atropos "
        "output, a vf-eval output folder or results.jsonl, a verifiers v1 eval or prime-rl run folder, "
        "or a folder of one run's shards (--shard), read as one run; HOST:PATH is one on another "
        "machine, read by the vftui there through ssh: every source on one host, the compare screen "
        "runs there (through ssh -t); for a table or JSON, or sources on several hosts, each remote "
        "one is brought here and compared with the rest",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    # what the fleet asks a host for a source of its: a wire form between vftuis, not for people (--json is)
    p.add_argument("--export-source", action="store_true", help=argparse.SUPPRESS)
    _remote_vftui(p)
    _screen_or_table(p, "the compare view")
    p.add_argument(
        "--fail-if-worse",
        type=float,
        metavar="D",
        help="exit 3 when a source's mean reward is below A's by more than D, beyond the 95%% interval "
        "of the change: the items' paired bootstrap (or t, where wider) over items of the same id and "
        "prompt (a gate for CI; refused under 6 such items, or where they do not pair); each of A's "
        "items the source failed to score, lacks, or holds with another prompt counts as a failure; "
        "its verdict, and the test, on stderr, passed or failed",
    )
    _pass_threshold(p)


def _pass_threshold(parser: argparse.ArgumentParser) -> None:
    """compare's and report's threshold of a passing rollout, with the same words and default."""
    from vftui.defaults import PASS_THRESHOLD

    parser.add_argument(
        "--pass-threshold",
        type=float,
        metavar="R",
        help="a rollout passes (pass@1) at reward >= R (default: the one each eval recorded, else "
        f"{PASS_THRESHOLD:g}, vf-eval's)",
    )


def _report_parser(sub: argparse._SubParsersAction) -> None:
    from vftui.report.page import MAX_ROLLOUTS

    p = sub.add_parser(
        "report",
        help="write a run, an eval, a shard folder or a comparison as one HTML file to send",
        description="Write one self-contained HTML file (it opens from disk and fetches nothing): the "
        "figures with their 95% intervals, the reward over groups and its histogram, a per-item table "
        "to sort and filter, and every rollout (messages, tool calls, each function's score, the "
        "trained and masked tokens); with two sources or more, each later one against the first "
        "(paired) first, as vftui compare says it. Beyond --max-rollouts a sample of items is shown, "
        "and the page says so.",
        epilog="exit codes: 0 written, 2 bad input.\nexample: vftui report runs/base/eval.eval "
        "runs/step-200/eval.eval -o step-200.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "sources",
        type=path_argument,
        nargs="+",
        metavar="SOURCE",
        help="what compare reads: a run folder or its .jsonl (or its id), an eval folder, a dump, "
        "Atropos output, a vf-eval output folder or results.jsonl, a verifiers v1 eval or prime-rl "
        "run folder, a folder of one run's shards; two or more: a comparison against the first",
    )
    p.add_argument(
        "-o",
        "--out",
        type=path_argument,
        default=Path("report.html"),
        metavar="FILE",
        help="the HTML file to write (default report.html); one that exists is replaced only if it is an HTML page",
    )
    _pass_threshold(p)
    p.add_argument(
        "--max-rollouts",
        type=int,
        default=MAX_ROLLOUTS,
        metavar="N",
        help=f"show the rollouts of at most N (default {MAX_ROLLOUTS}); beyond, a seeded sample "
        "of items, the ones that flipped or moved most first; the figures count them all",
    )


def _at_most(high: float) -> Callable[[str], float]:
    """A finite number from 0 to ``high`` (argparse says so for anything else): a nan latency hung every
    request of the simulated endpoint."""

    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to {high:g}")
        return value

    return number


def _port(text: str) -> int:
    """A TCP port, 1-65535 (argparse says so for anything else)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return port


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="the dashboard, the runs screen, a view or a comparison in a browser tab",
        description="Serve a screen to a web browser (textual-serve): each tab runs its own. No "
        "TARGET: the runs screen. A running run: its dashboard, every key included (closing the tab "
        "leaves the run running). A run that ended, a file or a folder: vftui view. Several: vftui "
        "compare. A token is printed once at the start; the page asks for it once per browser and "
        "keeps it in a cookie, never in a URL.",
        epilog="exit codes: 0 stopped by Ctrl-C, 130 by a second one while it stops, 2 bad input."
        "\nexample, over ssh: ssh -L "
        "8000:127.0.0.1:8000 gpu-box vftui serve RUN-ID, then open http://127.0.0.1:8000/ here",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "targets",
        type=path_argument,
        nargs="*",
        metavar="TARGET",
        help="a run folder or its .jsonl (or its id), any file or folder vftui view opens; two or "
        "more: compared",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only; ssh -L reaches it); a "
        "name is served and printed as one address it resolves to (IPv4 first)",
    )
    p.add_argument("--port", type=_port, default=8000, help="the port to listen on (default 8000)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="needed for a --host other machines reach: anyone with the token may steer the run",
    )
    _shared(p, "theme")


def build_parser(with_run_flags: bool = True) -> argparse.ArgumentParser:
    """The CLI; ``run``'s flags come from RunConfig, whose import other commands can do without."""
    parser = argparse.ArgumentParser(
        prog="vftui", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"vftui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if with_run_flags:
        _run_parser(sub)
    else:
        sub.add_parser("run", help=RUN_HELP)
    _view_parser(sub)
    _sim_parser(sub)
    _sim_trainer_parser(sub)
    _watch_parser(sub)
    _attach_parser(sub)
    _runs_parser(sub)
    _compare_parser(sub)
    _report_parser(sub)
    _serve_parser(sub)
    cli_training.add_parsers(sub)
    cli_export.add_parser(sub)
    sub.add_parser("eval", help="an eval is a run: vftui run --mode eval (this says so)")
    return parser


def _run(args: argparse.Namespace) -> int:
    quiet_libraries()
    from vftui.config import RunConfig, load_config

    flags = {name: getattr(args, name) for name in RunConfig.model_fields if hasattr(args, name)}
    if flags["resume"] is not None:
        flags["resume"] = by_id(flags["resume"])
    if flags["base_url"]:
        flags["base_url"], *more = flags["base_url"]
        flags["extra_base_urls"] = more or None
    config = load_config(flags, args.config)
    if args.detach:
        from vftui.commands.detach import run_detached

        return run_detached(args.run_args, config)
    if not config.no_ui:
        if has_screen() and not config.json_events:
            from vftui.commands.dashboard import run_dashboard

            return run_dashboard(config)
        reason = (
            "--json was given"
            if config.json_events and sys.stdout.isatty()
            else "stdout is not a terminal"
        )
        print(f"vftui: {reason}; running headless (--no-ui)", file=sys.stderr)
    from vftui.commands.headless import run_headless

    return run_headless(config, verbose=args.verbose)


def by_id(path: Path) -> Path:
    """``path``, or the run whose short id (``vftui runs``' first column) it is, when no such file exists;
    an id that names no run, or several, is said as such (it read 'no such file or folder')."""
    try:
        if path.exists() or path.is_symlink():
            return path
    except OSError as e:  # a name too long for the file system, a folder it may not look in
        raise UserError(f"{shortened(str(path))}: {e.strerror}") from None
    from vftui.run_files.index import looks_like_id, runs_with_id

    text = str(path)
    if re.fullmatch(r"[0-9a-fA-F]{1,3}", text):
        raise UserError(
            f"{text}: no such file or folder; a run id takes at least 4 of its characters "
            "(vftui runs lists the ids)"
        )
    if not looks_like_id(text):
        return path
    found = runs_with_id(text)
    if len(found) == 1:
        return found[0]
    if found:
        raise UserError(
            f"{text}: {len(found)} runs have ids that start with it; give more of the id "
            "(vftui runs lists them)"
        )
    raise UserError(
        f"{text}: no such file or folder, and no run has that id (vftui runs lists the ids)"
    )


def _view(args: argparse.Namespace) -> int:
    from vftui.commands import fleet

    if (there := fleet.remote_run(args.file)) is not None:
        host, path = there
        flags = [  # a word each: a value that starts with "-" stays the flag's value there
            *([f"--tokenizer={args.tokenizer}"] if args.tokenizer else []),
            *([f"--theme={args.theme}"] if args.theme else []),
            f"--identical-alert={args.identical_alert}",
            f"--order={args.order}",
            *(["--follow"] if args.follow else []),
        ]
        return _through_ssh(fleet.screen_command(host, args.remote_vftui, "view", [path], flags))
    quiet_libraries()
    from vftui.commands.view import run_viewer

    return run_viewer(
        by_id(Path(args.file)),
        args.tokenizer,
        args.theme,
        args.identical_alert,
        args.order,
        args.follow,
    )


SSH_FAILED = 255  # ssh's own exit code when it cannot reach the host or run the command there
NOT_FOUND = 127  # a shell's, for a command it cannot find


def _through_ssh(command: list[str]) -> int:
    """The terminal is ssh's until the screen at the other end ends; its exit code is ours."""
    try:
        return subprocess.run(command, check=False).returncode
    except OSError as e:
        raise UserError(f"cannot run {command[0]}: {e.strerror}") from e


def _attach(args: argparse.Namespace) -> int:
    from vftui.commands import fleet
    from vftui.commands.attach import run_attach

    if args.run is not None and (there := fleet.remote_run(args.run)) is not None:
        host, run = there
        themed = [f"--theme={args.theme}"] if args.theme else []
        return _through_ssh(fleet.screen_command(host, args.remote_vftui, "attach", [run], themed))
    return run_attach(by_id(Path(args.run)) if args.run is not None else None, args.theme)


def _runs(args: argparse.Namespace) -> int:
    from vftui.commands.runs import run_runs

    return run_runs(
        args.json or False,
        args.prune,
        args.theme,
        args.no_ui,
        args.host,
        args.remote_vftui,
        args.folder,
    )


def _compare(args: argparse.Namespace) -> int:
    from vftui.commands import fleet
    from vftui.commands.compare import export_source, load_sources, run_compare

    if args.fail_if_worse is not None and not 0 <= args.fail_if_worse < math.inf:
        raise UserError("--fail-if-worse must be a margin of 0 or more")
    if args.pass_threshold is not None and not math.isfinite(args.pass_threshold):
        raise UserError("--pass-threshold must be a finite number")
    if args.export_source:
        if len(args.sources) != 1:
            raise UserError("--export-source writes one source; name one")
        return export_source(by_id(Path(args.sources[0])))
    there = [fleet.remote_run(s) for s in args.sources]
    hosts = {t[0] for t in there if t is not None}
    screen = not (args.json or args.no_ui) and has_screen()
    if screen and len(hosts) == 1 and None not in there:  # all on one host: its screen, drawn here
        return _compared_there(args, hosts.pop(), [path for _, path in filter(None, there)])
    return run_compare(  # a table or JSON from another machine is read and checked here, as a source is
        load_sources(
            [by_id(Path(s)) if t is None else t for s, t in zip(args.sources, there, strict=True)],
            args.remote_vftui,
        ),
        args.json,
        args.fail_if_worse,
        args.pass_threshold,
        args.no_ui,
        args.theme,
    )


def _compared_there(args: argparse.Namespace, host: str, paths: list[str]) -> int:
    """``vftui compare``'s screen on ``host`` through ``ssh -t``, a flag a word; its exit code (0, 2, 3) is
    ours, ssh's own failure (255) and no vftui there (127) one line and 2."""
    from vftui.commands import fleet

    flags = [  # a word each: a value that starts with "-" stays the flag's value there
        *([f"--theme={args.theme}"] if args.theme else []),
        *([f"--fail-if-worse={args.fail_if_worse!r}"] if args.fail_if_worse is not None else []),
        *([f"--pass-threshold={args.pass_threshold!r}"] if args.pass_threshold is not None else []),
    ]
    code = _through_ssh(fleet.screen_command(host, args.remote_vftui, "compare", paths, flags))
    if code == SSH_FAILED:
        raise UserError(f"{host}: ssh could not run vftui compare there (exit {SSH_FAILED})")
    if code == NOT_FOUND:
        raise UserError(
            f"{host}: the shell there found no {one_line(args.remote_vftui)} to run "
            "(--remote-vftui names the command that runs vftui there)"
        )
    return code


def _serve(args: argparse.Namespace) -> int:
    from vftui.commands.serve import run_serve

    return run_serve(
        [by_id(t) for t in args.targets], args.host, args.port, args.allow_remote, args.theme
    )


def _report(args: argparse.Namespace) -> int:
    from vftui.commands.report import run_report

    if args.pass_threshold is not None and not math.isfinite(args.pass_threshold):
        raise UserError("--pass-threshold must be a finite number")
    if args.max_rollouts < 0:
        raise UserError("--max-rollouts must be 0 or more")
    return run_report(
        [by_id(s) for s in args.sources], args.out, args.pass_threshold, args.max_rollouts
    )


def _sim_server(args: argparse.Namespace) -> int:
    quiet_libraries()
    from vftui.sim.server import SimSettings, serve

    settings = SimSettings(
        args.seed, args.latency_ms / 1000, args.rate_limit, args.think_words, args.max_running
    )
    serve(args.host, args.port, settings)
    return 0


def _watch(args: argparse.Namespace) -> int:
    from vftui.commands.watch import run_watch

    if args.every is None:
        args.every = 2.0 if args.run_dir is None else 0.5
    if not 0.1 <= args.every <= 3600:  # below a tenth of a second a poll is a busy loop
        raise UserError("--every takes 0.1 to 3600 seconds")
    if args.count is not None and args.count < 1:
        raise UserError("--count must be at least 1")
    if args.run_dir is not None:
        from vftui.commands.training_watch import run_training_watch

        return run_training_watch(
            args.run_dir,
            args.every,
            args.no_ui,
            args.count,
            args.theme,
            args.inference_metrics,
            args.notify,
            args.with_runs,
        )
    if args.inference_metrics or args.notify or args.with_runs:
        raise UserError(
            "--inference-metrics, --notify and --with follow a prime-rl run: name its RUN_DIR"
        )
    return run_watch(args.api_url, args.every, args.no_ui, args.count, args.theme)


def _sim_trainer(args: argparse.Namespace) -> int:
    from vftui.sim.trainer import run_trainer

    if args.batch_size < 1:
        raise UserError("--batch-size must be at least 1")
    return run_trainer(
        args.api_url, args.batch_size, args.batches, say=lambda line: print(line, flush=True)
    )


def main(argv: list[str] | None = None) -> int:
    """The command ``argv`` names (None: this process's own command line). As the process's own command ends,
    the stop signals are ignored: a Ctrl-C while the interpreter exits made a finished run die of the signal
    (the exit restores Python's handlers, so only SIG_IGN holds). A caller in its own process gets its handlers
    back instead (SIG_IGN would pass on to every process it starts)."""
    found = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        return _command(sys.argv[1:] if argv is None else argv)
    finally:
        for sig, handler in found.items():
            if argv is None:
                signal.signal(sig, signal.SIG_IGN)
            elif handler is not None:
                signal.signal(sig, handler)


def _parsed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parse_args``, naming the flag meant where one is mistyped (Python 3.11's argparse does not)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        flags = _flags_of(parser, args.command)
        meant = [
            close[0]
            for given in unknown
            if given.startswith("--")
            and (close := difflib.get_close_matches(given.split("=")[0], flags, n=1, cutoff=0.8))
        ]
        hint = f" (did you mean {', '.join(meant)}?)" if meant else ""
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def _flags_of(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The long flags ``command`` takes (the top level's with no command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser = action.choices[command]
    return [flag for flag in parser._option_string_actions if flag.startswith("--")]


def _command(argv: list[str]) -> int:
    if in_browser():
        end_with_parent()
    if argv[:1] == ["eval"]:  # one way in, so flags and help live in one place
        print(
            f"vftui: an eval is a run: vftui run --mode eval {shlex.join(argv[1:])}".rstrip(),
            file=sys.stderr,
        )
        return 2
    parser = build_parser(with_run_flags=bool(argv) and argv[0] == "run")
    args = _parsed(parser, argv)
    args.run_args = argv[1:]  # --detach starts the run again, in the background, with them
    if args.command is None:
        parser.print_help()
        return 2
    try:
        commands = {
            "run": _run,
            "view": _view,
            "sim-server": _sim_server,
            "sim-trainer": _sim_trainer,
            "watch": _watch,
            "attach": _attach,
            "runs": _runs,
            "compare": _compare,
            "report": _report,
            "serve": _serve,
            "status": cli_training.status,
            "tokens": cli_training.tokens,
            "sim-prime-run": cli_training.sim_prime_run,
            "export": cli_export.run,
        }
        return commands[args.command](args)
    except UserError as e:
        return _said(f"vftui: error: {one_line(scrub(str(e)))}", e.exit_code)
    except RunFailed as e:
        return _said(f"vftui: run failed: {one_line(scrub(str(e)))}", e.exit_code)
    except KeyboardInterrupt:
        print("vftui: interrupted", file=sys.stderr)
        return 130
    except (
        BrokenPipeError
    ):  # the reader went away (``vftui runs --json | head``): as a killed writer would end
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # so the exit's flush fails nowhere
        return 128 + signal.SIGPIPE
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:  # a name given, too long to look up: any other is a bug
            raise
        shown = one_line(shortened(str(e.filename or "")))
        return _said(f"vftui: error: {shown}: a name too long for the file system", 2)


def _said(line: str, exit_code: int) -> int:
    """``line`` where its reader is: on stderr, or in a served tab (its session's stderr reaches nobody)."""
    if in_browser():
        from vftui.ui.said_app import SaidApp

        SaidApp(line).run()
    else:
        print(line, file=sys.stderr)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
