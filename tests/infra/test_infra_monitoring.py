"""Monitoring in every stack (issue 13, item 7): the alert rules and Alertmanager in the plan, the
dashboards, DCGM on GPU nodes only, the drift CronJob and its least-privilege identity on each cloud,
Triton's monitoring environment and the raw sample's own retention. Expected values are literals; the
rules and the Alertmanager config are also checked by the real tools (promtool, amtool)."""

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
from infra.aws import documents

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
    assert values["serverFiles"]["alerting_rules.yml"]["groups"] == expected
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


NAMES = {b: f"acme-mlp-dev-{b}" for b in ("raw", "splits", "checkpoints", "models", "logs")}


def test_the_monitor_role_reads_records_and_reference_and_writes_only_drift_on_aws() -> None:
    assert documents.identity_policy("monitor", NAMES, []) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "LogsInferenceRead",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-logs/inference/*"],
            },
            {
                "Sid": "LogsInferenceList",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-logs"],
                "Condition": {"StringLike": {"s3:prefix": ["inference", "inference/*"]}},
            },
            {
                "Sid": "ModelsReferenceRead",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-models/reference/*"],
            },
            {
                "Sid": "ModelsReferenceList",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-models"],
                "Condition": {"StringLike": {"s3:prefix": ["reference", "reference/*"]}},
            },
            {
                "Sid": "LogsDriftReadWrite",
                "Effect": "Allow",
                "Action": [
                    "s3:AbortMultipartUpload",
                    "s3:DeleteObject",
                    "s3:GetObject",
                    "s3:GetObjectVersion",
                    "s3:PutObject",
                ],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-logs/drift/*"],
            },
            {
                "Sid": "LogsDriftList",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": ["arn:aws:s3:::acme-mlp-dev-logs"],
                "Condition": {"StringLike": {"s3:prefix": ["drift", "drift/*"]}},
            },
        ],
    }
    # No image push, no other bucket; the key only as far as reading and writing objects needs it.
    assert documents.key_statement("monitor", "K")["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]  # type: ignore[index]


def test_the_monitor_account_has_conditional_prefix_roles_only_on_gcp(plans: dict[str, Plan]) -> None:
    p = plans["gcp-dev"]
    member = "serviceAccount:mlp-gcp-dev-monitor@acme-ml-platform-dev.iam.gserviceaccount.com"
    grants = {
        (r["inputs"]["bucket"], r["inputs"]["role"], r["inputs"]["condition"]["expression"])
        for r in p.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r["inputs"]["member"] == member
    }
    logs, models = "acme-mlp-gcp-dev-logs", "acme-mlp-gcp-dev-models"
    assert grants == {
        (
            logs,
            "roles/storage.objectViewer",
            f'resource.name == "projects/_/buckets/{logs}" || '
            f'resource.name.startsWith("projects/_/buckets/{logs}/objects/inference/")',
        ),
        (
            models,
            "roles/storage.objectViewer",
            f'resource.name == "projects/_/buckets/{models}" || '
            f'resource.name.startsWith("projects/_/buckets/{models}/objects/reference/")',
        ),
        (
            logs,
            "roles/storage.objectUser",
            f'resource.name == "projects/_/buckets/{logs}" || '
            f'resource.name.startsWith("projects/_/buckets/{logs}/objects/drift/")',
        ),
    }
    assert not [
        r
        for r in p.of_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
        if r["inputs"]["member"] == member
    ]
    server = "serviceAccount:mlp-gcp-dev-server@acme-ml-platform-dev.iam.gserviceaccount.com"
    writes = {
        r["inputs"]["condition"]["expression"]
        for r in p.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r["inputs"]["member"] == server and "condition" in r["inputs"]
    }
    assert writes == {
        f'resource.name.startsWith("projects/_/buckets/{logs}/objects/{prefix}/")'
        for prefix in ("inference", "raw-sample")
    }


def test_the_monitor_identity_has_conditional_container_roles_only_on_azure(plans: dict[str, Plan]) -> None:
    p = plans["azure-dev"]
    reader = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
    mine = {
        r["name"].removeprefix("mlp-azure-dev-identities-"): r["inputs"]
        for r in p.of_type("azure-native:authorization:RoleAssignment")
        if r["name"].startswith("mlp-azure-dev-identities-monitor-")
    }
    assert set(mine) == {"monitor-logs-inference", "monitor-logs-drift", "monitor-models-reference"}
    blobs = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
    inference = mine["monitor-logs-inference"]
    assert inference["roleDefinitionId"].endswith(f"/roleDefinitions/{reader}")
    assert inference["scope"].endswith(
        "/storageAccounts/acmemlpazuredevlogs/blobServices/default/containers/logs"
    )
    assert inference["conditionVersion"] == "2.0"
    assert inference["condition"] == (
        f"((!(ActionMatches{{'{blobs}/read'}} AND NOT SubOperationMatches{{'Blob.List'}})) OR "
        f"(@Resource[{blobs}:path] StringStartsWith 'inference/')) AND "
        f"((!(ActionMatches{{'{blobs}/read'}} AND SubOperationMatches{{'Blob.List'}})) OR "
        f"(@Request[{blobs}:prefix] StringStartsWith 'inference/'))"
    )
    assert "StringStartsWith 'reference/'" in mine["monitor-models-reference"]["condition"]
    assert mine["monitor-models-reference"]["scope"].endswith(
        "/acmemlpazuredevdata/blobServices/default/containers/models"
    )
    assert "StringStartsWith 'drift/'" in mine["monitor-logs-drift"]["condition"]
    # Without a condition the monitor identity has nothing.
    assert all("condition" in a for a in mine.values())


RAW_RULES = {
    "aws": ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "-buckets-logs-lifecycle"),
    "gcp": ("gcp:storage/bucket:Bucket", "-buckets-logs"),
    "azure": ("azure-native:storage:ManagementPolicy", "-storage-logs-lifecycle"),
}


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_the_raw_sample_expires_after_its_own_short_retention(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    token, suffix = RAW_RULES[p["cloud"]]
    inputs = p.one(token, suffix)["inputs"]
    if p["cloud"] == "aws":
        (rule,) = [r for r in inputs["rules"] if r["id"] == "expire-raw-sample"]
        assert rule["filter"] == {"prefix": "raw-sample/"}
        assert (rule["expiration"]["days"], rule["noncurrentVersionExpiration"]["noncurrentDays"]) == (
            30.0,
            1.0,
        )
    elif p["cloud"] == "gcp":
        raw = [
            r for r in inputs["lifecycleRules"] if r["condition"].get("matchesPrefixes") == ["raw-sample/"]
        ]
        assert {(r["condition"].get("age"), r["condition"].get("daysSinceNoncurrentTime")) for r in raw} == {
            (30.0, None),
            (None, 1.0),
        }
    else:
        (rule,) = [r for r in inputs["policy"]["rules"] if r["name"] == "expire-raw-sample"]
        assert rule["definition"]["filters"]["prefixMatch"] == ["logs/raw-sample/"]
        actions = rule["definition"]["actions"]
        assert actions["baseBlob"]["delete"]["daysAfterModificationGreaterThan"] == 30.0
        assert actions["version"]["delete"]["daysAfterCreationGreaterThan"] == 1.0


MONITORING_BOUNDS = [
    ("sampleRate", 1.5, "0..1"),
    ("rawSampleRate", 0.1, "0..0.05"),
    ("rawRetentionDays", 120, "1..90"),
    ("driftSchedule", "every day", "cron"),
    ("smarthost", "smtp.example.com", "host:port"),
]


@pytest.mark.parametrize(("key", "value", "words"), MONITORING_BOUNDS, ids=[b[0] for b in MONITORING_BOUNDS])
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
    assert receivers == ({"email", "pagerduty", "opsgenie"} if pager else {"email"})


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


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_aws_alarms_on_the_eks_api_servers_free_5xx_metric(plans: dict[str, Plan], stack: str) -> None:
    alarm = plans[stack].one("aws:cloudwatch/metricAlarm:MetricAlarm")["inputs"]
    assert (alarm["namespace"], alarm["metricName"], alarm["dimensions"]) == (
        "AWS/EKS",
        "apiserver_request_total_5XX",
        {"ClusterName": f"mlp-{stack}"},
    )
    assert (alarm["statistic"], alarm["period"], alarm["evaluationPeriods"], alarm["threshold"]) == (
        "Sum",
        300.0,
        3.0,
        0.0,
    )
    assert alarm["treatMissingData"] == "notBreaching"
    # Mailed through an SNS topic encrypted with the environment key.
    topic = plans[stack].one("aws:sns/topic:Topic")
    assert topic["inputs"]["name"] == f"mlp-{stack}-alerts"
    assert topic["inputs"]["kmsMasterKeyId"] == planner.UNKNOWN  # the key's ARN, known after creation
    assert plans[stack].one("aws:kms/key:Key")["urn"] in topic["dependencies"]
    assert alarm["alarmActions"] == alarm["okActions"] == [planner.UNKNOWN]
    subscriptions = [r["inputs"] for r in plans[stack].of_type("aws:sns/topicSubscription:TopicSubscription")]
    assert [(s["protocol"], s["endpoint"]) for s in subscriptions] == [
        ("email", "ml-platform-finops@example.com")
    ]


def test_gcp_alerts_on_triton_restarts_by_email(plans: dict[str, Plan]) -> None:
    p = plans["gcp-dev"]
    policy = p.one("gcp:monitoring/alertPolicy:AlertPolicy")["inputs"]
    (condition,) = policy["conditions"]
    assert condition["conditionThreshold"]["filter"] == (
        'resource.type = "k8s_container" AND metric.type = "kubernetes.io/container/restart_count" AND '
        'resource.labels.cluster_name = "mlp-gcp-dev" AND resource.labels.namespace_name = "serving"'
    )
    assert (
        condition["conditionThreshold"]["comparison"],
        condition["conditionThreshold"]["thresholdValue"],
    ) == (
        "COMPARISON_GT",
        3.0,
    )
    channels = [
        r
        for r in p.of_type("gcp:monitoring/notificationChannel:NotificationChannel")
        if "-alerts-email-" in r["name"]
    ]
    assert [c["inputs"]["labels"] for c in channels] == [{"email_address": "ml-platform-finops@example.com"}]
    assert len(policy["notificationChannels"]) == 1


@pytest.mark.parametrize("stack", ["dev", "gcp-dev", "azure-dev"])
def test_the_drift_job_and_alertmanager_reach_only_what_they_need(plans: dict[str, Plan], stack: str) -> None:
    p = plans[stack]
    policies = {
        (r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r["inputs"]["spec"]
        for r in p.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert policies[("drift", "default-deny")] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    drift = policies[("drift", "drift")]
    assert drift["policyTypes"] == ["Egress"]
    ports = [[(x["protocol"], x["port"]) for x in rule["ports"]] for rule in drift["egress"]]
    identity = {
        "aws": [[("TCP", 80.0)]],
        "gcp": [[("TCP", 80.0)], [("TCP", 988.0)]],
        "azure": [],
    }[p["cloud"]]
    assert ports == [[("UDP", 53.0), ("TCP", 53.0)], *identity, [("TCP", 443.0)], [("TCP", 9091.0)]]
    assert drift["egress"][-1]["to"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    am = policies[("monitoring", "alertmanager")]
    assert am["ingress"] == [{"from": [{"podSelector": {}}], "ports": [{"port": 9093.0, "protocol": "TCP"}]}]
    assert [(x["protocol"], x["port"]) for x in am["egress"][-1]["ports"]] == [("TCP", 443.0), ("TCP", 587.0)]


def test_the_key_lets_cloudwatch_publish_to_the_encrypted_topic_for_this_account_only() -> None:
    doc = documents.key_policy(
        "123456789012", "eu-south-2", "arn:aws:cloudtrail:eu-south-2:123456789012:trail/t"
    )
    (statement,) = [
        s for s in doc["Statement"] if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert statement == {
        "Sid": "CloudWatchAlarmsPublishToTopic",
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
    }
