"""The run's ``groups.html``, as atroposlib's process mode renders it, minus the script risk.

atroposlib renders each message as Markdown, and Markdown passes raw HTML through, so a
model that writes ``<script>`` gets it run by whoever opens the page. Here each message's
role and text are HTML-escaped first and then handed to atroposlib's own renderer and
template, so the page looks the same and shows the markup as text. Markdown's own links and images
(``[x](javascript:...)``) are live only to http, https and mailto; any other is shown as text. The
jsonl is untouched.
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path
from typing import Any

from vftui.run_files import store
from vftui.run_files.files import RunFiles

logger = logging.getLogger(__name__)
NO_DATA = "<p>No groups were written.</p>"
LIVE_SCHEMES = ("http", "https", "mailto")
# what markdown makes of [text](url) and ![alt](url); the model's own markup was escaped before
LINK = re.compile(r"<a\b(?P<attributes>[^>]*)>(?P<text>.*?)</a>", re.DOTALL)
IMAGE = re.compile(r"<img\b(?P<attributes>[^>]*)>")
URL, ALT = re.compile(r'\b(?:href|src)="([^"]*)"'), re.compile(r'\balt="([^"]*)"')
# a browser drops these from a URL before it reads the scheme (java\tscript: is javascript:)
IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]")


def _escaped(messages: list[Any]) -> list[Any]:
    out = []
    for rollout in messages:
        if isinstance(rollout, list):
            out.append(
                [
                    {
                        "role": html.escape(str(m.get("role", ""))),
                        "content": html.escape(str(m.get("content") or "")),
                    }
                    for m in rollout
                    if isinstance(m, dict)
                ]
            )
        else:
            out.append(html.escape(str(rollout)))
    return out


def _live(url: str) -> bool:
    scheme, colon, _ = IGNORED_IN_URLS.sub("", html.unescape(url)).partition(":")
    return bool(colon) and scheme.lower() in LIVE_SCHEMES


def _inert_links(section: str) -> str:
    """Each link or image to anything but http, https or mailto as its text and its address, not a link."""

    def shown(match: re.Match[str]) -> str:
        url = URL.search(match["attributes"])
        if url is None or _live(url[1]):
            return match.group()
        text = match.groupdict().get("text") or (
            alt[1] if (alt := ALT.search(match["attributes"])) else ""
        )
        return f"{text} ({url[1]})"

    return IMAGE.sub(shown, LINK.sub(shown, section))


def write_page(files: RunFiles) -> Path | None:
    """Write the run's groups as its ``html`` page; None (and a warning) if it cannot be written."""
    from atroposlib.frontend import jsonl2html

    sections = []
    for entry in store.read_groups(files.jsonl):
        if isinstance(entry, store.BadLine):
            continue
        group = entry[1]
        safe = {"scores": group["scores"], "messages": _escaped(group.get("messages") or [])}
        if section := jsonl2html.create_html_for_group(safe, len(sections)):
            sections.append(_inert_links(section))
    template = Path(jsonl2html.TEMPLATE_FILE).read_text(encoding="utf-8")
    page = template.format(
        title=html.escape(f"Rendered Messages - {files.jsonl.name}"),
        groups_html="\n".join(sections) or NO_DATA,
    )
    path = files.html
    try:
        store.write_text_atomic(path, page)
    except store.WriteFailed as e:
        logger.warning("the groups were saved, but not their HTML view: %s", e)
        return None
    return path
