"""A run's output: the jsonl it owns (lock, new or resumed), which items are done, the HTML page."""
