"""The compliant AWS fixture stack (S3 buckets and their companions, EKS, ECR, IAM, audit and budget).

Kept apart from the GCP and Azure stacks because it is the one most mutants start from; its serving
workload comes from policy_fixtures_k8s, shared in shape with the real stacks.
"""

from __future__ import annotations

import json
from typing import Any

from policy_fixtures_base import KEY_ARN, PROJECT, TAGS, UNKNOWN, res, urn
from policy_fixtures_k8s import k8s_serving


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
            # Access entries only: the creator gets no hidden cluster-admin (k8s-cluster-admin-grants).
            "accessConfig": {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False},
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
