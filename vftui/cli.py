"""Argument parsing only: build a RunConfig and hand it to a view."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vftui import __version__, paths
from vftui.defaults import DEFAULT_API_URL
from vftui.errors import RunFailed, UserError
from vftui.groupfile import ORDERS
from vftui.printable import printable
from vftui.quiet import quiet_libraries
from vftui.redact import scrub

DESCRIPTION = """\
vftui runs the Atropos verifiers collector and shows what it produces.

With no --base-url, a run uses the embedded default: the built-in alphabet-sort
environment, a simulated OpenAI-compatible endpoint on loopback and a small
tokenizer shipped in the package. It is labelled SIMULATION everywhere.
"""

RUN_EPILOG = f"""\
settings come from flags, then VFTUI_<NAME> environment variables (VFTUI_GROUP_SIZE=4),
then the TOML config file (default {paths.default_config_file()}), then defaults.

exit codes: 0 completed, 1 the run failed, 2 bad input, 130 stopped before the end.
Ctrl-C, q, SIGTERM and SIGHUP stop gracefully: the groups in flight are finished and
saved (a second one cancels them), the terminal is restored and the summary printed.
examples:
  vftui run --mode sft --steps 20 --no-ui
  vftui run --env-args '{{"max_turns": 3}}' --out groups.jsonl
  vftui run --base-url https://api.openai.com/v1 --model gpt-4.1-mini \\
            --env owner/name --tokenizer Qwen/Qwen2.5-1.5B-Instruct
