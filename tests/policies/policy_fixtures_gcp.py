"""The compliant GCP fixture stack (GCS buckets, GKE and a spot GPU pool, Artifact Registry, budget)."""

from __future__ import annotations

import json
from typing import Any

from policy_fixtures_base import PROJECT, TAGS, UNKNOWN, res, urn


def gcp_stack(stack: str = "gcp-dev") -> dict[str, Any]:
    prov_urn = urn(stack, "pulumi:providers:gcp", "gcp-eu")
    p = {"provider": prov_urn + "::" + UNKNOWN}
    labels = dict(TAGS)
    key = "projects/p/locations/europe-southwest1/keyRings/ml/cryptoKeys/data"
    resources = [
        res(
            stack,
            "pulumi:providers:gcp",
            "gcp-eu",
            {"project": "eu-ml-dev", "region": "europe-southwest1", "defaultLabels": json.dumps(labels)},
        ),
        res(
            stack,
            "gcp:kms/cryptoKey:CryptoKey",
            "data-key",
            {
                "name": "data",
                "keyRing": UNKNOWN,
                "rotationPeriod": "7776000s",
                "destroyScheduledDuration": "2592000s",
            },
            **p,
        ),
    ]
    for bucket in ("data", "checkpoints", "models", "access-logs"):
        inputs: dict[str, Any] = {
            "name": f"eu-ml-{stack}-{bucket}",
            "location": "EUROPE-SOUTHWEST1",
            "publicAccessPrevention": "enforced",
            "uniformBucketLevelAccess": True,
            "versioning": {"enabled": True},
            "encryption": {"defaultKmsKeyName": key},
            "lifecycleRules": [{"action": {"type": "Delete"}, "condition": {"numNewerVersions": 5.0}}],
        }
        if bucket != "access-logs":
            inputs["logging"] = {"logBucket": f"eu-ml-{stack}-access-logs"}
        resources.append(res(stack, "gcp:storage/bucket:Bucket", bucket, inputs, **p))
    resources += [
        res(
            stack,
            "gcp:container/cluster:Cluster",
            "cluster",
            {
                "location": "europe-southwest1",
                "databaseEncryption": {"state": "ENCRYPTED", "keyName": key},
                "masterAuthorizedNetworksConfig": {
                    "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "ops"}]
                },
                "datapathProvider": "ADVANCED_DATAPATH",
                "privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": False},
                "loggingConfig": {"enableComponents": ["SYSTEM_COMPONENTS", "APISERVER", "WORKLOADS"]},
                "resourceLabels": labels,
            },
            **p,
        ),
        res(
            stack,
            "gcp:container/nodePool:NodePool",
            "gpu-spot",
            {
                "cluster": UNKNOWN,
                "location": "europe-southwest1",
                "autoscaling": {"minNodeCount": 0.0, "maxNodeCount": 4.0},
                "nodeConfig": {
                    "machineType": "g2-standard-4",
                    "spot": True,
                    "guestAccelerators": [{"type": "nvidia-l4", "count": 1.0}],
                    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
                    "bootDiskKmsKey": key,
                    "resourceLabels": labels,
                },
            },
            **p,
        ),
        res(
            stack,
            "gcp:artifactregistry/repository:Repository",
            "images",
            {
                "location": "europe-southwest1",
                "format": "DOCKER",
                "repositoryId": "images",
                "kmsKeyName": key,
                "dockerConfig": {"immutableTags": True},
                "labels": labels,
            },
            **p,
        ),
        res(
            stack,
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            "trainer-data",
            {
                "bucket": f"eu-ml-{stack}-data",
                "role": "roles/storage.objectUser",
                "member": "serviceAccount:trainer@eu-ml-dev.iam.gserviceaccount.com",
            },
            **p,
        ),
        res(
            stack,
            "gcp:projects/iAMAuditConfig:IAMAuditConfig",
            "audit",
            {
                "project": "eu-ml-dev",
                "service": "allServices",
                "auditLogConfigs": [
                    {"logType": "ADMIN_READ"},
                    {"logType": "DATA_READ"},
                    {"logType": "DATA_WRITE"},
                ],
            },
            **p,
        ),
        res(
            stack,
            "gcp:logging/projectBucketConfig:ProjectBucketConfig",
            "audit-logs",
            {
                "project": "eu-ml-dev",
                "location": "europe-southwest1",
                "bucketId": "audit",
                "retentionDays": 400.0,
                "cmekSettings": {"kmsKeyName": key},
            },
            **p,
        ),
        res(
            stack,
            "gcp:billing/budget:Budget",
            "monthly",
            {
                "billingAccount": "000000-000000-000000",
                "amount": {"specifiedAmount": {"currencyCode": "EUR", "units": "500"}},
                "thresholdRules": [{"thresholdPercent": 0.8}],
            },
            **p,
        ),
    ]
    return {
        "stack": stack,
        "cloud": "gcp",
        "project": PROJECT,
        "environment": "dev",
        "region": "europe-southwest1",
        "resources": resources,
        "outputs": {},
    }
