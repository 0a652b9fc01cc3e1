"""Tool-calling environments: OpenAI-format messages, tools in the trained tokens, clean refusals."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from tests.conftest import read_jsonl, run_cli
from vftui.collector.envs.messages import openai_tools, plain_messages, template_messages
from vftui.collector.tokens import ChatTemplateTokenizer, sft_tokens
from vftui.sim import tool_task
from vftui.sim.server import TOKENIZER_DIR

TOKENIZER = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "count_letters",
            "description": "How many letters a name has.",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }
]


def verifiers_rollout() -> list:
    """A rollout as verifiers 0.3 hands it out: tool calls as JSON strings of its own flat form."""
    flat = json.dumps(
        {"id": "call_1", "name": "count_letters", "arguments": json.dumps({"name": "Ada"})}
    )
    return [
        {"role": "user", "content": "How long is Ada?"},
        {"role": "assistant", "content": None, "tool_calls": [flat]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"},
        {"role": "assistant", "content": "<answer>Ada, 3</answer>"},
    ]


@pytest.mark.unit
def test_messages_are_saved_in_the_openai_chat_format():
    messages = plain_messages(verifiers_rollout())
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "count_letters", "arguments": '{"name": "Ada"}'},
    }
    assert messages[1] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert messages[2] == {"role": "tool", "content": "3", "tool_call_id": "call_1"}
    assert "tool_calls" not in messages[3]
    defs = [
        {
            "name": "count_letters",
            "description": "d",
            "parameters": {"type": "object"},
            "strict": True,
        }
    ]
    assert openai_tools(defs) == [
        {
            "type": "function",
            "function": {
                "name": "count_letters",
                "description": "d",
                "parameters": {"type": "object"},
                "strict": True,
            },
        }
    ]


def plain_tokenizer(tmp_path, template: str):
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    tokenizer.chat_template = template
    tokenizer.save_pretrained(str(tmp_path))
    return tokenizer


# the tool-call and tool-result parts of a Qwen2.5-style template: arguments always through tojson
TOJSON_TEMPLATE = (
    "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\n' + (m['content'] or '') -}}"
    "{%- for c in m.get('tool_calls') or [] -%}<tool_call>{\"name\": {{ c.function.name | tojson }}, "
    "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{%- endfor -%}{{- '<|im_end|>\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


@pytest.mark.unit
def test_arguments_are_objects_for_the_template_so_tojson_templates_do_not_encode_them_twice(
    tmp_path,
):
    tokenizer = plain_tokenizer(tmp_path, TOJSON_TEMPLATE)
    from vftui.collector.tokens import renders_tool_calls

    assert renders_tool_calls(tokenizer)
    saved = plain_messages(verifiers_rollout())
    assert saved[1]["tool_calls"][0]["function"]["arguments"] == '{"name": "Ada"}', (
        "saved in the OpenAI form"
    )
    out = sft_tokens(
        ChatTemplateTokenizer(tokenizer).with_tools(TOOLS), template_messages(saved), ["stop"]
    )
    text = tokenizer.decode(out.tokens)
    assert '"arguments": {"name": "Ada"}' in text and '\\"name' not in text


@pytest.mark.unit
def test_tool_results_given_as_content_parts_are_joined_as_the_model_saw_them():
    parts = [{"type": "text", "text": "3 "}, {"type": "text", "text": "letters"}]
    messages = plain_messages([{"role": "tool", "tool_call_id": "c", "content": parts}])
    assert messages == [{"role": "tool", "content": "3 letters", "tool_call_id": "c"}]


@pytest.mark.unit
def test_the_flat_form_breaks_a_template_that_reads_openai_calls():
    """Why the conversion matters: real templates read call.function.name."""
    with pytest.raises(Exception, match="function"):
        TOKENIZER.apply_chat_template(verifiers_rollout(), tools=TOOLS, tokenize=False)


@pytest.mark.unit
def test_trained_tokens_show_the_tools_every_call_and_mask_the_results():
    messages = template_messages(plain_messages(verifiers_rollout()))
    tokenizer = ChatTemplateTokenizer(TOKENIZER).with_tools(TOOLS)
    out = sft_tokens(tokenizer, messages, ["stop"])
    assert TOKENIZER.decode(out.tokens) == TOKENIZER.apply_chat_template(
        messages, tools=TOOLS, tokenize=False
    )
    prompt = TOKENIZER.decode(
        out.tokens[: out.masks.index(next(m for m in out.masks if m != -100))]
    )
    assert '"name": "count_letters", "description": "How many letters a name has."' in prompt, (
        "the tools the model saw"
    )
    trained = TOKENIZER.decode([t for t, m in zip(out.tokens, out.masks, strict=True) if m != -100])
    assert (
        '<tool_call>\n{"name": "count_letters", "arguments": {"name": "Ada"}}\n</tool_call>'
        in trained
    )
    assert "<answer>Ada, 3</answer>" in trained
    assert "<tool_response>" not in trained, "tool results are the environment's, not the model's"


@pytest.mark.unit
def test_the_simulated_model_plays_the_tool_task_call_by_call():
    import random

    question = tool_task.QUESTION.format(names="Zoe, Ada, Mira")
    conversation = [{"role": "user", "content": question}]
    content, calls = tool_task.reply(conversation, 0.0, random.Random(0), difficulty=0.0)
    assert content == "" and [c["function"]["name"] for c in calls] == [
        "compare_names",
        "compare_names",
    ]
    conversation += [
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": "x"} for c in calls),
    ]
    _, calls = tool_task.reply(conversation, 0.0, random.Random(1), difficulty=0.0)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("count_letters", {"name": "Ada"})
    ]
    conversation += [
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "3"},
    ]
    answer, calls = tool_task.reply(conversation, 0.0, random.Random(2), difficulty=0.0)
    assert (answer, calls) == ("<answer>Ada, 3</answer>", [])
    assert (
        tool_task.score(answer, "Ada, 3") == 1.0
        and tool_task.score("<answer>Ada, 4</answer>", "Ada, 3") == 0.5
    )


@pytest.mark.parametrize(
    "env",
    [
        "vftui/alphabet-tools",
        pytest.param("vftui/alphabet-tools-classic", marks=pytest.mark.classic),
    ],
    ids=["v1", "classic"],
)
def test_the_built_in_tool_env_collects_offline_with_exact_training_data(tmp_path, env):
    out = tmp_path / "groups.jsonl"
    result = run_cli(
        ["run", "--no-ui", "--env", env, "--steps", "3", "--group-size", "4", "--out", str(out)],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    groups = read_jsonl(out)
    assert len(groups) == 3
    for group in groups:
        assert [t["function"]["name"] for t in group["tools"]] == ["compare_names", "count_letters"]
        for tokens, masks, messages in zip(
            group["tokens"], group["masks"], group["messages"], strict=True
        ):
            calls = [
                c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])
            ]
            assert calls and all(
                c["type"] == "function" and json.loads(c["function"]["arguments"]) for c in calls
            )
            results = [m for m in messages if m["role"] == "tool"]
            assert {m["tool_call_id"] for m in results} == {c["id"] for c in calls}, (
                "each result tied to its call"
            )
            rendered = TOKENIZER.apply_chat_template(
                template_messages(messages), tools=group["tools"], tokenize=False
            )
            assert TOKENIZER.decode(tokens) == rendered
            trained = TOKENIZER.decode([t for t, m in zip(tokens, masks, strict=True) if m != -100])
            for call in calls:
                assert (
                    json.dumps(call["function"]["name"]) in trained
                    and "<tool_response>" not in trained
                )
    calls = (
        "total_tool_calls" if env.endswith("classic") else "tool_calls"
    )  # ToolEnv's metric; the taskset's
    assert sum(group["vftui"]["metrics"][calls][0] > 0 for group in groups) == 3


def test_a_template_that_ignores_tools_is_refused(tmp_path):
    plain = tmp_path / "plain-tokenizer"
    plain_tokenizer(
        plain,
        (
            "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + (m['content'] or '') + '<|im_end|>\\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
        ),
    )
    result = run_cli(
        [
            "run",
            "--no-ui",
            "--env",
            "vftui/alphabet-tools",
            "--steps",
            "1",
            "--tokenizer",
            str(plain),
        ],
        tmp_path,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"vftui: error: the chat template of tokenizer '{plain}' does not render tool calls, so the training data "
        "would lose them; use a tokenizer whose template renders tools (--tokenizer)"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            [],
            "environment 'vftui/alphabet-tools' calls tools; rl mode reads the calls from the generated text and "
            "needs --tool-parser NAME (vLLM's parser for your model, e.g. hermes)",
        ),
        (
            ["--tool-parser", "hermes"],
            "--tool-parser hermes needs vLLM's tool parsers, which are not installed "
            "(pip install vllm)",
        ),
    ],
    ids=["no-parser", "no-vllm"],
)
def test_rl_with_tools_refuses_instead_of_dropping_calls(tmp_path, extra, expected):
    result = run_cli(
        ["run", "--mode", "rl", "--no-ui", "--env", "vftui/alphabet-tools", "--steps", "1", *extra],
        tmp_path,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"vftui: error: {expected}"


def test_the_simulated_model_calls_the_tools_of_an_environment_it_does_not_know():
    """So any tool environment a user installs runs offline end to end (its rewards mean nothing)."""
    import random

    tools = [
        {
            "type": "function",
            "function": {
                "name": "tool_A",
                "parameters": {"properties": {"x": {"type": "integer"}}},
            },
        },
        {
            "type": "function",
            "function": {"name": "tool_B", "parameters": {"properties": {"s": {"type": "string"}}}},
        },
    ]
    asked = [
        {
            "role": "user",
            "content": "Call the following tools with arguments of your choice: ['tool_B']",
        }
    ]
    content, calls = tool_task.any_tool_reply(asked, tools, random.Random(0))
    assert content == "" and [
        (c["function"]["name"], c["function"]["arguments"]) for c in calls
    ] == [("tool_B", '{"s": "a"}')]
    answered = [
        *asked,
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "a2"},
    ]
    assert tool_task.any_tool_reply(answered, tools, random.Random(0))[1] == []
