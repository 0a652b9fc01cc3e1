"""The embedded simulation: an endpoint, a trainer and a tokenizer that need no GPU, key or network."""

from pathlib import Path

TOKENIZER_DIR = Path(__file__).with_name("tokenizer")  # the small tokenizer shipped in the package
