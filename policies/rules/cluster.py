"""Kubernetes control planes: private or allow-listed API endpoint, audit logs, network policy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    get,
    is_diagnostic_setting,
    is_unknown,
    of_type,
    parse_json_document,
    references,
    truthy,
    types,
    undetermined,
)

EKS = "aws:eks/cluster:Cluster"
GKE = "gcp:container/cluster:Cluster"
AKS = "azure-native:containerservice:ManagedCluster"
CLUSTERS = types(EKS, GKE, AKS)
OPEN = frozenset({"0.0.0.0/0", "::/0"})
EKS_LOG_TYPES = frozenset({"api", "audit", "authenticator"})
AKS_AUDIT = frozenset({"kube-audit", "kube-audit-admin"})


def check_endpoint(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == EKS:
        public = get(i, "vpcConfig.endpointPublicAccess")
        if public is False:
            return
        cidrs = get(i, "vpcConfig.publicAccessCidrs")
        if is_unknown(public) or is_unknown(cidrs):
            yield undetermined("vpcConfig.endpointPublicAccess or publicAccessCidrs is unknown at preview")
            return
        if not as_list(cidrs):
            yield "the EKS API endpoint is public and publicAccessCidrs is unset, which AWS reads as 0.0.0.0/0: set endpointPublicAccess=False or list the operator CIDRs."
        elif OPEN & set(as_list(cidrs)):
            yield "vpcConfig.publicAccessCidrs contains 0.0.0.0/0: list the operator CIDRs or make the endpoint private."
    elif r.type == GKE:
        if truthy(get(i, "privateClusterConfig.enablePrivateEndpoint")):
            return
        blocks = [get(b, "cidrBlock") for b in as_list(get(i, "masterAuthorizedNetworksConfig.cidrBlocks"))]
        if get(i, "masterAuthorizedNetworksConfig") is None:
            yield "the GKE control plane accepts any source: set masterAuthorizedNetworksConfig.cidrBlocks or privateClusterConfig.enablePrivateEndpoint=True."
        elif OPEN & set(blocks):
            yield "masterAuthorizedNetworksConfig contains 0.0.0.0/0: list the operator CIDRs."
    elif r.type == AKS:
        if truthy(get(i, "apiServerAccessProfile.enablePrivateCluster")):
            return
        ranges = get(i, "apiServerAccessProfile.authorizedIPRanges")
        if is_unknown(ranges) or any(is_unknown(x) for x in as_list(ranges)):
            yield undetermined("apiServerAccessProfile.authorizedIPRanges is unknown at preview")
            return
        if not as_list(ranges):
            yield "the AKS API server is public with no authorizedIPRanges: set apiServerAccessProfile.authorizedIPRanges or enablePrivateCluster=True."
        elif OPEN & set(as_list(ranges)):
            yield "apiServerAccessProfile.authorizedIPRanges contains 0.0.0.0/0: list the operator CIDRs."


def _aks_audit(resources: Sequence[Resource], cluster: Resource) -> bool:
    for d in resources:
        if not is_diagnostic_setting(d.type) or not references(d, cluster, "resourceUri"):
            continue
        for log in as_list(get(d.inputs, "logs")):
            if get(log, "enabled") is False:
                continue
            if get(log, "category") in AKS_AUDIT or str(get(log, "categoryGroup")).lower() in (
                "audit",
                "alllogs",
            ):
                return True
    return False


def check_audit(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    for c in of_type(resources, CLUSTERS):
        if c.type == EKS:
            missing = EKS_LOG_TYPES - set(as_list(get(c.inputs, "enabledClusterLogTypes")))
            if missing and not is_unknown(get(c.inputs, "enabledClusterLogTypes")):
                yield Finding(
                    f"EKS cluster '{c.name}' does not ship control-plane logs {sorted(missing)}: add them to enabledClusterLogTypes.",
                    c.urn,
                )
        elif c.type == GKE:
            components = as_list(get(c.inputs, "loggingConfig.enableComponents"))
            if get(c.inputs, "loggingService") == "none" or (components and "APISERVER" not in components):
                yield Finding(
                    f"GKE cluster '{c.name}' does not log the API server: loggingConfig.enableComponents must include 'APISERVER' (and loggingService must not be 'none').",
                    c.urn,
                )
        elif not _aks_audit(resources, c):
            yield Finding(
                f"AKS cluster '{c.name}' has no diagnostic setting sending kube-audit logs: add insights.DiagnosticSetting(resource_uri=cluster.id, logs=[{{category: 'kube-audit-admin', enabled: True}}], workspace_id=...).",
                c.urn,
            )


def _eks_network_policy(resources: Sequence[Resource], cluster: Resource) -> bool:
    for a in resources:
        if a.type != "aws:eks/addon:Addon" or get(a.inputs, "addonName") != "vpc-cni":
            continue
        if not references(a, cluster, "clusterName"):
            continue
        raw = get(a.inputs, "configurationValues")
        if is_unknown(raw):
            return True
        cfg = parse_json_document(raw) or {}
        if str(cfg.get("enableNetworkPolicy", "")).lower() == "true":
            return True
    return False


def check_network_policy(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    for c in of_type(resources, CLUSTERS):
        if c.type == EKS and not _eks_network_policy(resources, c):
            yield Finding(
                f"EKS cluster '{c.name}' does not enforce NetworkPolicy: add the vpc-cni Addon with configurationValues '{{\"enableNetworkPolicy\": \"true\"}}'.",
                c.urn,
            )
        elif c.type == GKE and not (
            truthy(get(c.inputs, "networkPolicy.enabled"))
            or get(c.inputs, "datapathProvider") == "ADVANCED_DATAPATH"
        ):
            yield Finding(
                f"GKE cluster '{c.name}' does not enforce NetworkPolicy: set datapathProvider='ADVANCED_DATAPATH' (Dataplane V2) or networkPolicy.enabled=True.",
                c.urn,
            )
        elif c.type == AKS and str(get(c.inputs, "networkProfile.networkPolicy") or "").lower() not in (
            "azure",
            "calico",
            "cilium",
        ):
            yield Finding(
                f"AKS cluster '{c.name}' does not enforce NetworkPolicy: set networkProfile.networkPolicy='cilium' (or 'azure'/'calico').",
                c.urn,
            )
    namespaces_with_policy = {
        get(p.inputs, "metadata.namespace") or "default"
        for p in resources
        if p.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    }
    for d in resources:
        if d.type == "kubernetes:apps/v1:Deployment":
            ns = get(d.inputs, "metadata.namespace") or "default"
            if (
                is_unknown(ns)
                or ns in namespaces_with_policy
                or any(is_unknown(n) for n in namespaces_with_policy)
            ):
                continue
            yield Finding(
                f"Deployment '{d.name}' runs in namespace {ns!r}, which has no NetworkPolicy: add a default-deny policy plus the ingress it needs.",
                d.urn,
            )


RULES = (
    Rule(
        name="cluster-endpoint-restricted",
        description="The Kubernetes API endpoint is private or restricted to listed CIDRs (never 0.0.0.0/0).",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="EKS: vpc_config.public_access_cidrs=[operator CIDRs] or endpoint_public_access=False. GKE: master_authorized_networks_config. AKS: api_server_access_profile.authorized_ip_ranges.",
        url="https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html",
        validate=check_endpoint,
        applies_to=CLUSTERS,
    ),
    Rule(
        name="cluster-audit-logs",
        description="Control-plane audit logs are collected for every cluster.",
        kind="stack",
        severity="high",
        enforcement="advisory",
        remediation="EKS: enabled_cluster_log_types=['api','audit','authenticator']. GKE: logging_config.enable_components incl. 'APISERVER'. AKS: a DiagnosticSetting with kube-audit-admin.",
        url="https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html",
        validate=check_audit,
        applies_to=types(
            EKS, GKE, AKS, "azure-native:insights:DiagnosticSetting", "azure-native:monitor:DiagnosticSetting"
        ),
    ),
    Rule(
        name="cluster-network-policy",
        description="Clusters enforce NetworkPolicy and every workload namespace has one.",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="Turn on the cluster's network policy engine and declare a default-deny NetworkPolicy per workload namespace.",
        url="https://kubernetes.io/docs/concepts/services-networking/network-policies/",
        validate=check_network_policy,
        applies_to=types(
            EKS, GKE, AKS, "aws:eks/addon:Addon", "kubernetes:networking.k8s.io/v1:NetworkPolicy"
        ),
    ),
)
