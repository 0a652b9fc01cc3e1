"""A run's settings: fields.py those every mode takes (sft takes these alone), eval.py and rl.py each
mode's own with its rules, run_config.py RunConfig made of the three, loading.py where the values come
from (flags, VFTUI_* env vars, the config file, a resumed run)."""

from vftui.config.loading import load_config
from vftui.config.run_config import FLAG_OF_FIELD, RunConfig

__all__ = ["FLAG_OF_FIELD", "RunConfig", "load_config"]
