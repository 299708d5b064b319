"""Monitoring in every stack (issue 13, item 7), in the cluster: the alert rules and Alertmanager in the plan
(its config Secret, its digest pin), the dashboards, DCGM on GPU nodes only, the drift CronJob, Triton's
monitoring environment, and the monitoring config's bounds and defaults. Expected values are literals; the
rules and the Alertmanager config are also checked by the real tools (promtool, amtool). The per-cloud parts
are in test_infra_monitoring_cloud.py."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_fixtures import STACKS, Plan

from infra import config
from infra import plan as planner

RELEASE = "kubernetes:helm.sh/v3:Release"
REPO = Path(__file__).resolve().parents[2]
LOGS = {
    "dev": "s3://acme-mlp-dev-logs",
    "staging": "s3://acme-mlp-staging-logs",
    "prod": "s3://acme-mlp-prod-logs",
    "gcp-dev": "gs://acme-mlp-gcp-dev-logs",
    "azure-dev": "abfs://logs@acmemlpazuredevlogs.dfs.core.windows.net",
}
MODELS = {
    "dev": "s3://acme-mlp-dev-models",
    "staging": "s3://acme-mlp-staging-models",
    "prod": "s3://acme-mlp-prod-models",
    "gcp-dev": "gs://acme-mlp-gcp-dev-models",
    "azure-dev": "abfs://models@acmemlpazuredevdata.dfs.core.windows.net",
}


def releases(p: Plan) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["name"]: r["inputs"] for r in p.of_type(RELEASE)}


def named_k8s(p: Plan, token: str, name: str) -> dict[str, Any]:
    (found,) = [r["inputs"] for r in p.of_type(token) if r["inputs"]["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_gets_the_repositorys_rules_our_alertmanager_and_a_pushgateway(
    plans: dict[str, Plan], stack: str
) -> None:
    values = releases(plans[stack])["prometheus"]["values"]
    expected = [
        g for path in sorted((REPO / "monitoring" / "rules").glob("*.yaml"))
        for g in yaml.safe_load(path.read_text())["groups"]
    ]  # fmt: skip
    assert expected, "monitoring/rules/ holds no rule groups"
    # ...then the stack's own group: the environment whose retraining pipeline it deploys (test_infra_pipeline_absent).
    environment = planner.load_stack(stack).environment
    declared = {"name": "stack", "rules": [{"record": "stack:retraining_pipeline:declared", "expr": "vector(1)",
                                            "labels": {"environment": environment}}]}  # fmt: skip
    assert values["serverFiles"]["alerting_rules.yml"]["groups"] == [*expected, declared]
    assert values["server"]["alertmanagers"] == [
        {"static_configs": [{"targets": ["alertmanager.monitoring.svc:9093"]}]}
    ]
    assert values["prometheus-pushgateway"]["enabled"] is True
    assert values["alertmanager"] == {"enabled": False}  # ours, configured from a Secret, not the chart's


@pytest.mark.parametrize("stack", STACKS)
def test_alert_routing_is_visible_in_the_plan_without_its_keys(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    secret = p.one("kubernetes:core/v1:Secret", "-monitoring-alertmanager-config")["inputs"]
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (
        "alertmanager-config",
        "monitoring",
    )
    paging = stack == "prod"  # only the prod stack file sets a pager key
    assert secret["metadata"]["annotations"] == {
        "platform.eu-ml/alert-receivers": "email,pagerduty" if paging else "email",
        "platform.eu-ml/paging": "true" if paging else "false",
    }
    assert secret["stringData"] == {planner.SECRET_SIG_KEY: planner.SECRET_SIG, "value": planner.REDACTED}
    assert p["outputs"]["alerting"] == {
        "receivers": ["email", "pagerduty"] if paging else ["email"],
        "paging": paging,
    }
    am = named_k8s(p, "kubernetes:apps/v1:StatefulSet", "alertmanager")["spec"]["template"]["spec"]
    (container,) = am["containers"]
    assert container["args"][0] == "--config.file=/etc/alertmanager/alertmanager.yml"
    assert am["volumes"] == [{"name": "config", "secret": {"secretName": "alertmanager-config"}}]


@pytest.mark.parametrize("stack", STACKS)
def test_dashboards_are_configmaps_the_grafana_sidecar_reads(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    files = sorted((REPO / "monitoring" / "dashboards").glob("*.json"))
    assert files
    maps = {
        r["inputs"]["metadata"]["name"]: r["inputs"]
        for r in p.of_type("kubernetes:core/v1:ConfigMap")
        if r["inputs"]["metadata"]["name"].startswith("grafana-dashboard-")
    }
    assert set(maps) == {f"grafana-dashboard-{f.stem}" for f in files}
    for f in files:
        cm = maps[f"grafana-dashboard-{f.stem}"]
        assert cm["metadata"]["namespace"] == "monitoring"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(cm["data"][f"{f.stem}.json"]) == json.loads(f.read_text())
    sidecar = releases(p)["grafana"]["values"]["sidecar"]["dashboards"]
    assert (sidecar["enabled"], sidecar["label"], sidecar["labelValue"]) == (True, "grafana_dashboard", "1")


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
AKS_SPOT = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}


@pytest.mark.parametrize("stack", STACKS)
def test_dcgm_exporter_runs_on_gpu_nodes_only(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    dcgm = releases(p)["dcgm-exporter"]
    assert (dcgm["version"], dcgm["repositoryOpts"]["repo"]) == (
        "4.8.2",
        "https://nvidia.github.io/dcgm-exporter/helm-charts",
    )
    values = dcgm["values"]
    assert values["nodeSelector"] == {"platform.eu-ml/pool": "gpu"}
    assert values["tolerations"] == (
        [GPU_TOLERATION, AKS_SPOT] if p["cloud"] == "azure" else [GPU_TOLERATION]
    )
    assert values["serviceMonitor"] == {"enabled": False}  # no Prometheus operator CRDs on the cluster


@pytest.mark.parametrize("stack", STACKS)
def test_drift_cronjob_reads_the_records_and_writes_its_report(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    cron = named_k8s(p, "kubernetes:batch/v1:CronJob", "drift")
    assert cron["metadata"]["namespace"] == "drift"
    assert (cron["spec"]["schedule"], cron["spec"]["timeZone"]) == ("0 3 * * *", "Etc/UTC")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "monitor"
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "monitoring", "drift"]
    assert container["args"] == [
        "--reference", f"{MODELS[stack]}/reference/",
        "--current", f"{LOGS[stack]}/inference/",
        "--out", f"{LOGS[stack]}/drift/",
        "--window", "24h",  # each daily run judges its day, not the whole history
        "--model", "sentiment",  # the stack's retraining.model (default): the gauges' model label
    ]  # fmt: skip
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MONITORING_PUSHGATEWAY_URL"] == "http://prometheus-prometheus-pushgateway.monitoring.svc:9091"
    # The training image (digest-pinned in prod like the trainer's).
    assert "/training" in container["image"]
    sa = named_k8s(p, "kubernetes:core/v1:ServiceAccount", "monitor")
    assert sa["metadata"]["namespace"] == "drift"
    annotations = sa["metadata"].get("annotations", {})
    if p["cloud"] == "gcp":
        assert annotations == {
            "iam.gke.io/gcp-service-account": "mlp-gcp-dev-monitor@acme-ml-platform-dev.iam.gserviceaccount.com"
        }
    elif p["cloud"] == "azure":
        assert set(annotations) == {"azure.workload.identity/client-id"}
    else:
        assert annotations == {}  # EKS Pod Identity binds by namespace and name (below)
        binding = p.named(f"mlp-{stack}-identities-monitor-binding")["inputs"]
        assert (binding["namespace"], binding["serviceAccount"]) == ("drift", "monitor")


@pytest.mark.parametrize("stack", STACKS)
def test_triton_gets_the_monitoring_environment(plans: dict[str, Plan], stack: str) -> None:
    (container,) = plans[stack].one("kubernetes:apps/v1:Deployment")["inputs"]["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e["value"] for e in container["env"]}
    expected = {
        "MONITORING_SAMPLE_RATE": "0.05" if stack == "prod" else "0.1",
        "MONITORING_RECORDS_URL": f"{LOGS[stack]}/inference",
        "MONITORING_RAW_SAMPLE_RATE": "0",
        "MONITORING_RAW_URL": f"{LOGS[stack]}/raw-sample",
    }
    if stack == "azure-dev":
        expected["AZURE_STORAGE_ANON"] = "false"
    assert env == expected


MONITORING_BOUNDS = [
    ("sampleRate", 1.5, "0..1"),
    ("rawSampleRate", 0.1, "0..0.05"),
    ("rawRetentionDays", 120, "1..90"),
    ("driftSchedule", "every day", "cron"),
    # The shape was a regex: a minute of 61 or a weekday of 8 passed it, and the CronJob API refused them.
    ("driftSchedule", "61 * * * *", "minute '61': 61 is outside 0-59"),
    ("driftSchedule", "0 3 * * 8", "day of week '8'"),
    ("driftWindow", "1 day", "24h"),
    ("driftWindow", "0h", "24h"),
    ("smarthost", "smtp.example.com", "host:port"),
]


@pytest.mark.parametrize(
    ("key", "value", "words"), MONITORING_BOUNDS, ids=[f"{b[0]}={b[1]}" for b in MONITORING_BOUNDS]
)
def test_monitoring_config_refuses_out_of_range_values(key: str, value: Any, words: str) -> None:
    from test_infra_config import raw

    values = copy.deepcopy(raw("dev"))
    values["monitoring"] = {key: value}
    with pytest.raises(config.ConfigError) as err:
        config.parse(values, stack="dev")
    assert err.value.key == f"monitoring.{key}" and words in str(err.value)


def test_monitoring_defaults_sample_a_tenth_and_keep_no_text() -> None:
    m = planner.load_stack("dev").monitoring
    assert (m.sample_rate, m.raw_sample_rate, m.raw_retention_days, m.drift_schedule) == (
        0.1,
        0.0,
        30,
        "0 3 * * *",
    )
    assert planner.load_stack("dev").alert_emails == ("ml-platform-finops@example.com",)


# --- the real tools --------------------------------------------------------------------------------------
PROMTOOL, AMTOOL = shutil.which("promtool"), shutil.which("amtool")


@pytest.mark.integration
def test_promtool_accepts_the_rules_as_rendered_in_the_plan(plans: dict[str, Plan], tmp_path: Path) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool is missing: apt-get install prometheus")
    rules = releases(plans["prod"])["prometheus"]["values"]["serverFiles"]["alerting_rules.yml"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("pager", [False, True], ids=["email-only", "pagerduty-and-opsgenie"])
def test_amtool_accepts_the_alertmanager_config_infra_renders(pager: bool, tmp_path: Path) -> None:
    if AMTOOL is None:
        pytest.skip("amtool is missing: apt-get install prometheus-alertmanager")
    from test_infra_config import raw

    from infra.k8s import monitoring

    values = copy.deepcopy(raw("dev"))
    if pager:  # placeholders only: real keys live in the stack's encrypted config
        values["monitoring"] = {
            "pagerdutyRoutingKey": "placeholder-routing-key",
            "opsgenieApiKey": "placeholder",
        }
    document = monitoring.alertmanager_document(config.parse(values, stack="dev"))
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(document))
    done = subprocess.run(
        [AMTOOL, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    receivers = {r["name"] for r in document["receivers"]}
    # `discard`: Watchdog's, with no integrations, where no monitoring.heartbeatUrl is set.
    assert receivers == ({"email", "pagerduty", "opsgenie", "discard"} if pager else {"email", "discard"})


def test_staging_and_prod_pin_alertmanager_by_digest(plans: dict[str, Plan]) -> None:
    from test_infra_config import raw

    values = copy.deepcopy(raw("staging"))
    values["monitoring"]["alertmanagerImage"] = "quay.io/prometheus/alertmanager:v0.28.1"
    with pytest.raises(config.ConfigError, match="pins images by digest") as err:
        config.parse(values, stack="staging")
    assert err.value.key == "monitoring.alertmanagerImage"
    image = named_k8s(plans["prod"], "kubernetes:apps/v1:StatefulSet", "alertmanager")["spec"]["template"][
        "spec"
    ]["containers"][0]["image"]
    assert image == "quay.io/prometheus/alertmanager:v0.28.1@sha256:" + "0" * 64


@pytest.mark.integration
@pytest.mark.parametrize("stack", ["dev", "prod"], ids=["email-only", "with-pagers"])
def test_every_stacks_alertmanager_silences_what_the_inhibit_rules_say(stack: str, tmp_path: Path) -> None:
    """The stack's own alertmanager.yml in a real Alertmanager: a failing retraining pipeline sends one
    notification, not Failed and Stale (the email-only stacks once had no inhibit rules at all)."""
    from alertmanager_api import alert_states
    from test_infra_config import raw

    from infra.k8s import monitoring

    values = copy.deepcopy(raw(stack))
    if stack == "prod":  # placeholders only: real keys live in the stack's encrypted config
        values["monitoring"] = {
            **values.get("monitoring", {}),
            "pagerdutyRoutingKey": "placeholder-routing-key",
        }
    document = monitoring.alertmanager_document(config.parse(values, stack=stack))
    alerts = [{"alertname": name, "severity": "warning", "owner": "ml", "environment": "dev"}
              for name in ("RetrainingPipelineFailed", "RetrainingPipelineStale")]  # fmt: skip
    state = {name: value for (name, _), value in alert_states(document, alerts, tmp_path).items()}
    assert state == {"RetrainingPipelineFailed": "active", "RetrainingPipelineStale": "suppressed"}
