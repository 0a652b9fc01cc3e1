"""Text from the files made inert in an HTML page: shown, never parsed as markup.

A model's answer, a tool's output, a path or an item key can hold ``<script>``, ``</textarea>``, a
quote that ends an attribute, or a ``javascript:`` link. The report renders no Markdown and makes no
link from what it shows, so escaping is the whole defence, and the page's Content-Security-Policy (no
script but its own, no fetch) is a second one. Control characters and the bidirectional overrides are
shown as signs, as in a terminal (``printable``); a lone surrogate, which no UTF-8 file can hold, is
the replacement character.
"""

from __future__ import annotations

import html
import re

from vftui.text.printable import printable

SURROGATES = re.compile("[\ud800-\udfff]")


def escaped(value: object) -> str:
    """``value`` as text that is safe between tags and inside a double- or single-quoted attribute."""
    text = SURROGATES.sub("\ufffd", str(value))
    return html.escape(printable(text), quote=True)
