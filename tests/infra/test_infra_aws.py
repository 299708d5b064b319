"""AWS stacks (dev, staging, prod): buckets, identities, cluster, spot GPU pool, registry, audit, budget."""

from __future__ import annotations

import json

import pytest
from infra_fixtures import Plan

from infra import plan as planner
from infra.aws.cluster import CONTROL_PLANE_LOGS
from infra.config import EU_REGIONS
from infra.naming import global_name
from infra.shape import BUCKETS, GPU_TAINT_KEY, POOL_LABEL, SERVICE_ACCOUNTS

AWS = ("dev", "staging", "prod")
S3 = "aws:s3/bucket:Bucket"


def sub(p: Plan, token: str, bucket: dict) -> dict:
    """The configuration resource of `token` that belongs to `bucket` (same SecureBucket parent)."""
    (found,) = [r for r in p.of_type(token) if r["parent"] == bucket["parent"]]
    return found["inputs"]


@pytest.mark.parametrize("stack", AWS)
def test_every_bucket_is_private_versioned_encrypted_logged_and_in_the_eu(
    plans: dict[str, Plan], stack: str
) -> None:
    p, cfg = plans[stack], planner.load_stack(stack)
    buckets = p.of_type(S3)
    assert sorted(b["inputs"]["bucket"] for b in buckets) == sorted(global_name(cfg, x) for x in BUCKETS)
    (provider,) = p.of_type("pulumi:providers:aws")
    assert provider["inputs"]["region"] in EU_REGIONS["aws"]
    for b in buckets:
        purpose = b["inputs"]["bucket"].rsplit("-", 1)[1]
        assert b["provider"].startswith(provider["urn"] + "::")  # region comes from this provider
        assert sub(p, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", b) == {
            "bucket": planner.UNKNOWN,
            "blockPublicAcls": True,
            "blockPublicPolicy": True,
            "ignorePublicAcls": True,
            "restrictPublicBuckets": True,
        }
        assert sub(p, "aws:s3/bucketVersioning:BucketVersioning", b)["versioningConfiguration"] == {
            "status": "Enabled"
        }
        (rule,) = sub(
            p, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", b
        )["rules"]
        assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
        statements = json.loads(sub(p, "aws:s3/bucketPolicy:BucketPolicy", b)["policy"])["Statement"]
        arn = f"arn:aws:s3:::{b['inputs']['bucket']}"
        assert {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [arn, f"{arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        } in statements
        rules = {
            r["id"]: r
            for r in sub(p, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", b)["rules"]
        }
        assert rules["abort-incomplete-multipart"]["abortIncompleteMultipartUpload"] == {
            "daysAfterInitiation": 7.0
        }
        assert (
            rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"]["noncurrentDays"]
            == cfg.noncurrent_version_expiry_days
        )
        if purpose == "checkpoints":
            assert rules["expire-old-checkpoints"]["expiration"] == {
                "days": float(cfg.checkpoint_expiry_days)
            }
        if purpose != "logs":
            logging = sub(p, "aws:s3/bucketLogging:BucketLogging", b)
            assert logging["targetBucket"] == global_name(cfg, "logs")
        assert b["inputs"]["forceDestroy"] is (not cfg.is_prod and purpose not in ("logs", "models"))
        assert b["protect"] is cfg.is_prod


def test_buckets_use_the_environment_key(updates: dict[str, Plan]) -> None:
    p = updates["dev"]
    key_arn = f"arn:mock:aws:kms/key:Key:{p.one('aws:kms/key:Key')['name']}"
    configs = p.of_type(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    assert len(configs) == 5
    for c in configs:
        (rule,) = c["inputs"]["rules"]
        assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == key_arn
        assert rule["bucketKeyEnabled"] is True
    for token in ("aws:cloudtrail/trail:Trail", "aws:cloudwatch/logGroup:LogGroup"):
        assert p.one(token)["inputs"]["kmsKeyId"] == key_arn
    (ecr,) = {
        r["inputs"]["encryptionConfigurations"][0]["kmsKey"]
        for r in p.of_type("aws:ecr/repository:Repository")
    }
    assert ecr == key_arn
    templates = p.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == 3  # one per node group, so every node's root volume uses the key
    for t in templates:
        (mapping,) = t["inputs"]["blockDeviceMappings"]
        assert (mapping["ebs"]["encrypted"], mapping["ebs"]["kmsKeyId"]) == ("true", key_arn)
        assert t["inputs"]["metadataOptions"]["httpTokens"] == "required"
    for group in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert group["inputs"]["launchTemplate"]["id"] in {f"{t['name']}-id" for t in templates}
        assert "diskSize" not in group["inputs"]  # would bypass the template's encrypted volume
    assert p.one("aws:eks/cluster:Cluster")["inputs"]["encryptionConfig"] == {
        "resources": ["secrets"],
        "provider": {"keyArn": key_arn},
    }


def test_at_preview_the_key_reference_is_unknown_but_the_dependency_is_declared(
    plans: dict[str, Plan],
) -> None:
    p = plans["dev"]
    key = p.one("aws:kms/key:Key")
    for c in p.of_type(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ):
        (rule,) = c["inputs"]["rules"]
        assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == planner.UNKNOWN
        assert key["urn"] in c["dependencies"]


def test_identity_policies_grant_exactly_the_access_table(updates: dict[str, Plan]) -> None:
    p = updates["dev"]
    key_arn = f"arn:mock:aws:kms/key:Key:{p.one('aws:kms/key:Key')['name']}"

    def policy(name: str) -> list[dict]:
        return json.loads(p.named(name)["inputs"]["policy"])["Statement"]

    assert policy("mlp-dev-identities-server-access") == [
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
        # Inference records and the opt-in raw sample: write-only, under their prefixes of the logs bucket.
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
    assert policy("mlp-dev-identities-server-key") == [
        {
            "Sid": "EnvironmentKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": [key_arn],
        }
    ]
    repos = [f"arn:aws:ecr:eu-south-2:123456789012:repository/mlp-dev/{i}" for i in ("serving", "training")]
    ci = policy("mlp-dev-identities-ci-deployer-access")
    assert ci[0] == {
        "Sid": "EcrLogin",
        "Effect": "Allow",
        "Action": ["ecr:GetAuthorizationToken"],
        "Resource": ["*"],
    }
    assert (ci[1]["Sid"], ci[1]["Resource"]) == ("EcrPush", repos) and len(ci) == 2
    assert not [
        r for r in p.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"].endswith("ci-deployer-key")
    ]
    trainer_buckets = {
        r.split(":::")[1].split("/")[0]
        for s in policy("mlp-dev-identities-trainer-access")
        if s["Sid"] not in ("EcrLogin", "EcrPull")  # its image read: tests/infra/test_infra_image_pull.py
        for r in s["Resource"]
    }
    assert trainer_buckets == {f"acme-mlp-dev-{b}" for b in ("raw", "splits", "checkpoints", "models")}
    for identity in ("trainer", "server", "ci-deployer"):
        trust = json.loads(
            p.named(f"mlp-dev-identities-{identity}", "aws:iam/role:Role")["inputs"]["assumeRolePolicy"]
        )
        assert trust["Statement"] == [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
            }
        ]
        binding = p.named(f"mlp-dev-identities-{identity}-binding")["inputs"]
        sa = SERVICE_ACCOUNTS[identity]
        assert (binding["namespace"], binding["serviceAccount"], binding["clusterName"]) == (
            sa.namespace,
            sa.name,
            "mlp-dev",
        )
        assert binding["roleArn"] == f"arn:mock:aws:iam/role:Role:mlp-dev-identities-{identity}"


@pytest.mark.parametrize("stack", AWS)
def test_spot_gpu_pool_scales_from_zero_with_taint_and_autoscaler_tags(
    plans: dict[str, Plan], stack: str
) -> None:
    p, cfg = plans[stack], planner.load_stack(stack)
    gpu = p.one("aws:eks/nodeGroup:NodeGroup", "-gpu")["inputs"]
    assert gpu["capacityType"] == "SPOT"
    assert gpu["amiType"] == "AL2023_x86_64_NVIDIA"
    assert len(gpu["instanceTypes"]) >= 2
    assert (
        gpu["scalingConfig"]["minSize"] == 0.0
        and gpu["scalingConfig"]["maxSize"] == cfg.cluster.gpu_pool.max_nodes
    )
    assert gpu["taints"] == [{"key": GPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}]
    assert gpu["labels"] == {POOL_LABEL: "gpu"}
    tags = {
        t["inputs"]["tag"]["key"]: t["inputs"]["tag"]["value"] for t in p.of_type("aws:autoscaling/tag:Tag")
    }
    prefix = "k8s.io/cluster-autoscaler/node-template"
    assert tags[f"{prefix}/taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert tags[f"{prefix}/resources/nvidia.com/gpu"] == str(cfg.cluster.gpu_pool.gpus_per_node)
    assert tags[f"{prefix}/label/{POOL_LABEL}"] == "gpu"
    # EKS writes these two on a managed node group's ASG itself; a Pulumi Tag would take them over and
    # delete them on destroy or replacement.
    assert not set(tags) & {"k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cfg.name}"}
    assert not [k for k in tags if k.startswith(("eks:", "kubernetes.io/cluster/", "aws:"))]
    releases = {r["inputs"]["chart"]: r["inputs"] for r in p.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["aws-node-termination-handler"]["values"]["enableSpotInterruptionDraining"] is True
    assert releases["cluster-autoscaler"]["values"]["autoDiscovery"] == {"clusterName": cfg.name}
    # Kubernetes 1.33 -> cluster-autoscaler 1.33 (the autoscaler README: chart 9.47.0+ for 1.33).
    assert releases["cluster-autoscaler"]["version"] == "9.47.0"
    assert releases["cluster-autoscaler"]["values"]["image"]["tag"].startswith("v1.33.")
    system = p.one("aws:eks/nodeGroup:NodeGroup", "-system")["inputs"]
    assert system["capacityType"] == "ON_DEMAND"
    serving = p.one("aws:eks/nodeGroup:NodeGroup", "-serving")["inputs"]
    assert serving["capacityType"] == ("ON_DEMAND" if cfg.is_prod else "SPOT")


@pytest.mark.parametrize("stack", AWS)
def test_cluster_is_private_audited_restricted_and_enforces_network_policy(
    plans: dict[str, Plan], stack: str
) -> None:
    p, cfg = plans[stack], planner.load_stack(stack)
    cluster = p.one("aws:eks/cluster:Cluster")
    vpc = cluster["inputs"]["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["publicAccessCidrs"] == list(cfg.network.api_allowed_cidrs)
    assert "0.0.0.0/0" not in vpc["publicAccessCidrs"]
    assert cluster["inputs"]["enabledClusterLogTypes"] == CONTROL_PLANE_LOGS
    assert cluster["inputs"].get("deletionProtection", False) is cfg.is_prod
    cni = p.one("aws:eks/addon:Addon", "-vpc-cni")["inputs"]
    assert json.loads(cni["configurationValues"]) == {"enableNetworkPolicy": "true"}
    # EKS installs vpc-cni on every new cluster: the add-on's create must overwrite, or it conflicts.
    assert (cni["resolveConflictsOnCreate"], cni["resolveConflictsOnUpdate"]) == ("OVERWRITE", "OVERWRITE")
    log_group = p.one("aws:cloudwatch/logGroup:LogGroup")["inputs"]
    assert log_group["retentionInDays"] >= 365
    # Nodes live only in private subnets: node subnets route 0.0.0.0/0 to a NAT gateway, not the IGW.
    private = [r for r in p.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r["name"]]
    assert private and all("natGatewayId" in r["inputs"]["routes"][0] for r in private)
    nats = p.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == (cfg.network.availability_zones if cfg.is_prod else 1)


@pytest.mark.parametrize("stack", AWS)
def test_registry_trail_and_budget(plans: dict[str, Plan], stack: str) -> None:
    p, cfg = plans[stack], planner.load_stack(stack)
    repos = p.of_type("aws:ecr/repository:Repository")
    assert sorted(r["inputs"]["name"] for r in repos) == [f"mlp-{stack}/serving", f"mlp-{stack}/training"]
    for r in repos:
        assert r["inputs"]["imageTagMutability"] == "IMMUTABLE"
        assert r["inputs"]["imageScanningConfiguration"] == {"scanOnPush": True}
        assert r["inputs"]["encryptionConfigurations"][0]["encryptionType"] == "KMS"
    trail = p.one("aws:cloudtrail/trail:Trail")["inputs"]
    assert (trail["isMultiRegionTrail"], trail["enableLogFileValidation"]) == (True, True)
    assert trail["s3BucketName"] == global_name(cfg, "logs")
    budget = p.one("aws:budgets/budget:Budget")["inputs"]
    assert float(budget["limitAmount"]) == cfg.budget.monthly_amount
    assert budget["timeUnit"] == "MONTHLY"
    actual = sorted(n["threshold"] for n in budget["notifications"] if n["notificationType"] == "ACTUAL")
    assert actual == [float(t) for t in cfg.budget.alert_thresholds]
    key = p.one("aws:kms/key:Key")["inputs"]
    statements = {s["Sid"]: s for s in json.loads(key["policy"])["Statement"]}
    slr = "arn:aws:iam::123456789012:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    assert statements["AutoScalingEncryptsNodeVolumes"]["Principal"] == {"AWS": slr}
    assert statements["AccountAdministersThroughIam"]["Principal"] == {
        "AWS": "arn:aws:iam::123456789012:root"
    }
    assert statements["CloudTrailEncryptsLogs"]["Condition"]["StringEquals"] == {
        "aws:SourceArn": f"arn:aws:cloudtrail:eu-south-2:123456789012:trail/mlp-{stack}-audit"
    }


@pytest.mark.parametrize("stack", AWS)
def test_key_is_created_after_the_autoscaling_role_its_policy_names(
    plans: dict[str, Plan], stack: str
) -> None:
    """KMS refuses a policy naming a principal that does not exist: on a fresh account, no Auto Scaling
    group has created AWSServiceRoleForAutoScaling yet, so the stack declares it and orders the key after."""
    p = plans[stack]
    role = p.one("aws:iam/serviceLinkedRole:ServiceLinkedRole")
    assert role["inputs"]["awsServiceName"] == "autoscaling.amazonaws.com"
    assert role["retainOnDelete"] is True  # account-wide: other stacks use it
    assert role["urn"] in p.one("aws:kms/key:Key")["dependencies"]


def test_an_account_that_has_the_role_declares_none(plans: dict[str, Plan]) -> None:
    cfg = planner.load_stack("dev")
    cfg = cfg.model_copy(
        update={"aws": cfg.aws.model_copy(update={"auto_scaling_service_linked_role": "existing"})}  # type: ignore[union-attr]
    )
    p = Plan(planner.run(cfg, planner.stack_config("dev")))
    assert p.of_type("aws:iam/serviceLinkedRole:ServiceLinkedRole") == []
    assert (
        p.one("aws:kms/key:Key")["inputs"]["policy"]
        == plans["dev"].one("aws:kms/key:Key")["inputs"]["policy"]
    )


@pytest.mark.parametrize("stack", AWS)
def test_cluster_admins_are_the_configured_roles_and_the_provider_waits_for_them(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    cluster = p.one("aws:eks/cluster:Cluster")
    # No implicit creator entry: it would collide with the deployer's entry (one per principal).
    assert cluster["inputs"]["accessConfig"] == {
        "authenticationMode": "API",
        "bootstrapClusterCreatorAdminPermissions": False,
    }
    entries = {r["inputs"]["principalArn"] for r in p.of_type("aws:eks/accessEntry:AccessEntry")}
    admins = {
        (r["inputs"]["principalArn"], r["inputs"]["policyArn"], r["inputs"]["accessScope"]["type"])
        for r in p.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    roles = {
        "arn:aws:iam::123456789012:role/mlp-platform-admin",
        "arn:aws:iam::123456789012:role/mlp-ci-deployer",
    }
    assert entries == roles
    policy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert admins == {(r, policy, "cluster") for r in roles}
    (k8s,) = p.of_type("pulumi:providers:kubernetes")
    for assoc in p.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation"):
        assert assoc["urn"] in k8s["dependencies"]
