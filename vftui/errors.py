"""Errors a user can cause: one clear sentence, a non-zero exit, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unusable setting; ``str(e)`` is the sentence shown to the user."""

    exit_code = 2


class RunFailed(Exception):
    """A run that started but could not go on (e.g. the endpoint kept failing)."""

    exit_code = 1
