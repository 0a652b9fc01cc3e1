"""API keys never leave the process in text, whoever put them there.

An endpoint's error body can quote the request's ``Authorization`` header back; that
text then travels as an event to the stderr retry lines, the failure reason, ``--json``,
the dashboard and the summary. So every event a run emits (except the groups
themselves, whose messages are training data and stay exact) has its text scrubbed of
the run's key and of anything shaped like a bearer token or an ``sk-`` key, and so does
every error sentence the CLI prints. A password in a URL (``https://user:pass@host/v1``) is
hidden the same way wherever the URL is shown or saved; the requests use the real one.
"""

from __future__ import annotations

import re

from vftui.events import Event
from vftui.text.printable import with_texts

HIDDEN = "***"
TOKEN_SHAPES = re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{8,}")
URL_PASSWORD = re.compile(
    r"(?P<user>\b[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*):[^/?#\s]*@"
)  # to the last @


def scrub(text: str, secret: str = "") -> str:
    """``text`` without ``secret``, anything that looks like a key, or a URL's password.

    A ``secret`` shorter than 8 characters is a placeholder (``EMPTY`` on loopback), not a key.
    """
    if len(secret) >= 8:
        text = text.replace(secret, HIDDEN)
    return URL_PASSWORD.sub(rf"\g<user>:{HIDDEN}@", TOKEN_SHAPES.sub(HIDDEN, text))


def has_hidden_password(url: str) -> bool:
    """A URL as ``scrub`` saved it, its password hidden: no use for a request."""
    return f":{HIDDEN}@" in url


def scrub_event(event: Event, secret: str = "") -> Event:
    """The event with every text field (and every text key of a dict field) scrubbed."""
    return with_texts(event, lambda text: scrub(text, secret))
