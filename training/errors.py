"""The training errors a user can fix, and the exit codes the CLI maps them to.

Exit codes are part of the contract with the Kubernetes Job (see training/launch.py):
0 done, 2 bad config or data (do not retry), 75 preempted (EX_TEMPFAIL: a checkpoint
was saved, run the same command again to resume), 69 object storage unavailable after
retries (EX_UNAVAILABLE: the checkpoint was kept on local disk; retried by the Job as a
failure), 3 too many preemptions (the loop cap recorded in the checkpoint: do not retry).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_PREEMPTED = 75
EXIT_STORAGE = 69
EXIT_PREEMPTION_LIMIT = 3


class TrainingError(Exception):
    """Base class: a problem the user can fix; the message says how."""

    exit_code = EXIT_USAGE


class ConfigError(TrainingError, ValueError):
    """A config field has a bad value. ``field`` names it (dotted, as in overrides)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"config {field}: {message}")


class NewerFormatError(TrainingError):
    """A file written by a newer version of this repository (a checkpoint, a study) that this one would misread:
    exit 2 naming the format it needs, before anything is read from it or deleted."""


class EnvironmentVariableError(TrainingError, ValueError):
    """An environment variable of the container contract (training/environment.py) has a bad value: exit 2,
    as a bad config is; a retried pod would read the same value."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"environment variable {name}: {message}")


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


class StorageUnavailable(TrainingError):
    """Object storage kept failing after the retries (training/retry.py): exit 69, rerun once it is back."""

    exit_code = EXIT_STORAGE

    def __init__(self, uri: str, operation: str, cause: BaseException, seconds: float) -> None:
        self.uri = uri
        self.cause = cause
        super().__init__(
            f"object storage {uri}: {operation} still failing after {seconds:.0f} s of retries "
            f"({type(cause).__name__}: {cause}); check the endpoint and credentials, then rerun the same "
            "command: it resumes from the last complete checkpoint"
        )


class StorageAccessDenied(TrainingError):
    """Object storage refused this machine (no credentials, expired or wrong ones, no permission) or the bucket
    does not exist: exit 2, since a retried pod would be refused the same way (training/retry.py)."""

    def __init__(self, uri: str, operation: str, problem: str, fix: str) -> None:
        self.uri = uri
        self.kept_at: str | None = None
        """Where the checkpoint this store refused mid-run was kept instead (training/state.py `save`)."""
        super().__init__(f"object storage {uri}: {operation} failed: {problem}; {fix}")

    def __str__(self) -> str:
        said = super().__str__()
        if self.kept_at is None:
            return said
        return (
            f"{said}. The steps trained since the last checkpoint that reached the store are kept on local disk "
            f"at {self.kept_at}: once access is fixed, rerun the same command with the same --output on this "
            "machine; it uploads that checkpoint and resumes from it"
        )


class StudyStorageUnavailable(TrainingError):
    """The tuning study's database did not answer (training/tune.py): exit 69, rerun once it is back."""

    exit_code = EXIT_STORAGE

    def __init__(self, shown_url: str, cause: BaseException) -> None:
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        super().__init__(
            f"study storage {shown_url} did not answer ({type(cause).__name__}: {first}); check its host, port "
            "and credentials (on the cluster the Secret `launch --tune --storage-secret` names), then rerun the "
            "same command: the study resumes"
        )


class PreemptionLimit(TrainingError):
    """The run was preempted more often than allowed (recorded in its checkpoint): exit 3, do not retry."""

    exit_code = EXIT_PREEMPTION_LIMIT
