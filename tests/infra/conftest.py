"""Plans rendered once per session: every committed stack in preview, and `dev` in update mode (where the
mocks return ids and ARNs, so exact key and role references can be compared)."""

from __future__ import annotations

from typing import Any

import pytest
from infra_fixtures import STACKS, Plan

from infra import plan as planner


@pytest.fixture(scope="session")
def plans(committed_plans: dict[str, dict[str, Any]]) -> dict[str, Plan]:
    return {s: Plan(committed_plans[s]) for s in STACKS}


@pytest.fixture(scope="session")
def updates() -> dict[str, Plan]:
    """Update-mode runs: ids and the outputs a provider computes on create are known (what the second
    half of a first `up` sees), so values derived from them can be compared exactly."""
    out = {}
    for stack in ("dev", "gcp-dev", "azure-dev"):
        cfg = planner.load_stack(stack)
        out[stack] = Plan(planner.run(cfg, planner.stack_config(stack), preview=False))
    return out
