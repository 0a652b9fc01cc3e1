"""``vftui sim-trainer``: the smallest trainer that makes an rl run progress (no model, no GPU).

It registers with the trajectory API, as a real trainer does, then pulls batches and
prints what it pulled. Without one, ``run-api`` keeps every env waiting for a trainer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from vftui import stats
from vftui.group_format import trained_tokens
from vftui.loopback import unproxied

REGISTRATION = {
    "wandb_group": "vftui-sim-trainer",
    "wandb_project": "vftui",
    "max_token_len": 32768,
    "checkpoint_dir": "",
    "save_checkpoint_interval": -1,
    "starting_step": 0,
    "num_steps": 1_000_000,
}


def summarize(batch: list[dict]) -> dict:
    """One line's worth of a batch: groups, sequences, tokens, trained tokens, mean score."""
    sequences = sum(len(g["tokens"]) for g in batch)
    scores = [s for g in batch for s in g["scores"]]
    return {
        "groups": len(batch),
        "sequences": sequences,
        "tokens": sum(len(t) for g in batch for t in g["tokens"]),
        "trained_tokens": sum(trained_tokens(m) for g in batch for m in g["masks"]),
        "mean_score": round(stats.mean(scores), 4),
    }


def run_trainer(
    api_url: str,
    batch_size: int,
    batches: int | None = None,
    poll_s: float = 0.2,
    say: Callable[[str], None] = print,
    on_batch: Callable[[list[dict]], None] | None = None,
) -> int:
    """Register, then pull batches until ``batches`` were pulled (forever when None)."""
    api_url = api_url.rstrip("/")
    with httpx.Client(timeout=30, **unproxied(api_url)) as client:
        register(client, api_url, batch_size, say)
        pulled = 0
        while batches is None or pulled < batches:
            try:
                answer = client.get(f"{api_url}/batch").json()
            except (httpx.HTTPError, ValueError) as e:
                say(f"sim-trainer: {type(e).__name__} pulling a batch; retrying")
                time.sleep(1.0)
                continue
            if answer.get("status") == "error":  # a restarted API has forgotten its trainer
                register(client, api_url, batch_size, say)
                continue
            batch = answer.get("batch")
            if not batch:
                time.sleep(poll_s)
                continue
            pulled += 1
            say(f"sim-trainer: batch {pulled}: {json.dumps(summarize(batch))}")
            if on_batch is not None:
                on_batch(batch)
    return 0


def register(
    client: httpx.Client, api_url: str, batch_size: int, say: Callable[[str], None]
) -> None:
    """Register as the trainer, retrying until the API answers."""
    while True:
        try:
            client.post(
                f"{api_url}/register", json={**REGISTRATION, "batch_size": batch_size}
            ).raise_for_status()
            break
        except httpx.HTTPError as e:
            say(
                f"sim-trainer: trajectory API not reachable at {api_url} ({type(e).__name__}); retrying"
            )
            time.sleep(1.0)
    say(
        f"sim-trainer (SIMULATION: no model is trained): registered with {api_url}, batch size {batch_size}"
    )
