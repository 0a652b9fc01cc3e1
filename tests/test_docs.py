"""The docs site (docs/, mkdocs.yml) builds with ``mkdocs build --strict``; its CLI reference, generated from
``vftui.cli.build_parser()`` at build time, holds every flag of every command with argparse's own words; the
README stays a short front door that starts with the two commands; and a measured time is stated on the
performance page alone, so a figure is measured, dated and re-measured in one place."""

from __future__ import annotations

import argparse
import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, unavailable
from vftui.cli import build_parser
from vftui.run_controls import FORCED_STOP_S

DOCS = REPO / "docs"
README = REPO / "README.md"
TWO_COMMANDS = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
    "vftui run --mode sft --steps 200 --sim-latency 0.5",
    # CI (.ci/run) runs this one verbatim
    'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest',
]

# A measured figure as the pages wrote them: milliseconds, minutes, CPU-seconds, seconds with a fraction
# or as a range, throughput, terminal bytes, RSS, ratios and percentiles. A setting or a bound said in
# whole seconds ("within 2 s", "--score-timeout (120 s)") is not one, nor is anything in code.
MEASURED = re.compile(
    r"\d+(?:\.\d+)?\s?(?:[-–]\s?\d+(?:\.\d+)?\s?)?(?:ms|min|CPU-s)\b"
    r"|\d+\.\d+(?:\s?[-–]\s?\d+(?:\.\d+)?)?\s?s\b"
    r"|\d+\s?[-–]\s?\d+\s?s\b"
    r"|\d+(?:\.\d+)?\s?(?:groups|examples|requests)/s\b"
    r"|\d+(?:\.\d+)?\s?KB/s"
    r"|\bRSS\s\+?\d"
    r"|\d+\.\d+\s?×"
    r"|\bp(?:50|95|99)\s\d"
)
# what the pages may say in those forms because it is a setting of the code, not a measurement
NOT_MEASURED = {
    f"{FORCED_STOP_S:g} s": "the forced stop's delay (run_controls.FORCED_STOP_S)",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    for module, package in (("mkdocs", "mkdocs"), ("material", "mkdocs-material")):
        if importlib.util.find_spec(module) is None:
            unavailable(f"{package} is not installed (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # its notice about MkDocs 2.0
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_the_site_builds_strict_with_every_page(site):
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")}
    for page in pages | {"cli"}:
        built = site / (page.removesuffix("index")) / "index.html"
        assert built.is_file(), f"{page}.md was not built ({built})"


def commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield "vftui", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"vftui {name}", sub


def shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments ``--help`` shows, less -h/--help itself."""
    return [
        action
        for action in parser._actions
        if action.help is not argparse.SUPPRESS
        and not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def sections(page: str) -> dict[str, str]:
    """The CLI page's HTML by command: from its heading to the next."""
    found = list(re.finditer(r'<h2 id="([^"]+)"', page))
    return {
        match.group(1): page[match.start() : following.start() if following else len(page)]
        for match, following in zip(found, [*found[1:], None], strict=True)
    }


def _words(text: str) -> str:
    return " ".join(text.split())


def _without_folders(text: str) -> str:
    """``text`` with vftui's folders (the config file, the runs folder) as one word: the page names those a
    user gets (``~/...``), this process those its environment chose."""
    return re.sub(r"[~/][^\s;,()]*/vftui\b[^\s;,()]*", "FOLDER", _words(text))


def test_the_cli_reference_holds_every_flag_of_every_command_in_its_own_words(site):
    page = (site / "cli" / "index.html").read_text()
    by_command = sections(page)
    flags = 0
    for title, parser in commands(build_parser(with_run_flags=True)):
        anchor = title.replace(" ", "-")
        assert anchor in by_command, f"no section for {title} in the CLI reference"
        section = _words(by_command[anchor])
        formatter = parser._get_formatter()
        for action in shown(parser):
            for flag in action.option_strings:
                if flag.startswith("--"):
                    flags += 1
                    assert f"<code>{flag}" in section or f", {flag}" in section, (
                        f"{title} {flag} is missing from the CLI reference"
                    )
            words = html.escape(formatter._expand_help(action), quote=False)
            assert _without_folders(words) in _without_folders(section), (
                f"{title} {action.option_strings or action.dest}: its help is not on the page as argparse says it"
            )
    assert flags > 50, (
        "the parser gave next to no flags: is build_parser(with_run_flags=True) used?"
    )
    assert "%%" not in page and "%(" not in page, (
        "a help string's % was not resolved as argparse does"
    )


def test_the_readme_is_a_short_front_door_that_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    assert lines[0] == "# vftui"
    start = lines.index("```bash")
    assert all(not line.strip() for line in lines[1:start]), (
        "the commands come first, under the title"
    )
    assert lines[start + 1 : start + 4] == [*TWO_COMMANDS, "```"]
    assert TWO_COMMANDS[1] in (REPO / ".ci" / "run").read_text(), (
        "CI runs the README's test command"
    )


def test_the_readmes_links_into_the_docs_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" not in target:
            assert (REPO / target).exists(), f"README.md links to {target}, which is not there"


def prose(markdown: str) -> str:
    """The text a reader reads as sentences: fenced code blocks and inline code taken out (commands,
    flags and examples of output are not figures a page states)."""
    markdown = re.sub(r"^(```|~~~).*?^\1", "", markdown, flags=re.M | re.S)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", markdown, flags=re.S)


def test_only_the_performance_page_states_measured_times():
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    found = []
    for path in pages:
        if path == DOCS / "performance.md":
            continue
        for match in MEASURED.finditer(prose(path.read_text())):
            if match.group(0) not in NOT_MEASURED:
                found.append(f"{path.relative_to(REPO)}: {match.group(0)!r}")
    assert not found, (
        "measured figures belong in docs/performance.md (with their date, load, versions and bench), "
        "and other pages link there:\n" + "\n".join(found)
    )


def test_the_performance_page_still_holds_figures():
    """The check above passes on pages with no figure at all: the figures moved, they were not lost."""
    text = (DOCS / "performance.md").read_text()
    assert len(MEASURED.findall(prose(text))) > 50
    for bench in sorted((REPO / "bench").glob("[!_]*.py")):
        assert f"bench/{bench.name}" in text, f"bench/{bench.name} is not on the performance page"
