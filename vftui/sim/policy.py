"""The simulated model: a seeded, noisy solver of the built-in alphabet-sort task (and of reverse-text).

Every item has a fixed difficulty (from a hash of its first question); the chance of
each kind of mistake grows with difficulty and with the sampling temperature. At
temperature 0 the answer is always right, so whole groups score the same; raising the
temperature visibly widens the spread of rewards. It also plays verifiers' canonical tiny
RL environment, reverse-text (reverse the user's text inside ``<reversed_text>`` tags), so
that environment's rewards mean something offline. Prompts it does not recognise get a
plain, labelled reply so other environments still run end to end.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from vftui.sim.task import TAG, sort_key

NAME_LISTS = re.compile(r"(?:Sort these names alphabetically|Add these names[^:]*):\s*(.+)")
REVERSE = "Reverse the text"  # reverse-text's system prompt


def stable_unit(text: str) -> float:
    """A number in [0, 1) fixed by ``text`` (unlike ``hash``, the same in every process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def requested_names(messages: list[dict[str, Any]]) -> list[str] | None:
    """Every name the user has asked to sort so far, or None if this is not the task."""
    names: list[str] = []
    found = False
    for message in messages:
        if message.get("role") != "user":
            continue
        for match in NAME_LISTS.finditer(str(message.get("content") or "")):
            found = True
            names.extend(n.strip() for n in match.group(1).split(",") if n.strip())
    return names if found else None


def difficulty(messages: list[dict[str, Any]]) -> float:
    first_user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    return stable_unit(first_user) ** 2


def answer(messages: list[dict[str, Any]], temperature: float, rng: random.Random) -> str:
    if any(m.get("role") == "system" and REVERSE in str(m.get("content")) for m in messages):
        return reversed_text(messages, temperature, rng)
    names = requested_names(messages)
    if names is None:
        return "This is vftui's simulated model; it only knows the alphabet-sort and reverse-text tasks."
    ordered = sorted(names, key=sort_key)
    p = min(1.0, difficulty(messages) * temperature * 0.6)
    if len(ordered) > 1 and rng.random() < p:
        i = rng.randrange(len(ordered) - 1)
        ordered[i], ordered[i + 1] = ordered[i + 1], ordered[i]
    if len(ordered) > 2 and rng.random() < p / 2:
        ordered.pop(rng.randrange(len(ordered)))
    if rng.random() < p / 3:
        return "Sorted: " + ", ".join(ordered)
    return f"<{TAG}>\n" + "\n".join(ordered) + f"\n</{TAG}>"


def reversed_text(messages: list[dict[str, Any]], temperature: float, rng: random.Random) -> str:
    """The last user text reversed, with a few neighbouring characters swapped as difficulty and temperature grow."""
    text = next(
        (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
    )
    chars = list(text[::-1])
    p = min(1.0, difficulty(messages) * temperature * 0.6)
    for _ in range(len(chars) // 8):
        if len(chars) > 1 and rng.random() < p:
            i = rng.randrange(len(chars) - 1)
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return f"<reversed_text>{''.join(chars)}</reversed_text>"
