"""Compliant fixture stacks in the plan wire format (camelCase inputs as the mock engine receives them).

Each test mutates one resource of a compliant stack and asserts the exact violations (the
compliance-policies habit: one compliant resource, one mutant per failure mode).
"""

from __future__ import annotations

import copy
import json
from typing import Any

PROJECT = "eu-ml-platform"
TAGS = {
    "project": "eu-ml-platform",
    "environment": "dev",
    "owner": "ml-platform",
    "cost-centre": "cc-1234",
    "data-classification": "confidential",
}
KEY_ARN = "arn:aws:kms:eu-south-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


# Provider config reaches the engine JSON-encoded (as in infra's plans): "defaultTags": "{\"tags\": ...}".


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def res(stack: str, type_: str, name: str, inputs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    deps = list(extra.get("dependencies", []))
    if KEY_ARN in json.dumps(inputs):
        # KEY_ARN stands for the data-key's ARN as the engine resolves it; the engine records the edge.
        deps.append(urn(stack, "aws:kms/key:Key", "data-key"))
    return {
        "urn": urn(stack, type_, name),
        "type": type_,
        "name": name,
        "inputs": copy.deepcopy(inputs),
        "parent": extra.get("parent"),
        "dependencies": deps,
        "provider": extra.get("provider"),
    }


def tls_policy(bucket: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            ],
        }
    )


