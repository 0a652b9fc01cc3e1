"""Turning a finished rollout into the token ids, masks (and logprobs) a trainer consumes.

sft renders the conversation with the chat template (atroposlib's ``tokenize_for_trainer``);
rl builds one sequence from what the inference server generated. Both go through
``ChatTemplateTokenizer``, which irons out what transformers 5 changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

from vftui.group_format import MASKED


class ChatTemplateTokenizer:
    """A tokenizer whose ``apply_chat_template`` returns token ids, as atroposlib expects.

    transformers 5 made ``apply_chat_template`` return a dict by default; atroposlib's
    ``tokenize_for_trainer`` then takes the dict's keys for tokens and silently produces
    two-element masks. ``with_tools`` binds the tool schemas a rollout's model was sent,
    so every rendering atroposlib asks for shows them as the model saw them. Everything
    else is delegated unchanged.
    """

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None) -> None:
        self._tokenizer = tokenizer
        self._tools = tools or None

    def with_tools(self, tools: list[dict[str, Any]] | None) -> ChatTemplateTokenizer:
        return ChatTemplateTokenizer(self._tokenizer, tools) if tools else self

    def apply_chat_template(self, conversation, **kwargs):
        kwargs.setdefault("return_dict", False)
        kwargs.setdefault("tokenize", True)
        if self._tools:
            kwargs.setdefault("tools", self._tools)
        return self._tokenizer.apply_chat_template(conversation, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


@dataclass(frozen=True)
class Tokenized:
    """A rollout as a trainer consumes it: ``masks`` hold -100 where it does not learn, ``logprobs``
    (rl) 1.0 there; ``stripped_end_of_turn`` says a truncated answer lost its template end."""

    tokens: list[int]
    masks: list[int]
    logprobs: list[float] | None = None
    stripped_end_of_turn: bool = False


def sft_tokens(
    tokenizer: ChatTemplateTokenizer,
    messages: list[dict[str, Any]],
    finish_reasons: Sequence[str | None],
) -> Tokenized:
    """tokenize_for_trainer with the reference's arguments, plus the truncation fix.

    ``finish_reasons`` are the model calls' in order, one for each of the last assistant
    messages (earlier ones came with the prompt). An answer cut off by ``max_tokens`` still
    gets the chat template's end-of-turn tokens after it; training on them would teach the
    model to stop mid-answer. So they are masked after every cut answer (a later turn's
    context held them), and dropped when the last call was cut (nothing followed them).
    """
    out = tokenize_for_trainer(
        tokenizer,
        messages,
        include_messages=True,
        train_on_all_assistant_turns=True,
        finish_reason=(finish_reasons[-1] if finish_reasons else None) or "",
    )
    tokens, masks = list(out["tokens"]), list(out["masks"])
    for start, end in cut_turn_ends(tokenizer, messages, finish_reasons):
        end = min(end, len(masks))
        masks[start:end] = [MASKED] * (end - start)
    stripped = False
    if finish_reasons and finish_reasons[-1] == "length":
        keep = end_of_turn_start(tokenizer, tokens)
        stripped = keep < len(tokens)
        tokens, masks = tokens[:keep], masks[:keep]
    return Tokenized(tokens, masks, stripped_end_of_turn=stripped)


def cut_turn_ends(
    tokenizer: Any, messages: list[dict[str, Any]], finish_reasons: Sequence[str | None]
) -> list[tuple[int, int]]:
    """The token spans of the end of turn the template writes after each answer cut at ``max_tokens``.

    Calls and assistant messages are paired from the end, so assistant messages of the prompt
    (few-shot examples) stay unpaired.
    """
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    spans = []
    for at, reason in zip(reversed(assistant_at), reversed(finish_reasons), strict=False):
        if reason == "length":
            rendered = tokenizer.apply_chat_template(messages[: at + 1])
            spans.append((end_of_turn_start(tokenizer, rendered), len(rendered)))
    return spans


PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "vftui_probe_tool",
            "description": "probe",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]
PROBE = [
    {"role": "user", "content": "probe"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [  # an id Mistral's templates accept: 9 alphanumerics
            {
                "id": "probe0001",
                "type": "function",
                "function": {"name": "vftui_probe_tool", "arguments": {"probe": "x7q"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "probe0001", "content": "probe result 42"},
]


def renders_tool_calls(tokenizer: Any) -> bool:
    """Whether the chat template writes a tool call's name and arguments, and its result.

    A template written for plain chat silently drops them, and the training data with it.
    """
    try:
        text = tokenizer.apply_chat_template(PROBE, tools=PROBE_TOOLS, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that cannot render tools is the answer, not an error
        return False
    written = all(part in text for part in ("vftui_probe_tool", "x7q", "probe result 42"))
    return written and '\\"x7q' not in text  # arguments written as JSON, not as an escaped string


def end_of_turn_start(tokenizer: Any, tokens: list[int]) -> int:
    """Index where the trailing end-of-turn run (special tokens, then whitespace) begins."""
    special = set(tokenizer.all_special_ids)
    i = len(tokens)
    while i > 0 and tokens[i - 1] not in special and not tokenizer.decode([tokens[i - 1]]).strip():
        i -= 1
    if i == 0 or tokens[i - 1] not in special:
        return len(tokens)
    while i > 0 and tokens[i - 1] in special:
        i -= 1
    return i


class TemplateMismatch(ValueError):
    """The chat template does not re-render earlier turns as they were generated."""


@dataclass(frozen=True)
class Turn:
    """One model call of a rollout, as the inference server returned it."""

    output_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None


def rl_tokens(
    tokenizer: ChatTemplateTokenizer, messages: list[dict[str, Any]], turns: list[Turn]
) -> Tokenized:
    """One rollout as one sequence equal to its final context.

    Walks the conversation turn by turn: the text the chat template adds before each
    generation (prompt, environment replies, turn markers) is tokenized and masked (-100,
    logprob 1.0); each generation appears once, as the server's own token ids with the
    logprobs it returned. Unlike concatenating every step's prompt ids, history is never
    repeated, and a generated end-of-turn token is not doubled by the template's own.
    """
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if len(assistant_at) != len(turns):
        raise TemplateMismatch(
            f"{len(turns)} model calls but {len(assistant_at)} assistant messages"
        )
    tokens: list[int] = []
    masks: list[int] = []
    logprobs: list[float] = []
    text = ""

    def add_context(rendered: str) -> str:
        if not rendered.startswith(text):
            raise TemplateMismatch(
                "the chat template renders earlier turns differently from how they were generated "
                "(as templates that drop earlier reasoning do)"
            )
        ids = (
            tokenizer.encode(rendered[len(text) :], add_special_tokens=False)
            if len(rendered) > len(text)
            else []
        )
        tokens.extend(ids)
        masks.extend([MASKED] * len(ids))
        logprobs.extend([1.0] * len(ids))
        return rendered

    for at, turn in zip(assistant_at, turns, strict=True):
        text = add_context(
            tokenizer.apply_chat_template(messages[:at], add_generation_prompt=True, tokenize=False)
        )
        tokens.extend(turn.output_ids)
        masks.extend(turn.output_ids)
        logprobs.extend(turn.logprobs)
        text += tokenizer.decode(turn.output_ids, skip_special_tokens=False)
    add_context(
        tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=False)
    )
    return Tokenized(tokens, masks, logprobs)
