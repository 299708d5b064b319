"""One exception type per way promotion can fail, each saying how to fix it."""

from __future__ import annotations


class PromotionError(Exception):
    """Base class: a promotion command cannot run (exit 2), as opposed to a gate saying no (exit 1)."""


class ConfigError(PromotionError):
    """The gate configuration is invalid."""


class EvidenceError(PromotionError):
    """An input the gates need (metrics, bundle metadata, load test, policy report...) is missing or malformed."""

    def __init__(self, what: str, uri: str, fix: str) -> None:
        super().__init__(f"{what} at {uri!r}: {fix}")
        self.what = what
        self.uri = uri
        self.fix = fix


class RegistryError(PromotionError):
    """The MLflow model registry cannot be used (missing packages, unsupported URI, no previous version...)."""


class Terminated(BaseException):  # noqa: N818 - a signal, not an error: `except Exception` on the way must not catch it
    """SIGTERM (a cancelled CI job, a deleted pod, the pipeline runner stopping its step) as an exception, so that the
    clean-up Ctrl-C gets runs too: the deploy or smoke command's process group is stopped (deploy.run_group), an
    interrupted deploy is recorded (interrupted.py) and the environment's lock is removed. Python's default for
    SIGTERM is to die on the spot, leaving all of that undone. Raised by the CLI's handler (__main__.cli)."""
