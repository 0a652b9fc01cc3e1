"""sft (Atropos ``process``): any OpenAI-compatible endpoint, many groups in flight, groups saved as jsonl."""