def aws_stack(stack: str = "dev", environment: str = "dev") -> dict[str, Any]:
    prov_urn = urn(stack, "pulumi:providers:aws", "aws-eu")
    prov_ref = prov_urn + "::04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    tags = {**TAGS, "environment": environment}
    p = {"provider": prov_ref}
    resources = [
        res(
            stack,
            "pulumi:providers:aws",
            "aws-eu",
            {"region": "eu-south-2", "defaultTags": json.dumps({"tags": tags})},
        ),
        res(
            stack,
            "aws:kms/key:Key",
            "data-key",
            {
                "enableKeyRotation": True,
                "rotationPeriodInDays": 90.0,
                "deletionWindowInDays": 30.0,
                "policy": json.dumps(
                    {
                        "Statement": [
                            {
                                "Sid": "Root",
                                "Effect": "Allow",
                                "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
                                "Action": "kms:*",
                                "Resource": "*",
                            }
                        ]
                    }
                ),
            },
            **p,
        ),
    ]
    for bucket in ("data", "checkpoints", "models", "access-logs"):
        b = res(
            stack,
            "aws:s3/bucket:Bucket",
            bucket,
            {"bucket": f"eu-ml-{stack}-{bucket}", "forceDestroy": False},
            **p,
        )
        resources.append(b)
        dep = {"dependencies": [b["urn"]], **p}
        resources += [
            res(
                stack,
                "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                f"{bucket}-sse",
                {
                    "bucket": f"eu-ml-{stack}-{bucket}",
                    "rules": [
                        {
                            "applyServerSideEncryptionByDefault": {
                                "sseAlgorithm": "aws:kms",
                                "kmsMasterKeyId": KEY_ARN,
                            },
                            "bucketKeyEnabled": True,
                        }
                    ],
                },
                **dep,
            ),
            res(
                stack,
                "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
                f"{bucket}-pab",
                {
                    "bucket": f"eu-ml-{stack}-{bucket}",
                    "blockPublicAcls": True,
                    "blockPublicPolicy": True,
                    "ignorePublicAcls": True,
                    "restrictPublicBuckets": True,
                },
                **dep,
            ),
            res(
                stack,
                "aws:s3/bucketVersioning:BucketVersioning",
                f"{bucket}-versioning",
                {"bucket": f"eu-ml-{stack}-{bucket}", "versioningConfiguration": {"status": "Enabled"}},
                **dep,
            ),
            res(
                stack,
                "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                f"{bucket}-lifecycle",
                {
                    "bucket": f"eu-ml-{stack}-{bucket}",
                    "rules": [
                        {
                            "id": "expire-noncurrent",
                            "status": "Enabled",
                            "noncurrentVersionExpiration": {"noncurrentDays": 30.0},
                        }
                    ],
                },
                **dep,
            ),
            res(
                stack,
                "aws:s3/bucketPolicy:BucketPolicy",
                f"{bucket}-policy",
                {"bucket": f"eu-ml-{stack}-{bucket}", "policy": tls_policy(f"eu-ml-{stack}-{bucket}")},
                **dep,
            ),
        ]
        if bucket != "access-logs":
            resources.append(
                res(
                    stack,
                    "aws:s3/bucketLogging:BucketLogging",
                    f"{bucket}-logging",
                    {
                        "bucket": f"eu-ml-{stack}-{bucket}",
                        "targetBucket": f"eu-ml-{stack}-access-logs",
                        "targetPrefix": f"{bucket}/",
                    },
                    **dep,
                )
            )
    cluster = res(
        stack,
        "aws:eks/cluster:Cluster",
        "cluster",
        {
            "roleArn": UNKNOWN,
            "vpcConfig": {
                "subnetIds": [UNKNOWN],
                "endpointPublicAccess": True,
                "endpointPrivateAccess": True,
                "publicAccessCidrs": ["203.0.113.0/24"],
            },
            "encryptionConfig": {"provider": {"keyArn": KEY_ARN}, "resources": ["secrets"]},
            "enabledClusterLogTypes": ["api", "audit", "authenticator"],
        },
        **p,
    )
    resources += [
        cluster,
        res(
            stack,
            "aws:eks/addon:Addon",
            "vpc-cni",
            {
                "clusterName": UNKNOWN,
                "addonName": "vpc-cni",
                "configurationValues": json.dumps({"enableNetworkPolicy": "true"}),
            },
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "aws:ec2/launchTemplate:LaunchTemplate",
            "gpu-lt",
            {
                "blockDeviceMappings": [
                    {
                        "deviceName": "/dev/xvda",
                        "ebs": {"encrypted": "true", "kmsKeyId": KEY_ARN, "volumeSize": 200.0},
                    }
                ]
            },
            **p,
        ),
        res(
            stack,
            "aws:eks/nodeGroup:NodeGroup",
            "gpu-spot",
            {
                "clusterName": UNKNOWN,
                "capacityType": "SPOT",
                "instanceTypes": ["g5.xlarge", "g6.xlarge"],
                "amiType": "AL2023_x86_64_NVIDIA",
                "scalingConfig": {
                    "minSize": 0.0 if environment != "prod" else 1.0,
                    "maxSize": 4.0,
                    "desiredSize": 0.0,
                },
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
                "launchTemplate": {"id": UNKNOWN, "version": "$Latest"},
            },
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "aws:ecr/repository:Repository",
            "serving",
            {
                "imageTagMutability": "IMMUTABLE",
                "imageScanningConfiguration": {"scanOnPush": True},
                "encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": KEY_ARN}],
            },
            **p,
        ),
        res(
            stack,
            "aws:iam/policy:Policy",
            "training-data-access",
            {
                "policy": json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": ["s3:GetObject", "s3:PutObject"],
                                "Resource": [f"arn:aws:s3:::eu-ml-{stack}-data/*"],
                            },
                            {"Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
                        ],
                    }
                )
            },
            **p,
        ),
        res(
            stack,
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            "node-worker",
            {"role": UNKNOWN, "policyArn": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"},
            **p,
        ),
        res(
            stack,
            "aws:cloudwatch/logGroup:LogGroup",
            "cluster-logs",
            {"retentionInDays": 365.0, "kmsKeyId": KEY_ARN},
            **p,
        ),
        res(
            stack,
            "aws:cloudtrail/trail:Trail",
            "trail",
            {
                "s3BucketName": f"eu-ml-{stack}-access-logs",
                "isMultiRegionTrail": True,
                "enableLogFileValidation": True,
                "kmsKeyId": KEY_ARN,
            },
            **p,
        ),
        res(
            stack,
            "aws:budgets/budget:Budget",
            "monthly",
            {
                "budgetType": "COST",
                "limitAmount": "500",
                "limitUnit": "USD",
                "timeUnit": "MONTHLY",
                "notifications": [
                    {
                        "comparisonOperator": "GREATER_THAN",
                        "threshold": 80.0,
                        "thresholdType": "PERCENTAGE",
                        "notificationType": "FORECASTED",
                        "subscriberEmailAddresses": ["ml@example.eu"],
                    }
                ],
            },
            **p,
        ),
    ]
    resources += k8s_serving(stack, environment)
    return {
        "stack": stack,
        "cloud": "aws",
        "project": PROJECT,
        "environment": environment,
        "region": "eu-south-2",
        "resources": resources,
        "outputs": {},
    }


