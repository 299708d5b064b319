"""What the retraining alerts need from the rendered Argo objects (monitoring/rules/training.yaml).

RetrainingPipelineFailed reads each environment's last finished Workflow object (kube-state-metrics): the object
must outlive the wait for the next run. RetrainingTrainStepNoProgress joins the trainer's progress stamp on the
Workflow's name: the train step must push it, labelled with that name.
"""

from __future__ import annotations

from typing import Any

import pytest

from monitoring import environment as monitoring_env
from monitoring import progress
from pipeline import argo, dag
from training.launch_config import DEFAULT_PUSHGATEWAY

TRAINING = "reg.example/mlp/training@sha256:" + "1" * 64
DAY = 24 * 3600


def template(**kwargs: Any) -> dict[str, Any]:
    return argo.workflow_template(training_image=TRAINING, environment="dev", params=dag.Params(), **kwargs)


def containers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["container"] for t in doc["spec"]["templates"] if "container" in t}


def schedule_interval_s(schedule: str) -> int:
    """The longest gap between two runs of a `M H * * D` (weekly) or `M H * * *` (daily) schedule."""
    minute, hour, day_of_month, month, day_of_week = schedule.split()
    assert minute.isdigit() and hour.isdigit() and day_of_month == month == "*", (
        f"unexpected schedule {schedule}"
    )
    if day_of_week == "*":
        return DAY
    days = sorted(int(d) for d in day_of_week.split(","))
    gaps = [(b - a) % 7 or 7 for a, b in zip(days, days[1:] + days[:1], strict=True)]
    return max(gaps) * DAY


@pytest.mark.parametrize("environment", sorted(argo.SCHEDULES))
def test_a_failed_run_outlives_the_next_scheduled_run(environment: str) -> None:
    """The run kept 7 days (the old TTL) vanished as the next weekly run began: staging's and prod's failures were
    forgotten before anything replaced them."""
    ttl = template()["spec"]["ttlStrategy"]
    assert set(ttl) == {"secondsAfterCompletion"}, (
        "one retention for every outcome, or an old failure outlives a success"
    )
    needed = schedule_interval_s(argo.SCHEDULES[environment]) + argo.RUN_DEADLINE_S
    assert ttl["secondsAfterCompletion"] >= 2 * needed, (
        f"{environment}: a failed run is deleted {ttl['secondsAfterCompletion']} s after it ends; the next run may "
        f"end {needed} s later, and one skipped run should not hide it either"
    )
    cron = argo.cron_workflow(environment)["spec"]
    # The history limits delete older runs of each outcome only: the newest finished run always stays.
    assert cron["successfulJobsHistoryLimit"] >= 1 and cron["failedJobsHistoryLimit"] >= 1


def test_a_kept_failed_run_keeps_no_volume() -> None:
    assert template()["spec"]["volumeClaimGC"] == {"strategy": "OnWorkflowCompletion"}


def test_the_train_step_pushes_its_stamp_labelled_with_the_runs_name() -> None:
    steps = containers(template())
    env = {e["name"]: e["value"] for e in steps["train"]["env"]}
    assert env == {
        monitoring_env.MONITORING_PUSHGATEWAY_URL.name: DEFAULT_PUSHGATEWAY,
        monitoring_env.MONITORING_JOB_NAME.name: "{{workflow.name}}",
    }
    # Only the train step stamps: a later step's stamp would hide a hung one.
    assert [
        n for n, c in steps.items() if any(e["name"] == "MONITORING_JOB_NAME" for e in c.get("env", []))
    ] == ["train"]
    # What the trainer makes of it once Argo has put the run's name in.
    pusher = progress.from_environment({**env, "MONITORING_JOB_NAME": "retrain-dev-1765076400"})
    try:
        assert isinstance(pusher, progress.ProgressPusher)
        assert (pusher.url, pusher.job_name) == (DEFAULT_PUSHGATEWAY, "retrain-dev-1765076400")
    finally:
        pusher.close(timeout_s=1)


def test_no_pushgateway_no_stamp() -> None:
    assert "env" not in containers(template(pushgateway_url=None))["train"]
