"""RetrainingPipelineStale's thresholds are the pipeline's own schedule (monitoring/rules/training.yaml).

PromQL cannot read a cron schedule, so the rule carries one constant per environment: 2 x the interval of
pipeline/argo.py SCHEDULES + the run deadline (one missed or failed run is tolerated, the second is not). These tests
keep the constants in step with the Python they come from, and the promtool tests
(tests/monitoring/rules/retraining_stale.test.yaml) check the rule's behaviour with them.
"""

from __future__ import annotations

import re

import pytest

from infra.config.model import ENVIRONMENTS
from pipeline import argo
from tests.monitoring.conftest import alerts
from tests.pipeline.test_pipeline_argo_monitoring import schedule_interval_s

THRESHOLD = re.compile(r'label_replace\(vector\((\d+)\), "environment", "(\w+)", "", ""\)')


def thresholds() -> dict[str, int]:
    found = THRESHOLD.findall(alerts()["RetrainingPipelineStale"]["expr"])
    by_environment = {env: int(seconds) for seconds, env in found}
    assert len(by_environment) == len(found), f"an environment has two thresholds: {found}"
    return by_environment


def test_every_environment_has_a_threshold() -> None:
    """An environment missing from the rule's table matches nothing on the right of `> on (environment)`: its
    pipeline could stop for good without an alert."""
    assert set(thresholds()) == set(ENVIRONMENTS)


@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_the_threshold_is_two_schedule_intervals_plus_the_run_deadline(environment: str) -> None:
    schedule = argo.cron_workflow(environment)["spec"]["schedules"][0]
    expected = 2 * schedule_interval_s(schedule) + argo.RUN_DEADLINE_S
    assert thresholds()[environment] == expected, (
        f"{environment}: the rule waits {thresholds()[environment]} s, its schedule {schedule!r} and the "
        f"{argo.RUN_DEADLINE_S} s deadline make it {expected} s: update monitoring/rules/training.yaml"
    )


def test_the_last_success_outlives_the_threshold() -> None:
    """The rule reads the last successful run from its Workflow object: deleted earlier (ttlStrategy), the rule would
    count from the CronWorkflow's creation instead and fire while the pipeline is healthy."""
    assert max(thresholds().values()) < argo.WORKFLOW_RETENTION_S


def test_the_rule_names_the_pipelines_namespace_and_objects() -> None:
    rule = alerts()["RetrainingPipelineStale"]
    assert f'namespace="{argo.NAMESPACE}"' in rule["expr"]
    prefix = argo.template_name("")
    assert f'workflow_template=~"{prefix}.+"' in rule["expr"] and f'name=~"{prefix}.+"' in rule["expr"]
    # Any success counts, a run that skipped training for want of drift included (it ends Succeeded).
    assert 'phase="Succeeded"' in rule["expr"]
