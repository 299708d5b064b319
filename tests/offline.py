"""Environment helpers for tests that check what our tools do outside CI.

MLflow, Checkov and others switch telemetry and update checks off by themselves when they see a CI marker,
so a test that proves *we* switch them off must run without these variables.
"""

from __future__ import annotations

import os

CI_MARKERS = (
    "CI",
    "GITHUB_ACTIONS",
    "PYTEST_CURRENT_TEST",
    "GITLAB_CI",
    "JENKINS_URL",
    "BUILDKITE",
    "TF_BUILD",
)


def env_outside_ci(*drop_prefixes: str) -> dict[str, str]:
    """This process's environment as a user's shell would have it: no CI marker, nor names with these prefixes."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in CI_MARKERS and not (drop_prefixes and k.startswith(drop_prefixes))
    }
