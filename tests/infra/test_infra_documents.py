"""Policy documents and role tables: pure functions, tested without Pulumi."""

from __future__ import annotations

import json

import pytest

from infra.aws import cluster_documents, documents
from infra.azure import roles as azure_roles
from infra.gcp import roles as gcp_roles
from infra.k8s import autoscaling
from infra.network import subnet_cidrs
from infra.shape import IDENTITIES

NAMES = {p: f"acme-mlp-dev-{p}" for p in ("raw", "splits", "checkpoints", "models", "logs")}
REPOS = ["arn:aws:ecr:eu-south-2:123456789012:repository/mlp-dev/serving"]
KEY = "arn:aws:kms:eu-south-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def allowed(doc: dict) -> list[dict]:
    return [s for s in doc["Statement"] if s["Effect"] == "Allow"]


def test_trainer_statements_exact() -> None:
    doc = documents.identity_policy("trainer", NAMES, [])
    assert doc["Version"] == "2012-10-17"
    assert doc["Statement"] == [
        {
            "Sid": "CheckpointsObjects",
            "Effect": "Allow",
            "Action": [
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:PutObject",
            ],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-checkpoints/*"],
        },
        {
            "Sid": "CheckpointsList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-checkpoints"],
        },
        {
            "Sid": "ModelsObjects",
            "Effect": "Allow",
            "Action": ["s3:AbortMultipartUpload", "s3:PutObject"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-models/*"],
        },
        {
            "Sid": "RawObjects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-raw/*"],
        },
        {
            "Sid": "RawList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-raw"],
        },
        {
            "Sid": "SplitsObjects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-splits/*"],
        },
        {
            "Sid": "SplitsList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-splits"],
        },
        # The drift reference: read by the pipeline's drift check, replaced by its promote step.
        {
            "Sid": "ModelsReferenceReadWrite",
            "Effect": "Allow",
            "Action": [
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:PutObject",
            ],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-models/reference/*"],
        },
        {
            "Sid": "ModelsReferenceList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-models"],
            "Condition": {"StringLike": {"s3:prefix": ["reference", "reference/*"]}},
        },
    ]
    assert documents.key_statement("trainer", KEY) == {
        "Sid": "EnvironmentKey",
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": [KEY],
    }


def test_server_reads_models_and_writes_only_its_logs_prefixes() -> None:
    doc = documents.identity_policy("server", NAMES, [])
    assert doc["Statement"][2:] == [
        {
            "Sid": "LogsInferenceWrite",
            "Effect": "Allow",
            "Action": ["s3:AbortMultipartUpload", "s3:PutObject"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-logs/inference/*"],
        },
        {
            "Sid": "LogsRawSampleWrite",
            "Effect": "Allow",
            "Action": ["s3:AbortMultipartUpload", "s3:PutObject"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-logs/raw-sample/*"],
        },
    ]
    assert doc["Statement"][:2] == [
        {
            "Sid": "ModelsObjects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-models/*"],
        },
        {
            "Sid": "ModelsList",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-mlp-dev-models"],
        },
    ]
    # Reading models decrypts; writing records generates data keys.
    assert documents.key_statement("server", KEY)["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]  # type: ignore[index]


def test_ci_deployer_pushes_images_and_touches_no_data_or_key() -> None:
    doc = documents.identity_policy("ci-deployer", NAMES, REPOS)
    assert doc["Statement"] == [
        {"Sid": "EcrLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
        {"Sid": "EcrPush", "Effect": "Allow", "Action": documents.ECR_PUSH, "Resource": REPOS},
    ]
    assert documents.key_statement("ci-deployer", KEY) is None


@pytest.mark.parametrize("identity", IDENTITIES)
def test_no_star_action_and_star_resource_only_where_aws_allows_nothing_else(identity: str) -> None:
    docs = [
        documents.identity_policy(identity, NAMES, REPOS),
        cluster_documents.cluster_autoscaler_policy("mlp-dev", "eu-south-2", "1"),
    ]
    for doc in docs:
        for s in allowed(doc):
            actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
            assert all("*" not in a for a in actions), s
            if "*" in s["Resource"]:
                assert set(actions) <= documents.ACTIONS_WITHOUT_RESOURCE_TYPES, s


def test_every_bucket_a_role_touches_is_one_it_needs() -> None:
    expected = {
        "trainer": {
            "acme-mlp-dev-raw",
            "acme-mlp-dev-splits",
            "acme-mlp-dev-checkpoints",
            "acme-mlp-dev-models",
        },
        "server": {"acme-mlp-dev-models", "acme-mlp-dev-logs"},
        "ci-deployer": set(),
        "monitor": {"acme-mlp-dev-models", "acme-mlp-dev-logs"},
    }
    for identity in IDENTITIES:
        doc = documents.identity_policy(identity, NAMES, [])
        touched = {r.split(":::")[1].split("/")[0] for s in doc["Statement"] for r in s["Resource"]}
        assert touched == expected[identity]


def test_bucket_policy_denies_plain_http() -> None:
    doc = documents.bucket_policy("acme-mlp-dev-raw")
    assert doc["Statement"] == [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": ["arn:aws:s3:::acme-mlp-dev-raw", "arn:aws:s3:::acme-mlp-dev-raw/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]


def test_log_bucket_policy_scopes_service_writers_to_account_and_trail() -> None:
    trail = "arn:aws:cloudtrail:eu-south-2:123456789012:trail/mlp-dev-audit"
    doc = documents.log_bucket_policy("acme-mlp-dev-logs", "123456789012", ["acme-mlp-dev-raw"], trail)
    by_sid = {s["Sid"]: s for s in doc["Statement"]}
    assert by_sid["DenyInsecureTransport"]["Effect"] == "Deny"
    assert by_sid["S3ServerAccessLogs"]["Resource"] == "arn:aws:s3:::acme-mlp-dev-logs/access/*"
    assert by_sid["S3ServerAccessLogs"]["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    assert by_sid["CloudTrailWrite"]["Condition"]["StringEquals"]["aws:SourceArn"] == trail
    assert (
        by_sid["CloudTrailWrite"]["Resource"]
        == "arn:aws:s3:::acme-mlp-dev-logs/cloudtrail/AWSLogs/123456789012/*"
    )


def test_key_policy_lets_log_services_use_the_key_only_for_this_account() -> None:
    trail = "arn:aws:cloudtrail:eu-south-2:123456789012:trail/mlp-dev-audit"
    doc = documents.key_policy("123456789012", "eu-south-2", trail)
    principals = [s["Principal"] for s in doc["Statement"]]
    assert {"AWS": "arn:aws:iam::123456789012:root"} in principals
    assert {"Service": "logs.eu-south-2.amazonaws.com"} in principals
    for s in doc["Statement"]:
        if "Service" in s["Principal"]:
            assert "Condition" in s, s["Sid"]
    json.dumps(doc)  # serialisable as the KMS API expects


def test_pod_identity_trust_is_the_eks_pods_service_in_this_account() -> None:
    (statement,) = documents.pod_identity_trust_policy("123456789012")["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


def test_gcp_roles_follow_the_access_table() -> None:
    assert [(b.target, b.role) for b in gcp_roles.bucket_bindings("trainer")] == [
        ("checkpoints", "roles/storage.objectUser"),
        ("models", "roles/storage.objectCreator"),
        ("raw", "roles/storage.objectViewer"),
        ("splits", "roles/storage.objectViewer"),
    ]
    assert [(b.target, b.role) for b in gcp_roles.bucket_bindings("server")] == [
        ("models", "roles/storage.objectViewer")
    ]
    assert gcp_roles.bucket_bindings("ci-deployer") == []
    assert [(b.target, b.role) for b in gcp_roles.repository_bindings("ci-deployer")] == [
        ("training", "roles/artifactregistry.writer"),
        ("serving", "roles/artifactregistry.writer"),
    ]
    assert gcp_roles.workload_identity_member(
        "p", __import__("infra.shape").shape.SERVICE_ACCOUNTS["trainer"]
    ) == ("serviceAccount:p.svc.id.goog[training/trainer]")


def test_azure_roles_follow_the_access_table() -> None:
    assert [(a.target, a.role) for a in azure_roles.container_assignments("trainer")] == [
        ("checkpoints", azure_roles.STORAGE_BLOB_DATA_CONTRIBUTOR),
        ("models", azure_roles.WRITER_ROLE),
        ("raw", azure_roles.STORAGE_BLOB_DATA_READER),
        ("splits", azure_roles.STORAGE_BLOB_DATA_READER),
    ]
    assert [(a.target, a.role) for a in azure_roles.container_assignments("server")] == [
        ("models", azure_roles.STORAGE_BLOB_DATA_READER)
    ]
    assert azure_roles.registry_assignments("ci-deployer") == [
        azure_roles.Assignment("ci-deployer", "registry", azure_roles.ACR_PUSH)
    ]
    # The retraining workflow reads the images over the registry API: pull only (test_infra_image_pull.py).
    assert azure_roles.registry_assignments("trainer") == [
        azure_roles.Assignment("trainer", "registry", azure_roles.ACR_PULL)
    ]
    assert azure_roles.registry_assignments("server") == []
    # The custom writer role can create blobs and nothing else.
    assert azure_roles.BLOB_WRITE_DATA_ACTIONS == (
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action",
    )
    assert (
        azure_roles.writer_role_guid("dev")
        == azure_roles.writer_role_guid("dev")
        != azure_roles.writer_role_guid("prod")
    )


def test_hpa_query_is_the_endpoints_per_pod_mean_over_every_finished_request() -> None:
    assert autoscaling.per_pod_queue_time() == (
        'sum by (pod)(rate(nv_inference_queue_duration_us{model="sentiment"}[1m])) / '
        'clamp_min(sum by (pod)(rate({__name__=~"nv_inference_request_success|nv_inference_request_failure",'
        'model="sentiment"}[1m])), 0.001)'
    )
    rule = autoscaling.adapter_rule()
    assert rule["name"]["as"] == "triton_queue_time_per_request_us"
    assert "avg(" not in rule["metricsQuery"]  # the under-reporting k8s-onprem form (server#8979)
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}


def test_the_rate_window_holds_four_scrapes_and_the_target_is_servings_measurement() -> None:
    # rate() needs two samples per window and is robust with four: 15 s scrapes, 1 m window.
    assert (autoscaling.SCRAPE_INTERVAL, autoscaling.WINDOW) == ("15s", "1m")
    # serving/README.md: ~2 ms while one replica keeps up, 65-823 ms once it saturates.
    assert autoscaling.HPA_TARGET_QUEUE_US == 20_000
    from serving import autoscale

    assert (autoscale.HPA_TARGET_QUEUE_US, autoscale.HPA_MODEL) == (20_000, "sentiment")
    assert "[1m]" in autoscale.PROMQL_QUEUE_US_PER_REQUEST


def test_subnets_do_not_overlap_and_stay_inside_the_network() -> None:
    import ipaddress

    private, public = subnet_cidrs("10.40.0.0/16", 3)
    nets = [ipaddress.ip_network(c) for c in private + public]
    assert all(n.subnet_of(ipaddress.ip_network("10.40.0.0/16")) for n in nets)  # type: ignore[arg-type]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    with pytest.raises(ValueError, match="too small"):
        subnet_cidrs("10.40.0.0/24", 3)


def test_kubeconfig_authenticates_through_an_exec_plugin_only() -> None:
    from infra.k8s.kubeconfig import exec_kubeconfig

    doc = json.loads(exec_kubeconfig("mlp-dev", "https://x.example", "Q0E=", "aws", ["eks", "get-token"]))
    (user,) = doc["users"]
    assert set(user["user"]) == {"exec"}  # no token, password or client key stored
    assert (user["user"]["exec"]["command"], user["user"]["exec"]["args"]) == ("aws", ["eks", "get-token"])
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://x.example",
        "certificate-authority-data": "Q0E=",
    }
