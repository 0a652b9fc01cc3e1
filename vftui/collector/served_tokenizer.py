"""The tokenizer of the model a named endpoint serves, never a guess.

Tokens and masks made with another model's tokenizer are training data that is quietly wrong, so
without ``--tokenizer`` vftui takes the served model's own: what the server says it loaded (vLLM's
and SGLang's ``root``) when it names one, else the model's id (llama.cpp's servers list the GGUF
file they run). A name is taken as a file or folder only when it is an absolute path here (a
relative one is the server's, read against its own folder), and as a Hub name only in ``owner/name``
form that is no path here. Anything else is refused, naming ``--tokenizer``.
"""

from __future__ import annotations

import re
from pathlib import Path

from vftui.collector.gguf_tokenizer import is_gguf
from vftui.errors import UserError
from vftui.text.printable import shortened

HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name: a bare name would be a guess


def served_tokenizer(model: str, root: str | None, base_url: str) -> str:
    """``root`` when the server names one (it alone, whatever ``model`` is), else ``model``."""
    named = root if root else model
    if (usable := _usable(named)) is not None:
        return usable
    loaded = (
        f" (it reports it loaded {_shown(root)}, no folder, .gguf file or Hub name here)"
        if root
        else ""
    )
    raise UserError(
        f"cannot tell which tokenizer the model {_shown(model)} at {base_url} uses{loaded}: name it "
        "with --tokenizer (a Hugging Face name, a tokenizer folder, or the model's .gguf file)"
    )


def _usable(name: str) -> str | None:
    """``name`` as a tokenizer vftui can load for sure, or None."""
    path = Path(name)
    try:
        if path.is_absolute():
            return name if path.is_dir() or (path.is_file() and is_gguf(name)) else None
        here = path.exists() or path.is_symlink()
    except (OSError, ValueError):  # too long, a NUL, a folder it may not look in
        return None
    return name if HUB_NAME.fullmatch(name) and not here else None


def _shown(name: str) -> str:
    return repr(shortened(name))
