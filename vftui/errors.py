"""Errors a user can cause: one clear sentence, a non-zero exit, never a traceback."""

from __future__ import annotations

import signal

# Every command's exit codes (and 2 for a UserError): said in --help and README.
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
STOP_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
)  # each stops a run as Ctrl-C does (EXIT_INTERRUPTED)
EXIT_GATE, EXIT_STALLED = 3, 4  # a --fail-on gate tripped; --stall-timeout passed


class UserError(Exception):
    """Bad input or an unusable setting; ``str(e)`` is the sentence shown to the user."""

    exit_code = 2


class RunEnded(UserError):
    """A control call (pause, temperature, stop) on a run that has ended: nothing was done; the sentence says why."""


class Unanswered(UserError):
    """A control call the run did not answer in time: it may still be carried out; the sentence says so."""


class RunFailed(Exception):
    """A run that started but could not go on (e.g. the endpoint kept failing)."""

    exit_code = 1
