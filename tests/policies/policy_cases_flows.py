"""Issue-12 mutants for residency beyond location (replication, backup copies, log sinks and
diagnostics leaving the EU), prod alert routing (issue 13), inline GPU node pools, type variants
(S3 V2 and versioned azure-native tokens), and four values unknown at preview that must be
reported as undetermined.

policy_cases.py gathers them with the other sections for test_policy_rules.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import policy_fixtures as fx
from policy_mutators import S3, Case, Plan, add, edit

# --- issue 12: residency beyond location, alert routing (issue 13), coverage of type variants -------

SECRET = "kubernetes:core/v1:Secret"


def _no_pager(i: dict[str, Any]) -> None:
    i["metadata"]["annotations"] = {
        "platform.eu-ml/alert-receivers": "email",
        "platform.eu-ml/paging": "false",
    }


def _drop_named(name: str) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        plan["resources"] = [r for r in plan["resources"] if r["name"] != name]

    return mutate


def _gke_inline_on_demand_gpu(i: dict[str, Any]) -> None:
    i["nodePools"] = [
        {
            "name": "gpu",
            "autoscaling": {"minNodeCount": 0.0, "maxNodeCount": 4.0},
            "nodeConfig": {
                "machineType": "g2-standard-4",
                "guestAccelerators": [{"type": "nvidia-l4", "count": 1.0}],
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
            },
        }
    ]


def _aks_inline_on_demand_gpu(i: dict[str, Any]) -> None:
    i["agentPoolProfiles"] = [
        {
            "name": "gpu",
            "vmSize": "Standard_NC4as_T4_v3",
            "minCount": 0.0,
            "maxCount": 4.0,
            "nodeTaints": ["nvidia.com/gpu=true:NoSchedule"],
        }
    ]


def _retype(type_: str, name: str, new_type: str) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        fx.find(plan, type_, name)["type"] = new_type

    return mutate


def _then(*mutations: Callable[[Plan], None]) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        for m in mutations:
            m(plan)

    return mutate


PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"


CASES: list[Case] = [
    # residency beyond location, per cloud
    (
        "aws-replication-to-us",
        fx.aws_stack,
        add(
            "aws:s3/bucketReplicationConfig:BucketReplicationConfig",
            "data-repl",
            {
                "role": "arn:aws:iam::1:role/r",
                "rules": [
                    {"status": "Enabled", "destination": {"bucket": "arn:aws:s3:us-east-1::backup-us"}}
                ],
            },
        ),
        {("eu-data-flows", "data-repl")},
    ),
    (
        "aws-ecr-replication-us",
        fx.aws_stack,
        add(
            "aws:ecr/replicationConfiguration:ReplicationConfiguration",
            "ecr-repl",
            {
                "replicationConfiguration": {
                    "rules": [{"destinations": [{"region": "us-west-2", "registryId": "111122223333"}]}]
                }
            },
        ),
        {("eu-data-flows", "ecr-repl")},
    ),
    (
        "aws-ecr-replication-eu-ok",
        fx.aws_stack,
        add(
            "aws:ecr/replicationConfiguration:ReplicationConfiguration",
            "ecr-repl",
            {
                "replicationConfiguration": {
                    "rules": [{"destinations": [{"region": "eu-west-3", "registryId": "111122223333"}]}]
                }
            },
        ),
        set(),
    ),
    (
        "aws-backup-copy-us",
        fx.aws_stack,
        add(
            "aws:backup/plan:Plan",
            "backups",
            {
                "rules": [
                    {
                        "ruleName": "daily",
                        "targetVaultName": "v",
                        "copyActions": [
                            {"destinationVaultArn": "arn:aws:backup:us-east-1:111122223333:backup-vault:dr"}
                        ],
                    }
                ]
            },
        ),
        {("eu-data-flows", "backups")},
    ),
    (
        "gcp-sink-to-us-bucket",
        fx.gcp_stack,
        add(
            "gcp:logging/projectSink:ProjectSink",
            "audit-sink",
            {"destination": "logging.googleapis.com/projects/p/locations/us-central1/buckets/audit"},
        ),
        {("eu-data-flows", "audit-sink")},
    ),
    (
        "gcp-sink-to-foreign-bucket",
        fx.gcp_stack,
        add(
            "gcp:logging/projectSink:ProjectSink",
            "audit-sink",
            {"destination": "storage.googleapis.com/someone-elses-bucket"},
        ),
        {("eu-data-flows", "audit-sink")},
    ),
    (
        "gcp-sink-to-own-bucket-ok",
        fx.gcp_stack,
        add(
            "gcp:logging/projectSink:ProjectSink",
            "audit-sink",
            {"destination": "storage.googleapis.com/models"},
        ),
        set(),
    ),
    (
        "gcp-sink-unknown-no-edge",
        fx.gcp_stack,
        add("gcp:logging/projectSink:ProjectSink", "audit-sink", {"destination": fx.UNKNOWN}),
        {("eu-data-flows", "audit-sink?")},
    ),
    (
        "azure-diagnostics-to-foreign-workspace",
        fx.azure_stack,
        add(
            "azure-native:monitor:DiagnosticSetting",
            "kv-diag",
            {
                "resourceUri": fx.UNKNOWN,
                "workspaceId": "/subscriptions/other/resourceGroups/x/providers/Microsoft.OperationalInsights/workspaces/elsewhere",
                "logs": [{"categoryGroup": "audit", "enabled": True}],
            },
        ),
        {("eu-data-flows", "kv-diag")},
    ),
    # alert routing (prod only, by the environment table)
    (
        "prod-no-pager",
        lambda: fx.aws_stack("prod", "prod"),
        edit(SECRET, "alertmanager-config", _no_pager),
        {("prod-alert-routing", "alertmanager-config")},
    ),
    (
        "prod-no-alertmanager",
        lambda: fx.aws_stack("prod", "prod"),
        _drop_named("alertmanager-config"),
        {("prod-alert-routing", None)},
    ),
    ("dev-no-alertmanager-ok", fx.aws_stack, _drop_named("alertmanager-config"), set()),
    # inline node pools are GPU pools too
    (
        "gke-inline-gpu-on-demand",
        fx.gcp_stack,
        edit("gcp:container/cluster:Cluster", "cluster", _gke_inline_on_demand_gpu),
        {("gpu-node-pool-spot", "cluster"), ("encryption-at-rest-cmk", "cluster")},
    ),
    (
        "aks-inline-gpu-on-demand",
        fx.azure_stack,
        edit("azure-native:containerservice:ManagedCluster", "cluster", _aks_inline_on_demand_gpu),
        {("gpu-node-pool-spot", "cluster")},
    ),
    # type variants: S3 V2 tokens and versioned azure-native tokens get the same rules
    (
        "s3-bucketv2-without-pab",
        fx.aws_stack,
        _then(_retype(S3, "data", "aws:s3/bucketV2:BucketV2"), _drop_named("data-pab")),
        {("s3-bucket-public-access-block", "data")},
    ),
    (
        "azure-versioned-token-public-blob",
        fx.azure_stack,
        _then(
            _retype(
                "azure-native:storage:StorageAccount", "data", "azure-native:storage/v20230101:StorageAccount"
            ),
            edit(
                "azure-native:storage/v20230101:StorageAccount",
                "data",
                lambda i: i.update(allowBlobPublicAccess=True),
            ),
        ),
        {("azure-storage-no-public-blob", "data")},
    ),
    (
        "aws-ebs-volume-unencrypted",
        fx.aws_stack,
        add(
            "aws:ebs/volume:Volume",
            "scratch",
            {"availabilityZone": "eu-south-2a", "size": 100.0, "encrypted": False},
        ),
        {("encryption-at-rest-cmk", "scratch")},
    ),
]

CASES += [
    (
        "azure-key-of-another-vault",
        fx.azure_stack,
        edit(
            "azure-native:storage:StorageAccount",
            "data",
            lambda i: i["encryption"]["keyVaultProperties"].update(keyName="foreign"),
        ),
        {("cmk-key-reference", "data")},
    ),
    (
        "azure-blob-access-unknown",
        fx.azure_stack,
        edit(
            "azure-native:storage:StorageAccount",
            "data",
            lambda i: i.update(allowBlobPublicAccess=fx.UNKNOWN),
        ),
        {("azure-storage-no-public-blob", "data?")},
    ),
    (
        "gcp-pap-unknown",
        fx.gcp_stack,
        edit("gcp:storage/bucket:Bucket", "models", lambda i: i.update(publicAccessPrevention=fx.UNKNOWN)),
        {("gcs-public-access-prevention", "models?")},
    ),
    (
        "gcp-firewall-unknown-ranges",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "allow-ssh",
            {"network": fx.UNKNOWN, "allows": [{"protocol": "tcp"}], "sourceRanges": [fx.UNKNOWN]},
        ),
        {("network-no-open-ingress", "allow-ssh?")},
    ),
]