"""


def _run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="collect groups from a verifiers environment",
        description="Collect scored groups with the Atropos verifiers collector.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--mode", help="sft (alias process: any OpenAI-compatible API, groups saved as jsonl) "
                   "or rl (alias serve: token logprobs to the Atropos trajectory API); default sft")
    p.add_argument("--env", help="verifiers environment id, e.g. owner/name; default the built-in alphabet-sort")
    p.add_argument("--env-args", help="JSON object of arguments for the environment's load_environment, "
                   "e.g. '{\"max_turns\": 3}'")
    p.add_argument("--base-url", action="append", help="OpenAI-compatible endpoint (sft) or vLLM/SGLang server "
                   "(rl), e.g. http://127.0.0.1:9001/v1; repeat in rl mode to balance several servers; "
                   "default: the embedded simulation")
    p.add_argument("--model", help="model name sent to the endpoint; default the only model it lists")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key "
                   "(default OPENAI_API_KEY; optional for loopback endpoints)")
    p.add_argument("--tokenizer", help="Hugging Face tokenizer name or folder for tokens/masks; default the "
                   "shipped one for the simulation, Qwen/Qwen2.5-1.5B-Instruct otherwise")
    p.add_argument("--group-size", type=int, help="rollouts per group (default 8)")
    p.add_argument("--steps", type=int, help="groups to collect (default 1000)")
    p.add_argument("--max-tokens", type=int, help="max completion tokens per turn (default 2048)")
    p.add_argument("--temperature", type=float, help="sampling temperature in [0, 2] (default 1.0)")
    p.add_argument("--concurrency", type=int, metavar="N", help="requests in flight to the endpoint across all "
                   "groups (default 32): about N / group size groups are collected at once, fewer while the "
                   "endpoint rate-limits (429/503 with Retry-After); in rl mode atroposlib's worker limit "
                   "becomes N / group size groups")
    p.add_argument("--seed", type=int, help="seed of the simulated endpoint (default 0)")
    p.add_argument("--out", type=Path, help="jsonl file for the groups; default a new run folder under "
                   f"{paths.runs_dir()}; an existing file is never overwritten (a _1 suffix is added)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue a stopped run (its folder or .jsonl): "
                   "collects again the items that were in flight when it stopped, then carries on; only appends")
    p.add_argument("--wandb", action=argparse.BooleanOptionalAction, default=None,
                   help="log metrics to Weights & Biases (honours WANDB_MODE=offline); default off")
    p.add_argument("--wandb-project", help="wandb project (default vftui)")
    p.add_argument("--wandb-name", help="wandb run name prefix (atroposlib adds the date and an id)")
    p.add_argument("--timeout", type=int, help="seconds before one request is abandoned and retried (default 300)")
    p.add_argument("--max-response-mb", type=int, metavar="MB", help="largest answer body accepted from an sft "
                   "endpoint; a bigger one is a failed attempt, retried (default 64)")
    p.add_argument("--retries", type=int, help="failed attempts in a row before the run gives up (default 5); a "
                   "rate-limited request (429) waits as long as the endpoint asks, up to 2 minutes, without using them")
    p.add_argument("--window", type=int, help="recent groups kept in memory for views and dumps (default 256)")
    p.add_argument("--theme", help="dashboard theme: vftui-dark (default), vftui-light, vftui-contrast, a Textual "
                   "theme, or one of yours in the user themes folder")
    p.add_argument("--identical-alert", type=float, metavar="RATE", help="highlight the identical-score rate above "
                   "this fraction of groups (default 0.5)")
    rl = p.add_argument_group("rl mode (Atropos serve: tokens and logprobs to the trajectory API)")
    rl.add_argument("--server-type", choices=["vllm", "sglang"], help="inference server kind (default vllm)")
    rl.add_argument("--tool-parser", metavar="NAME", help="vLLM tool parser that reads tool calls out of the "
                    "generated text (e.g. hermes); needed for environments with tools, and vLLM's parsers installed")
    rl.add_argument("--api-url", help=f"Atropos trajectory API (default {DEFAULT_API_URL})")
    rl.add_argument("--start-api", action="store_true", default=None,
                    help="start atroposlib's run-api on --api-url's port if none answers there; stopped on exit")
    rl.add_argument("--batch-size", type=int, help="sequences per trainer batch (the registered trainer's wins)")
    rl.add_argument("--sim-trainer", action=argparse.BooleanOptionalAction, default=None,
                    help="start vftui's simulated trainer to pull batches (default: on with the embedded "
                    "default and --start-api)")
    p.add_argument("--no-ui", action="store_true", default=None, help="no dashboard: progress on stderr (CI)")
    p.add_argument("--json", dest="json_events", action="store_true", default=None,
                   help="with --no-ui, print every event as one JSON object per line on stdout")
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML config file "
                   f"(default {paths.default_config_file()})")
    p.add_argument("-v", "--verbose", action="store_true", help="show every log record of the collector")


def _watch_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="show a trajectory API's status live (a run started elsewhere; no collector)",
        description="Attach to an Atropos trajectory API and show, live, whether a trainer is registered, "
        "its step (batches pulled) and the queue. Read only: nothing is registered or sent.",
    )
    p.add_argument("--api-url", default=DEFAULT_API_URL, help=f"trajectory API (default {DEFAULT_API_URL})")
    p.add_argument("--every", type=float, default=2.0, metavar="SECONDS", help="poll interval (default 2)")
    p.add_argument("--no-ui", action="store_true", help="print a status line per poll instead of the app")
    p.add_argument("--count", type=int, help="with --no-ui, stop after this many polls (default: until interrupted)")
    p.add_argument("--theme", help="app theme (default vftui-dark)")


def _sim_trainer_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim-trainer",
        help="a simulated trainer: registers with a trajectory API and pulls batches (no model)",
        description="Register with an Atropos trajectory API as a trainer and pull batches, printing a line "
        "per batch, so an rl run can make progress without a GPU. Nothing is trained.",
    )
    p.add_argument("--api-url", default=DEFAULT_API_URL, help=f"trajectory API (default {DEFAULT_API_URL})")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per batch; a multiple of the group size "
                   "(default 8)")
    p.add_argument("--batches", type=int, help="stop after this many batches (default: run until interrupted)")


def _sim_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim-server",
        help="serve the simulated OpenAI-compatible endpoint on its own",
        description="Serve vftui's simulated endpoint (a seeded noisy alphabet-sort policy, not a real model) "
        "so other tools can point at it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noisy policy (default 0)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="added delay per request (default 0)")
    p.add_argument(
        "--rate-limit",
        type=float,
        default=0.0,
        metavar="R",
        help="answer at most R requests a second, like a hosted API: beyond it, 429 with Retry-After "
        "(default 0: no limit)",
    )
    p.add_argument("--think-words", type=int, default=0, metavar="N",
                   help="start each answer with N words of thinking, for rollouts as long as a reasoning model's "
                   "(default 0)")


def _view_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="open a saved groups file (a run, a dump, Atropos process output) in the dashboard",
        description="Browse a groups jsonl in the dashboard's panels; press / to filter groups. "
        "Malformed lines are reported with their line numbers and skipped.",
    )
    p.add_argument("file", type=Path, help="the .jsonl file")
    p.add_argument("--tokenizer", help="tokenizer to decode the token preview (default: the run's, if recorded)")
    p.add_argument("--theme", help="dashboard theme (default vftui-dark)")
    p.add_argument("--identical-alert", type=float, default=0.5, metavar="RATE",
                   help="highlight the identical-score rate above this fraction (default 0.5)")
    p.add_argument("--order", choices=sorted(ORDERS), default="file",
                   help="group order: as written, which is the order groups finished when several were in flight "
                   "(file, default), by dataset item (item) or by start time (time)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vftui", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"vftui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run_parser(sub)
    _view_parser(sub)
    _sim_parser(sub)
    _sim_trainer_parser(sub)
    _watch_parser(sub)
    return parser


RUN_FIELDS = (
    "mode env env_args base_url model api_key_env tokenizer group_size steps max_tokens temperature "
    "concurrency seed out resume wandb wandb_project wandb_name timeout max_response_mb retries window theme identical_alert "
    "no_ui json_events server_type tool_parser api_url start_api batch_size sim_trainer"
).split()


def _run(args: argparse.Namespace) -> int:
    quiet_libraries()
    from vftui.collector.runner import saved_config
    from vftui.config import load_config

    flags = {name: getattr(args, name) for name in RUN_FIELDS}
    if flags["base_url"]:
        flags["base_url"], *more = flags["base_url"]
        flags["extra_base_urls"] = more or None
    resumed = None
    if args.resume is not None:
        resumed = saved_config(args.resume)
        resumed.pop("out", None)  # a resumed run appends to its own jsonl
    config = load_config(flags, args.config, resumed=resumed)
    if not config.no_ui:
        if sys.stdout.isatty() and sys.stdin.isatty() and not config.json_events:
            from vftui.dashboard import run_dashboard

            return run_dashboard(config)
        reason = "--json was given" if config.json_events and sys.stdout.isatty() else "stdout is not a terminal"
        print(f"vftui: {reason}; running headless (--no-ui)", file=sys.stderr)
    from vftui.headless import run_headless

    return run_headless(config, verbose=args.verbose)


def _view(args: argparse.Namespace) -> int:
    quiet_libraries()
    from vftui.viewer import run_viewer

    return run_viewer(args.file, args.tokenizer, args.theme, args.identical_alert, args.order)


def _sim_server(args: argparse.Namespace) -> int:
    quiet_libraries()
    from vftui.sim.server import SimSettings, serve

    settings = SimSettings(args.seed, args.latency_ms / 1000, args.rate_limit, args.think_words)
    serve(args.host, args.port, settings)
    return 0


def _watch(args: argparse.Namespace) -> int:
    from vftui.watcher import run_watch

    if args.every <= 0:
        raise UserError("--every must be a positive number of seconds")
    if args.count is not None and args.count < 1:
        raise UserError("--count must be at least 1")
    return run_watch(args.api_url, args.every, args.no_ui, args.count, args.theme)


def _sim_trainer(args: argparse.Namespace) -> int:
    from vftui.sim.trainer import run_trainer

    if args.batch_size < 1:
        raise UserError("--batch-size must be at least 1")
    return run_trainer(args.api_url, args.batch_size, args.batches, say=lambda line: print(line, flush=True))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        commands = {"run": _run, "view": _view, "sim-server": _sim_server, "sim-trainer": _sim_trainer,
                    "watch": _watch}
        return commands[args.command](args)
    except UserError as e:
        print(f"vftui: error: {printable(scrub(str(e)))}", file=sys.stderr)
        return e.exit_code
    except RunFailed as e:
        print(f"vftui: run failed: {printable(scrub(str(e)))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("vftui: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
