"""Mutants for the exposure classes of issue 12 (network, IAM, key references), per cloud.

Each case: (id, compliant fixture, mutation, exact expected (rule, resource name) set). An expected
name ending in "?" means the finding is "undetermined" (the rule could not decide at preview).
test_policy_rules.py runs them with its own CASES.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import policy_fixtures as fx

Plan = dict[str, Any]
Case = tuple[str, Callable[[], Plan], Callable[[Plan], None], set[tuple[str, str | None]]]


def add(type_: str, name: str, inputs: dict[str, Any], **extra: Any) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        # Like the fixture's own resources: the cloud's explicit provider (default tags, region).
        pkg = type_.split(":", 1)[0]
        prov = next((r for r in plan["resources"] if r["type"] == f"pulumi:providers:{pkg}"), None)
        if prov is not None:
            extra.setdefault("provider", prov["urn"] + "::" + fx.UNKNOWN)
        plan["resources"].append(fx.res(plan["stack"], type_, name, inputs, **extra))

    return mutate


def edit(type_: str, name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Plan], None]:
    def mutate(plan: Plan) -> None:
        change(fx.find(plan, type_, name)["inputs"])

    return mutate


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


SG = "aws:ec2/securityGroup:SecurityGroup"
OPEN_SSH = {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}
PRIVATE_SSH = {**OPEN_SSH, "cidrBlocks": ["10.0.0.0/8"]}
NSG_RULE = {"direction": "Inbound", "access": "Allow", "protocol": "Tcp", "destinationPortRange": "443"}
SVC = "kubernetes:core/v1:Service"


def svc(kind: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "triton-lb", "namespace": "serving"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"type": kind, "ports": [{"port": 8000.0}]},
    }


def _no_private_nodes(i: dict[str, Any]) -> None:
    i["privateClusterConfig"]["enablePrivateNodes"] = False


def _aks_public_pool(i: dict[str, Any]) -> None:
    i["agentPoolProfiles"] = [{"name": "system", "mode": "System", "enableNodePublicIP": True}]


def _aws_managed_key(i: dict[str, Any]) -> None:
    i["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] = "alias/aws/s3"


SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"

CASES: list[Case] = [
    # network exposure: AWS
    (
        "aws-sg-open-ssh",
        fx.aws_stack,
        add(SG, "nodes-sg", {"ingress": [OPEN_SSH]}),
        {("network-no-open-ingress", "nodes-sg")},
    ),
    ("aws-sg-private-ok", fx.aws_stack, add(SG, "nodes-sg", {"ingress": [PRIVATE_SSH]}), set()),
    (
        "aws-sg-unknown-cidr",
        fx.aws_stack,
        add(SG, "nodes-sg", {"ingress": [{**OPEN_SSH, "cidrBlocks": [fx.UNKNOWN]}]}),
        {("network-no-open-ingress", "nodes-sg?")},
    ),
    (
        "aws-sg-rule-ipv6",
        fx.aws_stack,
        add(
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            "https-in",
            {
                "type": "ingress",
                "fromPort": 443.0,
                "toPort": 443.0,
                "protocol": "tcp",
                "ipv6CidrBlocks": ["::/0"],
            },
        ),
        {("network-no-open-ingress", "https-in")},
    ),
    (
        "aws-sg-egress-ok",
        fx.aws_stack,
        add(
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            "all-out",
            {"type": "egress", "fromPort": 0.0, "toPort": 0.0, "protocol": "-1", "cidrBlocks": ["0.0.0.0/0"]},
        ),
        set(),
    ),
    (
        "aws-vpc-ingress-rule",
        fx.aws_stack,
        add(
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "api-in",
            {"cidrIpv4": "0.0.0.0/0", "fromPort": 443.0, "toPort": 443.0, "ipProtocol": "tcp"},
        ),
        {("network-no-open-ingress", "api-in")},
    ),
    # network exposure: GCP
    (
        "gcp-firewall-open",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "allow-ssh",
            {
                "network": fx.UNKNOWN,
                "allows": [{"protocol": "tcp", "ports": ["22"]}],
                "sourceRanges": ["0.0.0.0/0"],
            },
        ),
        {("network-no-open-ingress", "allow-ssh")},
    ),
    (
        "gcp-firewall-iap-ok",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "allow-ssh",
            {
                "network": fx.UNKNOWN,
                "allows": [{"protocol": "tcp", "ports": ["22"]}],
                "sourceRanges": ["35.235.240.0/20"],
            },
        ),
        set(),
    ),
    (
        "gcp-firewall-deny-ok",
        fx.gcp_stack,
        add(
            "gcp:compute/firewall:Firewall",
            "deny-all",
            {"network": fx.UNKNOWN, "denies": [{"protocol": "all"}], "sourceRanges": ["0.0.0.0/0"]},
        ),
        set(),
    ),
    # network exposure: Azure
    (
        "azure-nsg-internet",
        fx.azure_stack,
        add(
            "azure-native:network:NetworkSecurityGroup",
            "nodes-nsg",
            {
                "location": "spaincentral",
                "securityRules": [{"name": "https", **NSG_RULE, "sourceAddressPrefix": "Internet"}],
            },
        ),
        {("network-no-open-ingress", "nodes-nsg")},
    ),
    (
        "azure-security-rule-star",
        fx.azure_stack,
        add(
            "azure-native:network:SecurityRule",
            "https",
            {**NSG_RULE, "sourceAddressPrefixes": ["10.0.0.0/8", "*"]},
        ),
        {("network-no-open-ingress", "https")},
    ),
    (
        "azure-security-rule-vnet-ok",
        fx.azure_stack,
        add(
            "azure-native:network:SecurityRule",
            "https",
            {**NSG_RULE, "sourceAddressPrefix": "VirtualNetwork"},
        ),
        set(),
    ),
    # Kubernetes exposure (same rule on every cloud's cluster)
    (
        "k8s-lb-public",
        fx.aws_stack,
        add(SVC, "triton-lb", svc("LoadBalancer")),
        {("k8s-no-public-service", "triton-lb")},
    ),
    (
        "k8s-nodeport",
        fx.gcp_stack,
        add(SVC, "triton-lb", svc("NodePort")),
        {("k8s-no-public-service", "triton-lb")},
    ),
    (
        "k8s-lb-internal-ok",
        fx.aws_stack,
        add(
            SVC,
            "triton-lb",
            svc("LoadBalancer", {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}),
        ),
        set(),
    ),
    (
        "k8s-lb-internal-azure-ok",
        fx.azure_stack,
        add(
            SVC,
            "triton-lb",
            svc("LoadBalancer", {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}),
        ),
        set(),
    ),
    (
        "k8s-ingress-public",
        fx.aws_stack,
        add(
            "kubernetes:networking.k8s.io/v1:Ingress",
            "triton-ing",
            {"metadata": {"name": "triton"}, "spec": {"rules": []}},
        ),
        {("k8s-no-public-service", "triton-ing")},
    ),
    ("k8s-clusterip-ok", fx.aws_stack, add(SVC, "triton-lb", svc("ClusterIP")), set()),
    # public node IPs
    (
        "aws-lt-public-ip",
        fx.aws_stack,
        add(
            "aws:ec2/launchTemplate:LaunchTemplate",
            "bastion-lt",
            {"networkInterfaces": [{"associatePublicIpAddress": "true"}]},
        ),
        {("node-no-public-ip", "bastion-lt")},
    ),
    (
        "gcp-public-nodes",
        fx.gcp_stack,
        edit("gcp:container/cluster:Cluster", "cluster", _no_private_nodes),
        {("node-no-public-ip", "cluster")},
    ),
    (
        "azure-inline-pool-public-ip",
        fx.azure_stack,
        edit("azure-native:containerservice:ManagedCluster", "cluster", _aks_public_pool),
        {("node-no-public-ip", "cluster")},
    ),
    # IAM classes
    (
        "aws-trust-anyone",
        fx.aws_stack,
        add(
            "aws:iam/role:Role",
            "open-role",
            {
                "assumeRolePolicy": doc(
                    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
                )
            },
        ),
        {("iam-no-public-principal", "open-role")},
    ),
    (
        "aws-trust-pinned-ok",
        fx.aws_stack,
        add(
            "aws:iam/role:Role",
            "ci-role",
            {
                "assumeRolePolicy": doc(
                    {
                        "Effect": "Allow",
                        "Principal": {
                            "Federated": "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com"
                        },
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Condition": {
                            "StringEquals": {
                                "token.actions.githubusercontent.com:sub": "repo:acme/ml:ref:refs/heads/main",
                                "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
                            }
                        },
                    }
                )
            },
        ),
        set(),
    ),
    (
        "aws-sqs-policy-anyone",
        fx.aws_stack,
        add(
            "aws:sqs/queuePolicy:QueuePolicy",
            "events-policy",
            {
                "queueUrl": "https://sqs/q",
                "policy": doc(
                    {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}
                ),
            },
        ),
        {("iam-no-public-principal", "events-policy")},
    ),
    (
        "aws-partial-wildcard",
        fx.aws_stack,
        add(
            "aws:iam/policy:Policy",
            "writer",
            {
                "policy": doc(
                    {"Effect": "Allow", "Action": ["s3:Put*", "iam:*Role*"], "Resource": "arn:aws:s3:::b/*"}
                )
            },
        ),
        {("iam-no-wildcards", "writer")},
    ),
    (
        "aws-not-resource",
        fx.aws_stack,
        add(
            "aws:iam/policy:Policy",
            "reader",
            {
                "policy": doc(
                    {"Effect": "Allow", "Action": ["s3:GetObject"], "NotResource": "arn:aws:s3:::secret/*"}
                )
            },
        ),
        {("iam-no-wildcards", "reader")},
    ),
    (
        "aws-policy-unknown",
        fx.aws_stack,
        add("aws:iam/policy:Policy", "late", {"policy": fx.UNKNOWN}),
        {("iam-no-wildcards", "late?")},
    ),
    (
        "gcp-primitive-role-bucket-scope",
        fx.gcp_stack,
        add(
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            "editor",
            {
                "bucket": "models",
                "role": "roles/editor",
                "member": "serviceAccount:x@p.iam.gserviceaccount.com",
            },
        ),
        {("iam-no-admin", "editor")},
    ),
    (
        "gcp-all-users-project",
        fx.gcp_stack,
        add(
            "gcp:projects/iAMMember:IAMMember",
            "public",
            {"project": "p", "role": "roles/storage.objectViewer", "member": "allUsers"},
        ),
        {("gcp-no-public-iam-members", "public")},
    ),
    (
        "azure-contributor-resource-group",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "trainer-contrib",
            {
                "principalId": "00000000-0000-0000-0000-000000000001",
                "principalType": "ServicePrincipal",
                "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c",
                "scope": "/subscriptions/s/resourceGroups/ml",
            },
        ),
        {("iam-no-admin", "trainer-contrib")},
    ),
    # CMK references
    (
        "aws-managed-alias",
        fx.aws_stack,
        edit(SSE, "data-sse", _aws_managed_key),
        {("cmk-key-reference", "data-sse")},
    ),
    (
        "aws-undeclared-key",
        fx.aws_stack,
        add(
            "aws:cloudwatch/logGroup:LogGroup",
            "extra-logs",
            {"retentionInDays": 365.0, "kmsKeyId": "arn:aws:kms:eu-south-2:999999999999:key/other"},
        ),
        {("cmk-key-reference", "extra-logs")},
    ),
    (
        "aws-unknown-key-no-edge",
        fx.aws_stack,
        add(
            "aws:cloudwatch/logGroup:LogGroup",
            "extra-logs",
            {"retentionInDays": 365.0, "kmsKeyId": fx.UNKNOWN},
        ),
        {("cmk-key-reference", "extra-logs?")},
    ),
    (
        "gcp-key-of-another-project",
        fx.gcp_stack,
        edit(
            "gcp:storage/bucket:Bucket",
            "models",
            lambda i: i["encryption"].update(
                defaultKmsKeyName="projects/x/locations/eu/keyRings/r/cryptoKeys/foreign"
            ),
        ),
        {("cmk-key-reference", "models")},
    ),
]


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


S3 = "aws:s3/bucket:Bucket"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"

CASES += [
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


GITHUB = "token.actions.githubusercontent.com"


def trust(sub: str | None, aud: str | None = "sts.amazonaws.com") -> str:
    cond: dict[str, Any] = {"StringEquals": {}}
    if sub:
        cond["StringEquals"][f"{GITHUB}:sub"] = sub
    if aud:
        cond["StringEquals"][f"{GITHUB}:aud"] = aud
    return doc(
        {
            "Effect": "Allow",
            "Principal": {"Federated": f"arn:aws:iam::111122223333:oidc-provider/{GITHUB}"},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": cond,
        }
    )


FIC = "azure-native:managedidentity:FederatedIdentityCredential"
WIP = "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"

CASES += [
    (
        "ci-aws-pinned-ok",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust("repo:acme/ml:environment:prod")}),
        set(),
    ),
    (
        "ci-aws-wildcard-sub",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust("repo:acme/*")}),
        {("ci-oidc-subject-pinned", "ci-deploy")},
    ),
    (
        "ci-aws-no-sub",
        fx.aws_stack,
        add("aws:iam/role:Role", "ci-deploy", {"assumeRolePolicy": trust(None)}),
        {("ci-oidc-subject-pinned", "ci-deploy")},
    ),
    (
        "ci-gcp-unscoped-provider",
        fx.gcp_stack,
        add(
            WIP,
            "github",
            {
                "workloadIdentityPoolId": "ci",
                "workloadIdentityPoolProviderId": "github",
                "oidc": {"issuerUri": f"https://{GITHUB}"},
            },
        ),
        {("ci-oidc-subject-pinned", "github")},
    ),
    (
        "ci-gcp-scoped-ok",
        fx.gcp_stack,
        add(
            WIP,
            "github",
            {
                "workloadIdentityPoolId": "ci",
                "workloadIdentityPoolProviderId": "github",
                "oidc": {"issuerUri": f"https://{GITHUB}"},
                "attributeCondition": "assertion.repository == 'acme/ml'",
            },
        ),
        set(),
    ),
    (
        "ci-azure-wildcard-subject",
        fx.azure_stack,
        add(
            FIC,
            "github-deploy",
            {
                "resourceName": "ci",
                "issuer": f"https://{GITHUB}",
                "subject": "repo:acme/ml:*",
                "audiences": ["api://AzureADTokenExchange"],
            },
        ),
        {("ci-oidc-subject-pinned", "github-deploy")},
    ),
    (
        "ci-azure-pinned-ok",
        fx.azure_stack,
        add(
            FIC,
            "github-deploy",
            {
                "resourceName": "ci",
                "issuer": f"https://{GITHUB}",
                "subject": "repo:acme/ml:environment:prod",
                "audiences": ["api://AzureADTokenExchange"],
            },
        ),
        set(),
    ),
]

CASES += [
    (
        "gcp-basic-role-unknown-member",
        fx.gcp_stack,
        add(
            "gcp:projects/iAMMember:IAMMember",
            "owner",
            {"project": "p", "role": "roles/owner", "member": fx.UNKNOWN},
        ),
        {("iam-no-admin", "owner"), ("gcp-no-public-iam-members", "owner?")},
    ),
    (
        "azure-owner-scope-unknown",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "owner-somewhere",
            {
                "principalId": fx.UNKNOWN,
                "roleDefinitionId": "/providers/Microsoft.Authorization/roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
                "scope": fx.UNKNOWN,
            },
        ),
        {("iam-no-admin", "owner-somewhere?")},
    ),
    (
        "azure-custom-role-on-a-container-ok",
        fx.azure_stack,
        add(
            "azure-native:authorization:RoleAssignment",
            "writer",
            {
                "principalId": fx.UNKNOWN,
                "roleDefinitionId": fx.UNKNOWN,
                "scope": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/a/blobServices/default/containers/models",
            },
        ),
        set(),
    ),
]

CASES += [
    (
        "aws-key-rotation-unknown",
        fx.aws_stack,
        edit("aws:kms/key:Key", "data-key", lambda i: i.update(enableKeyRotation=fx.UNKNOWN)),
        {("kms-key-rotation", "data-key?")},
    ),
    (
        "aws-key-policy-unknown",
        fx.aws_stack,
        edit("aws:kms/key:Key", "data-key", lambda i: i.update(policy=fx.UNKNOWN)),
        {("kms-key-policy-no-wildcard-principal", "data-key?")},
    ),
    (
        "gcp-key-rotation-unknown",
        fx.gcp_stack,
        edit("gcp:kms/cryptoKey:CryptoKey", "data-key", lambda i: i.update(rotationPeriod=fx.UNKNOWN)),
        {("kms-key-rotation", "data-key?")},
    ),
]

HELM = "kubernetes:helm.sh/v3:Release"
CASES += [
    (
        "helm-chart-public-lb",
        fx.gcp_stack,
        add(
            HELM,
            "grafana",
            {
                "chart": "grafana",
                "version": "8.5.1",
                "repositoryOpts": {"repo": "https://grafana.github.io/helm-charts"},
                "values": {"service": {"type": "LoadBalancer"}},
            },
        ),
        {("k8s-no-public-service", "grafana")},
    ),
    (
        "helm-chart-internal-lb-ok",
        fx.gcp_stack,
        add(
            HELM,
            "grafana",
            {
                "chart": "grafana",
                "version": "8.5.1",
                "repositoryOpts": {"repo": "https://grafana.github.io/helm-charts"},
                "values": {
                    "service": {
                        "type": "LoadBalancer",
                        "annotations": {"networking.gke.io/load-balancer-type": "Internal"},
                    }
                },
            },
        ),
        set(),
    ),
    (
        "helm-chart-public-ingress",
        fx.azure_stack,
        add(
            HELM,
            "argo",
            {
                "chart": "argo-workflows",
                "version": "0.45.0",
                "repositoryOpts": {"repo": "https://argoproj.github.io/argo-helm"},
                "values": {"server": {"ingress": {"enabled": True}}},
            },
        ),
        {("k8s-no-public-service", "argo")},
    ),
]
