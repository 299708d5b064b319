"""A value unknown at preview is never counted as compliant: the rule reports `undetermined(...)`.

Each case sets one property of a compliant fixture stack to the engine's unknown sentinel (fx.UNKNOWN,
the string the Pulumi engine sends over the Analyzer protocol) and expects exactly one undetermined
finding of the rule on that resource; the same property with a known compliant value still passes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import policy_fixtures as fx
import pytest
from policy_cases_unknown import CASES, Build
from policy_mutators import Plan

from policies.analyze import plan_from_dict, to_resources
from policies.rules import Context, evaluate


def rule_findings(plan: Plan, rule: str) -> set[str]:
    """The rule's findings by resource name; an undetermined one ends in '?'."""
    p = plan_from_dict(plan)
    found = evaluate(to_resources(p), Context(environment=p.environment))
    return {
        (f.urn or "").rsplit("::", 1)[-1] + ("?" if f.undetermined else "")
        for name, f in found
        if name == rule
    }


def _run(make: Callable[[], Plan], rule: str, build: Build, value: Any) -> set[str]:
    plan = make()
    build(value)(plan)
    return rule_findings(plan, rule)


@pytest.mark.parametrize(
    ("make", "rule", "name", "build"), [c[1:5] for c in CASES], ids=[c[0] for c in CASES]
)
def test_unknown_value_is_undetermined(make: Callable[[], Plan], rule: str, name: str, build: Build) -> None:
    assert _run(make, rule, build, fx.UNKNOWN) == {f"{name}?"}


@pytest.mark.parametrize(
    ("make", "rule", "build", "known"), [(c[1], c[2], c[4], c[5]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_known_compliant_value_still_passes(
    make: Callable[[], Plan], rule: str, build: Build, known: Any
) -> None:
    assert _run(make, rule, build, known) == set()
