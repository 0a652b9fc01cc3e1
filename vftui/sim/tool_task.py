"""The alphabet-tools task: find the first name with tools, then say how long it is.

The model is given a few names and two tools. A right answer takes three model calls:
``compare_names`` on neighbouring pairs (parallel calls in one turn), ``count_letters``
on the winner once the comparisons are back, then ``<answer>Name, N</answer>``. Shared by
the built-in ToolEnv (``sim/envs/alphabet_tools.py``), the simulated model that plays it
(``reply`` below, used by the simulated endpoint; ``any_tool_reply`` for other tool
environments) and the tests.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from typing import Any

from vftui.sim.task import NAMES, sort_key

QUESTION = (
    "Which of these names comes first alphabetically, and how many letters does it have: {names}?"
)
SYSTEM_PROMPT = (
    "Use the tools to compare the names and count letters, then answer as "
    "<answer>Name, number of letters</answer> and nothing else."
)
QUESTION_RE = re.compile(
    r"Which of these names comes first alphabetically, and how many letters does it have: (.+)\?"
)
ANSWER_RE = re.compile(r"<answer>\s*([^,<]+?)\s*,\s*(\d+)\s*</answer>")


def compare_names(first: str, second: str) -> str:
    """Return whichever of two names comes first alphabetically.

    Args:
        first: a name
        second: another name
    """
    return min(first, second, key=sort_key)


def count_letters(name: str) -> int:
    """Return how many letters a name has.

    Args:
        name: the name to count
    """
    return sum(1 for ch in name if ch.isalpha())


TOOLS = (compare_names, count_letters)


def make_examples(
    num_examples: int, min_names: int, max_names: int, seed: int
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(num_examples):
        names = rng.sample(NAMES, k=rng.randint(min_names, max_names))
        first = min(names, key=sort_key)
        rows.append(
            {
                "question": QUESTION.format(names=", ".join(names)),
                "answer": f"{first}, {count_letters(first)}",
                "info": {"names": names},
            }
        )
    return rows


def score(text: str, answer: str) -> float:
    """1 for the right name and count, 0.5 for the right name only, else 0."""
    match = ANSWER_RE.search(text or "")
    if match is None:
        return 0.0
    name, count = answer.split(", ")
    if match.group(1).casefold() != name.casefold():
        return 0.0
    return 1.0 if int(match.group(2)) == int(count) else 0.5


def reply(
    messages: list[dict[str, Any]], temperature: float, rng: random.Random, difficulty: float
) -> tuple[str, list[dict[str, Any]]] | None:
    """The simulated model's next message, as (content, OpenAI tool calls); None: not this task.

    It works through the calls as a careful model would, and at higher temperatures it
    sometimes trusts the wrong comparison or miscounts.
    """
    question = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    found = QUESTION_RE.search(question)
    if found is None:
        return None
    names = [n.strip() for n in found.group(1).split(",") if n.strip()]
    assistant = [m for m in messages if m.get("role") == "assistant"]
    p = min(1.0, difficulty * temperature * 0.6)
    if not assistant:
        pairs = list(itertools.pairwise(names)) or [(names[0], names[0])]
        return "", [_call(rng, "compare_names", {"first": a, "second": b}) for a, b in pairs]
    # one rollout's mind is made up once: seeded by its first call's id, the same in every later turn
    mind = random.Random(str((assistant[0].get("tool_calls") or [{}])[0].get("id")))
    first = _guess_first(mind, names, p)
    if len(assistant) == 1:
        return "", [_call(rng, "count_letters", {"name": first})]
    letters = count_letters(first) + (mind.choice((-1, 1)) if mind.random() < p / 2 else 0)
    return f"<answer>{first}, {letters}</answer>", []


def _guess_first(rng: random.Random, names: list[str], p: float) -> str:
    """The first name, or with probability ``p`` a name picked at random."""
    return rng.choice(names) if rng.random() < p else min(names, key=sort_key)


SAMPLE_VALUES = {
    "integer": 1,
    "number": 1.5,
    "string": "a",
    "boolean": True,
    "array": [],
    "object": {},
}


def any_tool_reply(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], rng: random.Random
) -> tuple[str, list[dict[str, Any]]]:
    """For a tools task the simulation does not know: call the tools the prompt names (or the
    first one) once, with sample arguments of the right types, then say it is done.

    Enough for any tool environment to run offline end to end; the rewards mean nothing.
    """
    if any(m.get("role") == "tool" for m in messages):
        return "This is vftui's simulated model; it called the tools.", []
    asked = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    functions = [t.get("function", t) for t in tools]
    chosen = [f for f in functions if f.get("name") and f["name"] in asked] or functions[:1]
    calls = []
    for function in chosen:
        properties = (function.get("parameters") or {}).get("properties") or {}
        arguments = {k: SAMPLE_VALUES.get(v.get("type"), "a") for k, v in properties.items()}
        calls.append(_call(rng, function["name"], arguments))
    return "", calls


def _call(rng: random.Random, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call_id = "call_" + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12)
    )
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
