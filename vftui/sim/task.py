"""The alphabet-sort task itself: prompts, dataset rows and scoring, with no framework.

Shared by the built-in verifiers environment (``sim/envs/alphabet_sort.py``), the
simulated model that answers it (``sim/policy.py``) and the tests that recompute rewards
from a run's jsonl.
"""

from __future__ import annotations

import difflib
import random
import re
from typing import Any

TAG = "alphabetical_sorted"
SYSTEM_PROMPT = (
    "Sort names alphabetically. Answer with the sorted names, one per line, "
    f"inside <{TAG}> and </{TAG}> tags, and nothing else."
)
FIRST_TURN = "Sort these names alphabetically: {names}"
LATER_TURN = "Add these names and sort the whole list again: {names}"

NAMES = [
    "Aaliyah",
    "Abel",
    "Ada",
    "Adele",
    "Aiden",
    "Alba",
    "Alec",
    "Alma",
    "Amos",
    "Anya",
    "Arlo",
    "Astrid",
    "Axel",
    "Beatrix",
    "Bela",
    "Benno",
    "Bianca",
    "Blair",
    "Boris",
    "Bram",
    "Bruno",
    "Cai",
    "Calla",
    "Carmen",
    "Cecil",
    "Celeste",
    "Cleo",
    "Colm",
    "Cora",
    "Cyrus",
    "Dag",
    "Dalia",
    "Dante",
    "Dara",
    "Delia",
    "Dev",
    "Dina",
    "Dov",
    "Edda",
    "Edgar",
    "Eero",
    "Elio",
    "Elke",
    "Emil",
    "Enzo",
    "Esme",
    "Ezra",
    "Fabian",
    "Fay",
    "Felix",
    "Fern",
    "Finn",
    "Flora",
    "Frida",
    "Gaia",
    "Galen",
    "Gemma",
    "Gideon",
    "Greta",
    "Gus",
    "Hana",
    "Hugo",
    "Idris",
    "Ilse",
    "Ines",
    "Ingo",
    "Iris",
    "Ivo",
    "Jade",
    "Jana",
    "Jonas",
    "Juno",
    "Kai",
    "Kasia",
    "Kian",
    "Kira",
    "Lars",
    "Lea",
    "Leif",
    "Lina",
    "Luca",
    "Lyra",
    "Mads",
    "Maia",
    "Mara",
    "Milo",
    "Mira",
    "Nadia",
    "Nico",
    "Nils",
    "Nora",
    "Odin",
    "Olga",
    "Omar",
    "Oona",
    "Orla",
    "Otto",
    "Pia",
    "Pim",
    "Quinn",
    "Rafa",
    "Rhea",
    "Rory",
    "Runa",
    "Sami",
    "Sana",
    "Silas",
    "Siri",
    "Sven",
    "Tara",
    "Teo",
    "Thea",
    "Tomas",
    "Ula",
    "Uma",
    "Una",
    "Vera",
    "Vito",
    "Wren",
    "Yara",
    "Yuri",
    "Zane",
    "Zara",
    "Zeno",
    "Zoe",
]


def sort_key(name: str) -> str:
    """Case-insensitive order, so the expected answer does not depend on capitalisation."""
    return name.casefold()


EVAL_SEED_OFFSET = 1_000_003  # the eval split: examples of their own, drawn from another seed


def make_examples(
    num_examples: int, min_names: int, max_names: int, max_turns: int, seed: int
) -> list[dict[str, Any]]:
    """Deterministic dataset rows: one batch of new names per turn."""
    rng = random.Random(seed)
    rows = []
    for _ in range(num_examples):
        pool = rng.sample(NAMES, k=min(len(NAMES), max_names * max_turns))
        batches, start = [], 0
        for _turn in range(max_turns):
            size = rng.randint(min_names, max_names) if _turn == 0 else rng.randint(1, 2)
            batches.append(pool[start : start + size])
            start += size
        every_name = [name for batch in batches for name in batch]
        rows.append(
            {
                "question": FIRST_TURN.format(names=", ".join(batches[0])),
                "answer": "\n".join(sorted(every_name, key=sort_key)),
                "info": {"batches": batches},
            }
        )
    return rows


def expected_lists(batches: list[list[str]]) -> list[list[str]]:
    """The sorted list the model owes after each turn."""
    seen: list[str] = []
    expected = []
    for batch in batches:
        seen.extend(batch)
        expected.append(sorted(seen, key=sort_key))
    return expected


def parse_names(text: str) -> list[str] | None:
    """Names inside the answer tags, or None when there are no complete tags."""
    match = re.search(rf"<{TAG}>(.*?)</{TAG}>", text, flags=re.DOTALL)
    if match is None:
        return None
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


def score_turn(text: str, expected: list[str]) -> float:
    """1.0 for the exact list; partial credit by sequence similarity otherwise."""
    names = parse_names(text)
    if not names:
        return 0.0
    return round(difflib.SequenceMatcher(a=names, b=expected).ratio(), 4)


def assistant_texts(completion: list[Any]) -> list[str]:
    """The text of each assistant message (dicts or pydantic messages)."""
    texts = []
    for message in completion:
        role = message.get("role") if isinstance(message, dict) else message.role
        if role == "assistant":
            content = message.get("content") if isinstance(message, dict) else message.content
            texts.append(content or "")
    return texts


def sorted_correctly_score(completion: list[Any], batches: list[list[str]]) -> float:
    """Mean of per-turn scores over the turns the environment asked for."""
    expected = expected_lists(batches)
    texts = assistant_texts(completion)
    turn_scores = [
        score_turn(texts[i], expected[i]) if i < len(texts) else 0.0 for i in range(len(expected))
    ]
    return round(sum(turn_scores) / len(turn_scores), 4)


def format_ok_score(completion: list[Any]) -> float:
    """1.0 when every assistant turn is exactly one tagged block, one name per line."""
    texts = assistant_texts(completion)
    if not texts:
        return 0.0
    pattern = rf"\s*<{TAG}>\n(?:[^\n<>]+\n)+</{TAG}>\s*"
    return 1.0 if all(re.fullmatch(pattern, text) for text in texts) else 0.0
