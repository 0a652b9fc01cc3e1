"""``vftui export``'s formats and the reasons a rollout is left out: light, so the CLI's choices load
nothing else."""

FORMATS = ("prime-rl", "messages", "atropos")
REASONS = {
    "where": "the group is not one the filter shows (--where)",
    "no_messages": "no conversation to train on (a file of tokens only)",
    "not_chat": "a message not in the chat shape (content that is not text, a tool call with no name)",
    "no_reward": "its reward is not a number",
    "low_reward": "reward below --min-reward",
    "truncated": "cut at the length limit (--drop-truncated)",
    "not_best": "past the group's --best-of",
    "duplicate": "the same completion of the same prompt, kept once (--dedupe)",
}
