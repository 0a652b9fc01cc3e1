"""Rebuild the small ChatML tokenizer shipped in ``vftui/sim/tokenizer``.

The embedded default must tokenize without downloading anything, so vftui ships a
byte-level BPE tokenizer (any text encodes) trained on the built-in environment's
vocabulary plus ordinary English, with a ChatML chat template (Hermes-style tool calls and
results when the conversation has tools) and no default system prompt. Run
``python -m vftui.sim.build_tokenizer`` after changing the corpus; the output is
deterministic and committed.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from vftui.sim.task import FIRST_TURN, LATER_TURN, NAMES, SYSTEM_PROMPT, TAG

TOKENIZER_DIR = Path(__file__).with_name("tokenizer")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# ChatML; with tools, Hermes-style (close to Qwen2.5's): the schemas in the system turn,
# each call as <tool_call> JSON in the assistant turn, each result in a tool turn. Calls are
# read in the OpenAI form (call.function.name) with arguments as objects, as real templates
# read them (a string is written as it is).
CHAT_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\n' -}}"
    "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\n\n' -}}{%- endif -%}"
    '{{- \'You may call these tools. For each call, write a JSON object with "name" and "arguments" '
    "inside <tool_call></tool_call> tags.\n<tools>\n' -}}"
    "{%- for tool in tools -%}{{- tool | tojson + '\n' -}}{%- endfor -%}"
    "{{- '</tools><|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if tools and loop.first and message['role'] == 'system' -%}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{{- '<|im_start|>assistant\n' + (message['content'] or '') -}}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set arguments = call['function']['arguments'] -%}"
    "{{- '<tool_call>\n{\"name\": ' + call['function']['name'] | tojson + ', \"arguments\": ' "
    "+ (arguments if arguments is string else arguments | tojson) + '}\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|im_start|>tool\n<tool_response>\n' + message['content'] + '\n</tool_response><|im_end|>\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
ENGLISH = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her "
    "would make like him into time has look two more write go see number no way could "
    "people my than first water been call who oil its now find long down day did get come "
    "made may part answer question list sort sorted names name please thank hello model "
    "assistant user system simulated response error sorry here again whole add"
)


def corpus() -> list[str]:
    """Text the BPE merges are learned from: the env's prompts and answers, and English."""
    lines = [SYSTEM_PROMPT, ENGLISH, ENGLISH.title()]
    for i in range(0, len(NAMES), 5):
        batch = NAMES[i : i + 5]
        lines.append(FIRST_TURN.format(names=", ".join(batch)))
        lines.append(LATER_TURN.format(names=", ".join(batch[:2])))
        lines.append(f"<{TAG}>\n" + "\n".join(sorted(batch)) + f"\n</{TAG}>")
    return lines * 3


def build(out_dir: Path = TOKENIZER_DIR, vocab_size: int = 1200) -> None:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        chat_template=CHAT_TEMPLATE,
        model_max_length=32768,
    )
    fast.save_pretrained(str(out_dir))


if __name__ == "__main__":
    build()
    print(f"wrote {TOKENIZER_DIR}")
