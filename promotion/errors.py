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
