"""Rule mutants, sections 7-10: IAM, the cluster (endpoint, audit logs, network policy), spot GPU
pools and the serving workload.

One mutant per failure mode of each rule, grouped by what runs on or grants access to the cluster;
test_policy_rules.py runs them with the other sections' cases.
"""

from __future__ import annotations

import json
from typing import Any

import policy_fixtures as fx
from policy_mutators import (
    _DELETE,
    AKS,
    DEP,
    EKS,
    GCS,
    GKE,
    GNP,
    NG,
    POOL,
    Case,
    Plan,
    _add,
    _drop,
    _inputs,
    _set,
)


def _wildcard_policy(plan: Plan) -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    _inputs(plan, "aws:iam/policy:Policy", "training-data-access")["policy"] = json.dumps(doc)


def _container(plan: Plan) -> dict[str, Any]:
    return _inputs(plan, DEP, "sentiment")["spec"]["template"]["spec"]["containers"][0]


CASES: list[Case] = [
    # 7. IAM
    ("aws-wildcard-action", fx.aws_stack, _wildcard_policy, {("iam-no-wildcards", "training-data-access")}),
    (
        "aws-admin-attachment",
        fx.aws_stack,
        _set(
            "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
            "node-worker",
            "policyArn",
            "arn:aws:iam::aws:policy/AdministratorAccess",
        ),
        {("iam-no-admin", "node-worker")},
    ),
    (
        "gcp-basic-role",
        fx.gcp_stack,
        _set("gcp:storage/bucketIAMMember:BucketIAMMember", "trainer-data", "role", "roles/editor"),
        {("iam-no-admin", "trainer-data")},
    ),
    (
        "azure-owner-subscription",
        fx.azure_stack,
        lambda p: _inputs(p, "azure-native:authorization:RoleAssignment", "acr-pull").update(
            roleDefinitionId="/subscriptions/0000/providers/Microsoft.Authorization/roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
            scope="/subscriptions/0000",
        ),
        {("iam-no-admin", "acr-pull")},
    ),
    (
        "k8s-cluster-admin",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            "ops",
            {"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}},
        ),
        {("iam-no-admin", "ops")},
    ),
    (
        "k8s-wildcard-role",
        fx.aws_stack,
        lambda p: _add(
            p,
            "kubernetes:rbac.authorization.k8s.io/v1:Role",
            "all",
            {"rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}]},
        ),
        {("iam-no-wildcards", "all")},
    ),
    # 8. cluster
    (
        "eks-open-endpoint",
        fx.aws_stack,
        _set(EKS, "cluster", "vpcConfig.publicAccessCidrs", ["0.0.0.0/0"]),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "eks-default-cidrs",
        fx.aws_stack,
        _set(EKS, "cluster", "vpcConfig.publicAccessCidrs", _DELETE),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "gke-no-authorized-networks",
        fx.gcp_stack,
        _set(GKE, "cluster", "masterAuthorizedNetworksConfig", _DELETE),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "aks-open",
        fx.azure_stack,
        _set(AKS, "cluster", "apiServerAccessProfile.authorizedIPRanges", ["0.0.0.0/0"]),
        {("cluster-endpoint-restricted", "cluster")},
    ),
    (
        "eks-no-audit",
        fx.aws_stack,
        _set(EKS, "cluster", "enabledClusterLogTypes", ["api"]),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "gke-no-apiserver-logs",
        fx.gcp_stack,
        _set(GKE, "cluster", "loggingConfig.enableComponents", ["SYSTEM_COMPONENTS"]),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "aks-no-audit",
        fx.azure_stack,
        lambda p: _drop(p, "azure-native:monitor:DiagnosticSetting", "cluster-audit"),
        {("cluster-audit-logs", "cluster")},
    ),
    (
        "eks-no-netpol",
        fx.aws_stack,
        lambda p: _drop(p, "aws:eks/addon:Addon", "vpc-cni"),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "gke-no-netpol",
        fx.gcp_stack,
        _set(GKE, "cluster", "datapathProvider", "LEGACY_DATAPATH"),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "aks-no-netpol",
        fx.azure_stack,
        _set(AKS, "cluster", "networkProfile.networkPolicy", _DELETE),
        {("cluster-network-policy", "cluster")},
    ),
    (
        "namespace-no-netpol",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "serving-default-deny"),
        {("cluster-network-policy", "sentiment")},
    ),
    # 9. spot GPU pools
    (
        "eks-on-demand",
        fx.aws_stack,
        _set(NG, "gpu-spot", "capacityType", "ON_DEMAND"),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "eks-min-1-dev",
        fx.aws_stack,
        _set(NG, "gpu-spot", "scalingConfig.minSize", 1.0),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "eks-max-64",
        fx.aws_stack,
        _set(NG, "gpu-spot", "scalingConfig.maxSize", 64.0),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    ("eks-no-taint", fx.aws_stack, _set(NG, "gpu-spot", "taints", []), {("gpu-node-pool-spot", "gpu-spot")}),
    (
        "gke-not-spot",
        fx.gcp_stack,
        _set(GNP, "gpu-spot", "nodeConfig.spot", False),
        {("gpu-node-pool-spot", "gpu-spot")},
    ),
    (
        "aks-regular",
        fx.azure_stack,
        _set(POOL, "gpuspot", "scaleSetPriority", "Regular"),
        {("gpu-node-pool-spot", "gpuspot")},
    ),
    (
        "aks-no-taint",
        fx.azure_stack,
        _set(POOL, "gpuspot", "nodeTaints", []),
        {("gpu-node-pool-spot", "gpuspot")},
    ),
    (
        "no-checkpoint-bucket",
        fx.gcp_stack,
        lambda p: _drop(p, GCS, "checkpoints"),
        {("checkpoint-bucket-exists", None)},
    ),
    # 10. serving workload
    (
        "runs-as-root",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].pop("runAsNonRoot"),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "writable-root",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].update(readOnlyRootFilesystem=False),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "escalation",
        fx.aws_stack,
        lambda p: _container(p)["securityContext"].pop("allowPrivilegeEscalation"),
        {("k8s-workload-security-context", "sentiment")},
    ),
    (
        "no-limits",
        fx.aws_stack,
        lambda p: _container(p).pop("resources"),
        {("k8s-workload-resources-probes", "sentiment")},
    ),
    (
        "no-probes",
        fx.aws_stack,
        lambda p: _container(p).pop("readinessProbe"),
        {("k8s-workload-resources-probes", "sentiment")},
    ),
    (
        "latest-image",
        fx.aws_stack,
        lambda p: _container(p).update(image="registry.example.eu/serving:latest"),
        {("k8s-image-pinned", "sentiment")},
    ),
    (
        "prod-tag-not-digest",
        lambda: fx.aws_stack("prod", "prod"),
        lambda p: _container(p).update(image="registry.example.eu/serving:0.1.0"),
        {("k8s-image-pinned", "sentiment")},
    ),
    (
        "hpa-min-gt-max",
        fx.aws_stack,
        _set("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment", "spec.minReplicas", 8.0),
        {("k8s-hpa-bounds", "sentiment")},
    ),
    (
        "hpa-over-cap",
        fx.aws_stack,
        _set("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment", "spec.maxReplicas", 100.0),
        {("k8s-hpa-bounds", "sentiment")},
    ),
    (
        "no-hpa",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "sentiment"),
        {("k8s-serving-availability", "sentiment")},
    ),
    (
        "no-pdb",
        fx.aws_stack,
        lambda p: _drop(p, "kubernetes:policy/v1:PodDisruptionBudget", "sentiment"),
        {("k8s-serving-availability", "sentiment")},
    ),
]
