"""Monitoring in every stack (issue 13, item 7), on each cloud: the drift job's least-privilege `monitor`
identity (AWS role document, GCP conditional prefix roles, Azure conditional container roles), the raw
sample's own short retention, the cloud-native alarms (EKS API server 5xx on AWS, Triton restarts on GCP)
and the key that lets CloudWatch publish to the encrypted topic, and the NetworkPolicies that bound what the
drift job and Alertmanager reach. Expected values are literals. The in-cluster parts are in
test_infra_monitoring_stack.py."""

from __future__ import annotations

import pytest
from infra_fixtures import Plan

from infra import plan as planner
from infra.aws import documents

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
