"""The training errors a user can fix, and the exit codes the CLI maps them to.

Exit codes are part of the contract with the Kubernetes Job (see training/launch.py):
0 done, 2 bad config or data (do not retry), 75 preempted (EX_TEMPFAIL: a checkpoint
was saved, run the same command again to resume).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_PREEMPTED = 75


class TrainingError(Exception):
    """Base class: a problem the user can fix; the message says how."""

    exit_code = EXIT_USAGE


class ConfigError(TrainingError, ValueError):
    """A config field has a bad value. ``field`` names it (dotted, as in overrides)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"config {field}: {message}")


class DataError(TrainingError):
    """The dataset cannot be used as given (missing columns, one label only, empty file...)."""

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        super().__init__(f"data {source}: {message}")


class Preempted(Exception):
    """Raised inside the loop once a checkpoint has been saved after a stop request."""

    exit_code = EXIT_PREEMPTED

    def __init__(self, reason: str, step: int, save_seconds: float | None) -> None:
        self.reason = reason
        self.step = step
        self.save_seconds = save_seconds
        super().__init__(
            f"preempted ({reason}) at step {step}; checkpoint saved, exit {EXIT_PREEMPTED} to be resumed"
        )
