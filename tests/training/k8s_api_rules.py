"""Moved: the API server's rules now cover every kind the repository renders (tests/k8s_api/). Kept so that
`from tests.training.k8s_api_rules import ...` goes on working."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from tests.k8s_api.batch import job_specs, pod_failure_policy_errors
from tests.k8s_api.objects import assert_accepted

__all__ = ["assert_accepted_by_apiserver", "job_specs", "pod_failure_policy_errors"]


def assert_accepted_by_apiserver(rendered: Any, restricted: Set[str] = frozenset()) -> int:
    """Fail with the API server's messages for every object in `rendered`; returns how many Jobs were checked."""
    assert_accepted(rendered, restricted)
    return len(list(job_specs(rendered)))
