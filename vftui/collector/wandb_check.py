"""``--wandb`` without a way to log is refused before any work, with the ways out.

Otherwise ``wandb.init`` (inside atroposlib, after the environment and the endpoint are
ready) fails with a ``UsageError`` traceback when no key is configured and no terminal
can prompt for one.
"""

from __future__ import annotations

from vftui.errors import UserError

LOCAL_MODES = ("offline", "disabled", "dryrun")


def check_wandb_can_log() -> None:
    try:
        from wandb.errors import AuthenticationError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth
    except ImportError:  # a wandb whose internals differ: it decides at init
        return
    settings = wandb_setup.singleton().settings  # WANDB_* variables and `wandb offline` both count
    if settings.mode in LOCAL_MODES:
        return
    try:
        found = wbauth.authenticate_session(
            host=settings.base_url, source="vftui", prompt=False, update_session=False
        )
    except AuthenticationError as e:
        raise UserError(f"--wandb: the W&B credentials found do not work ({e})") from e
    if found is None:
        raise UserError(
            "--wandb needs a W&B login: run `wandb login` (or set WANDB_API_KEY), "
            "or set WANDB_MODE=offline to log to local files"
        )