def k8s_serving(stack: str, environment: str) -> list[dict[str, Any]]:
    labels = {"app": "sentiment"}
    image = "registry.example.eu/serving:0.1.0-abc1234" + (
        "@sha256:" + "a" * 64 if environment == "prod" else ""
    )
    container = {
        "name": "triton",
        "image": image,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000.0,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
        },
        "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
        "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": 8000.0}},
        "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": 8000.0}},
    }
    dep = res(
        stack,
        "kubernetes:apps/v1:Deployment",
        "sentiment",
        {
            "metadata": {
                "name": "sentiment",
                "namespace": "serving",
                "labels": {**labels, "environment": environment},
            },
            "spec": {
                "replicas": 2.0,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
    )
    return [
        dep,
        res(
            stack,
            "kubernetes:autoscaling/v2:HorizontalPodAutoscaler",
            "sentiment",
            {
                "metadata": {"name": "sentiment", "namespace": "serving"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "sentiment"},
                    "minReplicas": 2.0,
                    "maxReplicas": 6.0,
                },
            },
        ),
        res(
            stack,
            "kubernetes:policy/v1:PodDisruptionBudget",
            "sentiment",
            {
                "metadata": {"name": "sentiment", "namespace": "serving"},
                "spec": {"minAvailable": 1.0, "selector": {"matchLabels": labels}},
            },
        ),
        res(
            stack,
            "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "serving-default-deny",
            {
                "metadata": {"name": "default-deny", "namespace": "serving"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
            },
        ),
        res(
            stack,
            "kubernetes:core/v1:Secret",
            "alertmanager-config",
            {
                "metadata": {
                    "name": "alertmanager-config",
                    "namespace": "monitoring",
                    # infra's contract (issue 13): receiver names and whether a pager is configured.
                    "annotations": {
                        "platform.eu-ml/alert-receivers": "email,pagerduty"
                        if environment == "prod"
                        else "email",
                        "platform.eu-ml/paging": "true" if environment == "prod" else "false",
                    },
                },
                "stringData": {
                    "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                    "value": "[secret]",
                },
            },
        ),
    ]


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


def azure_stack(stack: str = "azure-dev") -> dict[str, Any]:
    prov_urn = urn(stack, "pulumi:providers:azure-native", "azure-eu")
    p = {"provider": prov_urn + "::" + UNKNOWN}
    tags = dict(TAGS)
    rg = res(
        stack, "azure-native:resources:ResourceGroup", "rg", {"location": "spaincentral", "tags": tags}, **p
    )
    account = res(
        stack,
        "azure-native:storage:StorageAccount",
        "data",
        {
            "accountName": "eumldevdata",
            "resourceGroupName": UNKNOWN,
            "location": "spaincentral",
            "kind": "StorageV2",
            "sku": {"name": "Standard_ZRS"},
            "allowBlobPublicAccess": False,
            "publicNetworkAccess": "Disabled",
            "minimumTlsVersion": "TLS1_2",
            "enableHttpsTrafficOnly": True,
            "encryption": {
                "keySource": "Microsoft.Keyvault",
                "keyVaultProperties": {"keyName": "data", "keyVaultUri": "https://kv.vault.azure.net"},
            },
            "tags": tags,
        },
        dependencies=[rg["urn"]],
        **p,
    )
    cluster = res(
        stack,
        "azure-native:containerservice:ManagedCluster",
        "cluster",
        {
            "resourceGroupName": UNKNOWN,
            "location": "spaincentral",
            "apiServerAccessProfile": {"authorizedIPRanges": ["203.0.113.0/24"]},
            "diskEncryptionSetID": UNKNOWN,
            "securityProfile": {"azureKeyVaultKms": {"enabled": True, "keyId": UNKNOWN}},
            "networkProfile": {"networkPlugin": "azure", "networkPolicy": "cilium"},
            "tags": tags,
        },
        # The key references come from the stack's key vault key (unknown at preview, the edge is known).
        dependencies=[rg["urn"], urn(stack, "azure-native:keyvault:Key", "data")],
        **p,
    )
    resources = [
        res(stack, "pulumi:providers:azure-native", "azure-eu", {"location": "spaincentral"}),
        rg,
        account,
        res(
            stack,
            "azure-native:storage:BlobServiceProperties",
            "data-blob",
            {"accountName": "eumldevdata", "resourceGroupName": UNKNOWN, "isVersioningEnabled": True},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:storage:ManagementPolicy",
            "data-lifecycle",
            {"accountName": "eumldevdata", "resourceGroupName": UNKNOWN, "policy": {"rules": []}},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:storage:BlobContainer",
            "checkpoints",
            {"accountName": "eumldevdata", "containerName": "checkpoints", "publicAccess": "None"},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:monitor:DiagnosticSetting",
            "data-diag",
            {"resourceUri": UNKNOWN, "logs": [{"categoryGroup": "allLogs", "enabled": True}]},
            dependencies=[account["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:keyvault:Vault",
            "kv",
            {
                "location": "spaincentral",
                "resourceGroupName": UNKNOWN,
                "properties": {
                    "enablePurgeProtection": True,
                    "enableSoftDelete": True,
                    "publicNetworkAccess": "Disabled",
                },
                "tags": tags,
            },
            **p,
        ),
        res(
            stack,
            "azure-native:keyvault:Key",
            "data",
            {
                "properties": {
                    "rotationPolicy": {
                        "lifetimeActions": [
                            {"action": {"type": "rotate"}, "trigger": {"timeAfterCreate": "P90D"}}
                        ]
                    }
                }
            },
            **p,
        ),
        cluster,
        res(
            stack,
            "azure-native:monitor:DiagnosticSetting",
            "cluster-audit",
            {"resourceUri": UNKNOWN, "logs": [{"category": "kube-audit-admin", "enabled": True}]},
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:containerservice:AgentPool",
            "gpuspot",
            {
                "vmSize": "Standard_NC4as_T4_v3",
                "scaleSetPriority": "Spot",
                "enableAutoScaling": True,
                "minCount": 0.0,
                "maxCount": 4.0,
                "nodeTaints": ["nvidia.com/gpu=true:NoSchedule"],
                "tags": tags,
            },
            dependencies=[cluster["urn"]],
            **p,
        ),
        res(
            stack,
            "azure-native:containerregistry:Registry",
            "acr",
            {
                "location": "spaincentral",
                "sku": {"name": "Premium"},
                "adminUserEnabled": False,
                "anonymousPullEnabled": False,
                "publicNetworkAccess": "Disabled",
                "encryption": {"status": "enabled", "keyVaultProperties": {"keyIdentifier": UNKNOWN}},
                "tags": tags,
            },
            dependencies=[urn(stack, "azure-native:keyvault:Key", "data")],
            **p,
        ),
        res(
            stack,
            "azure-native:authorization:RoleAssignment",
            "acr-pull",
            {
                "principalId": UNKNOWN,
                "roleDefinitionId": "/subscriptions/0000/providers/Microsoft.Authorization/roleDefinitions/7f951dda-4ed3-4680-a7ca-43fe172d538d",
                "scope": UNKNOWN,
            },
            **p,
        ),
        res(
            stack,
            "azure-native:operationalinsights:Workspace",
            "logs",
            {"location": "spaincentral", "retentionInDays": 365.0, "tags": tags},
            **p,
        ),
        res(
            stack,
            "azure-native:consumption:Budget",
            "monthly",
            {
                "scope": "/subscriptions/0000",
                "amount": 500.0,
                "category": "Cost",
                "timeGrain": "Monthly",
                "notifications": {
                    "actual80": {
                        "enabled": True,
                        "operator": "GreaterThan",
                        "threshold": 80.0,
                        "contactEmails": ["ml@example.eu"],
                    }
                },
            },
            **p,
        ),
    ]
    return {
        "stack": stack,
        "cloud": "azure",
        "project": PROJECT,
        "environment": "dev",
        "region": "spaincentral",
        "resources": resources,
        "outputs": {},
    }


def find(plan: dict[str, Any], type_: str, name: str) -> dict[str, Any]:
    return next(r for r in plan["resources"] if r["type"] == type_ and r["name"] == name)


def clone(plan: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(plan)
