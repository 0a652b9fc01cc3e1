"""A vftui rl run's trained tokens, as ``vftui tokens`` reads prime-rl's token exports.

An Atropos rl run keeps, for each rollout of a group, its token ids, its masks (-100 where the trainer
does not learn) and the inference server's logprob of each token (``inference_logprobs``; 1.0 on the
prompt's tokens, which are masked). There is no trainer logprob to set against it, so the view is the
sampler's side alone: the least likely sampled tokens first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from vftui import bounds, safe_files
from vftui.bounds import LongLine
from vftui.run_files.groupfile import group_event
from vftui.training.token_exports import ExportedSequence, floats

MAX_LINE = 256 * 1024**2  # a group of long rollouts with their logprobs


def rollouts(path: Path, problems: list[str]) -> Iterator[ExportedSequence]:
    """Each rollout of the groups file ``path`` that has logprobs: ``rank`` its group's line, ``index`` its
    place in the group. A line that cannot be read, or a rollout whose lists differ in length, is a sentence
    in ``problems``; groups without logprobs (an sft run's) are counted in one."""
    without = 0
    with safe_files.open_to_read(path) as f:
        for number, line in enumerate(bounds.read_lines(f, MAX_LINE), start=1):
            if isinstance(line, LongLine):
                problems.append(f"line {number}: {bounds.too_long(line, MAX_LINE)}, left out")
                continue
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                group = group_event(number, raw) if isinstance(raw, dict) else None
            except (ValueError, TypeError, KeyError, RecursionError) as e:
                problems.append(f"line {number}: not a group ({type(e).__name__}), left out")
                continue
            if group is None:
                problems.append(f"line {number}: not a group, left out")
                continue
            if not group.logprobs:
                without += 1
                continue
            for r, (tokens, masks, logprobs) in enumerate(
                zip(group.tokens, group.masks, group.logprobs, strict=False)
            ):
                if not (len(tokens) == len(masks) == len(logprobs)):
                    problems.append(
                        f"line {number} rollout {r}: tokens, masks and logprobs differ in length"
                    )
                    continue
                yield ExportedSequence(
                    -1,
                    number,
                    r,
                    "",
                    [int(t) for t in tokens],
                    {
                        "loss_mask": np.array([m != -100 for m in masks], dtype=np.float64),
                        "inference_logprobs": floats(list(logprobs)),
                    },
                )
    if without:
        problems.append(f"{without} groups carry no logprobs (sft or eval groups): left out")
