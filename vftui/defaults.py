"""Defaults that commands other than ``run`` name too, without loading the settings model."""

DEFAULT_ENV = "alphabet-sort"
DEFAULT_HUB_TOKENIZER = "Qwen/Qwen2.5-1.5B-Instruct"
DEFAULT_API_URL = "http://localhost:8000"
