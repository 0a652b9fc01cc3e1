"""The tokenizer of the model a named endpoint serves, never a guess.

Tokens and masks made with another model's tokenizer are training data that is quietly wrong, so
without ``--tokenizer`` vftui takes the served model's own: the path or Hub name the server says it
loaded (vLLM's and SGLang's ``root``), else the model's id (llama.cpp's servers list the GGUF file
they run; ``--model`` may be a Hub name or a folder). Anything else is refused, naming ``--tokenizer``.
"""

from __future__ import annotations

import re
from pathlib import Path

from vftui.collector.gguf_tokenizer import is_gguf
from vftui.errors import UserError

HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name: a bare name would be a guess


def served_tokenizer(model: str, root: str | None, base_url: str) -> str:
    """A folder or GGUF file on this machine first, then a Hub name; ``root`` before ``model``."""
    named = [name for name in dict.fromkeys((root, model)) if name]
    for name in named:
        # as the server says it, not expanded: a listed '~x' is no home folder here
        path = Path(name)
        if path.is_dir() or (path.is_file() and is_gguf(name)):
            return name
    for name in named:
        if HUB_NAME.fullmatch(name):
            return name
    loaded = (
        f" (loaded from {root}, not a folder or Hub name here)" if root and root != model else ""
    )
    raise UserError(
        f"cannot tell which tokenizer the model '{model}' at {base_url} uses{loaded}: name it with "
        "--tokenizer (a Hugging Face name, a tokenizer folder, or the model's .gguf file)"
    )
