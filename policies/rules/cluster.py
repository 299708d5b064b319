"""Kubernetes control planes: private or allow-listed API endpoint, audit logs, network policy."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

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


def _unknown_in(value: object) -> bool:
    """The list itself or one of its elements is unknown at preview."""
    return is_unknown(value) or any(is_unknown(x) for x in as_list(value))


def check_endpoint(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == EKS:
        public = get(i, "vpcConfig.endpointPublicAccess")
        if public is False:
            return
        cidrs = get(i, "vpcConfig.publicAccessCidrs")
        # One unknown CIDR can be 0.0.0.0/0 as much as the whole list can.
        if is_unknown(public) or _unknown_in(cidrs):
            yield undetermined("vpcConfig.endpointPublicAccess or publicAccessCidrs is unknown at preview")
            return
        if not as_list(cidrs):
            yield "the EKS API endpoint is public and publicAccessCidrs is unset, which AWS reads as 0.0.0.0/0: set endpointPublicAccess=False or list the operator CIDRs."
        elif OPEN & set(as_list(cidrs)):
            yield "vpcConfig.publicAccessCidrs contains 0.0.0.0/0: list the operator CIDRs or make the endpoint private."
    elif r.type == GKE:
        private = get(i, "privateClusterConfig.enablePrivateEndpoint")
        if truthy(private):
            return
        problem = _gke_allow_list(i)
        # An unknown private-endpoint flag only matters when the allow-list alone does not pass.
        if problem and is_unknown(private):
            yield undetermined("privateClusterConfig.enablePrivateEndpoint is unknown at preview")
        elif problem:
            yield problem
    elif r.type == AKS:
        private = get(i, "apiServerAccessProfile.enablePrivateCluster")
        if truthy(private):
            return
        ranges = get(i, "apiServerAccessProfile.authorizedIPRanges")
        if _unknown_in(ranges):
            yield undetermined("apiServerAccessProfile.authorizedIPRanges is unknown at preview")
            return
        if not as_list(ranges):
            # Compliant after all if the unknown flag turns out True: the rule cannot tell.
            if is_unknown(private):
                yield undetermined("apiServerAccessProfile.enablePrivateCluster is unknown at preview")
            else:
                yield "the AKS API server is public with no authorizedIPRanges: set apiServerAccessProfile.authorizedIPRanges or enablePrivateCluster=True."
        elif OPEN & set(as_list(ranges)):
            yield "apiServerAccessProfile.authorizedIPRanges contains 0.0.0.0/0: list the operator CIDRs."


def _gke_allow_list(i: Mapping[str, Any]) -> str:
    """What is wrong with the GKE master authorized networks: "" when they pass, an undetermined(...)
    message when an unknown value decides it."""
    if get(i, "masterAuthorizedNetworksConfig") is None:
        return "the GKE control plane accepts any source: set masterAuthorizedNetworksConfig.cidrBlocks or privateClusterConfig.enablePrivateEndpoint=True."
    blocks = get(i, "masterAuthorizedNetworksConfig.cidrBlocks")
    cidrs = [get(b, "cidrBlock") for b in as_list(blocks)]
    if OPEN & set(cidrs):
        return "masterAuthorizedNetworksConfig contains 0.0.0.0/0: list the operator CIDRs."
    # An unknown block list, block or CIDR can be 0.0.0.0/0 (a whole unknown config reads the same).
    if is_unknown(blocks) or any(is_unknown(c) for c in cidrs):
        return undetermined("masterAuthorizedNetworksConfig.cidrBlocks is unknown at preview")
    return ""


def _aks_audit(resources: Sequence[Resource], cluster: Resource) -> bool | None:
    """True when a diagnostic setting of the cluster ships audit logs, None when an unknown value
    (the logs list, a log's category or its enabled flag) might be the one that does."""
    unsure = False
    for d in resources:
        if not is_diagnostic_setting(d.type) or not references(d, cluster, "resourceUri"):
            continue
        logs = get(d.inputs, "logs")
        unsure |= is_unknown(logs)
        for log in as_list(logs):
            enabled = get(log, "enabled")
            if enabled is False:
                continue
            category, group = get(log, "category"), get(log, "categoryGroup")
            audit = category in AKS_AUDIT or str(group).lower() in ("audit", "alllogs")
            if audit and not is_unknown(enabled):
                return True
            unsure |= audit or is_unknown(log) or is_unknown(category) or is_unknown(group)
    return None if unsure else False


def _eks_audit(c: Resource) -> Finding | None:
    types_ = get(c.inputs, "enabledClusterLogTypes")
    known = {t for t in as_list(types_) if not is_unknown(t)}
    missing = EKS_LOG_TYPES - known
    if not missing:
        return None
    # Each unknown element is one log type, so it can stand for at most one missing type.
    if is_unknown(types_) or sum(is_unknown(t) for t in as_list(types_)) >= len(missing):
        return Finding(
            undetermined(
                f"EKS cluster '{c.name}': enabledClusterLogTypes (or an element) is unknown at preview"
            ),
            c.urn,
        )
    return Finding(
        f"EKS cluster '{c.name}' does not ship control-plane logs {sorted(missing)}: add them to enabledClusterLogTypes.",
        c.urn,
    )


def _gke_audit(c: Resource) -> Finding | None:
    service = get(c.inputs, "loggingService")
    components = get(c.inputs, "loggingConfig.enableComponents")
    listed = as_list(components)
    unsure = _unknown_in(components)
    if service == "none" or (listed and "APISERVER" not in listed and not unsure):
        return Finding(
            f"GKE cluster '{c.name}' does not log the API server: loggingConfig.enableComponents must include 'APISERVER' (and loggingService must not be 'none').",
            c.urn,
        )
    if is_unknown(service) or (unsure and "APISERVER" not in listed):
        return Finding(
            undetermined(
                f"GKE cluster '{c.name}': loggingService or loggingConfig.enableComponents is unknown at preview"
            ),
            c.urn,
        )
    return None


def check_audit(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    for c in of_type(resources, CLUSTERS):
        finding = _eks_audit(c) if c.type == EKS else _gke_audit(c) if c.type == GKE else None
        if finding:
            yield finding
        if c.type != AKS:
            continue
        shipped = _aks_audit(resources, c)
        if shipped is None:
            yield Finding(
                undetermined(f"AKS cluster '{c.name}': its audit diagnostic setting is unknown at preview"),
                c.urn,
            )
        elif not shipped:
            yield Finding(
                f"AKS cluster '{c.name}' has no diagnostic setting sending kube-audit logs: add insights.DiagnosticSetting(resource_uri=cluster.id, logs=[{{category: 'kube-audit-admin', enabled: True}}], workspace_id=...).",
                c.urn,
            )


def _eks_network_policy(resources: Sequence[Resource], cluster: Resource) -> bool | None:
    """True when the cluster's vpc-cni add-on enables NetworkPolicy, None when its configuration is
    unknown at preview (it may or may not turn the policy engine on)."""
    unsure = False
    for a in resources:
        if a.type != "aws:eks/addon:Addon" or get(a.inputs, "addonName") != "vpc-cni":
            continue
        if not references(a, cluster, "clusterName"):
            continue
        raw = get(a.inputs, "configurationValues")
        if is_unknown(raw):
            unsure = True
            continue
        cfg = parse_json_document(raw) or {}
        if str(cfg.get("enableNetworkPolicy", "")).lower() == "true":
            return True
    return None if unsure else False


def _cluster_network_policy(c: Resource, resources: Sequence[Resource]) -> bool | None:
    """Whether the cluster enforces NetworkPolicy; None when an unknown setting decides it."""
    if c.type == EKS:
        return _eks_network_policy(resources, c)
    if c.type == GKE:
        enabled, datapath = get(c.inputs, "networkPolicy.enabled"), get(c.inputs, "datapathProvider")
        if truthy(enabled) or datapath == "ADVANCED_DATAPATH":
            return True
        return None if is_unknown(enabled) or is_unknown(datapath) else False
    engine = get(c.inputs, "networkProfile.networkPolicy")
    if is_unknown(engine):
        return None
    return str(engine or "").lower() in ("azure", "calico", "cilium")


def check_network_policy(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    for c in of_type(resources, CLUSTERS):
        enforced = _cluster_network_policy(c, resources)
        if enforced:
            continue
        if enforced is None:
            yield Finding(
                undetermined(f"cluster '{c.name}': its NetworkPolicy setting is unknown at preview"), c.urn
            )
        elif c.type == EKS:
            yield Finding(
                f"EKS cluster '{c.name}' does not enforce NetworkPolicy: add the vpc-cni Addon with configurationValues '{{\"enableNetworkPolicy\": \"true\"}}'.",
                c.urn,
            )
        elif c.type == GKE:
            yield Finding(
                f"GKE cluster '{c.name}' does not enforce NetworkPolicy: set datapathProvider='ADVANCED_DATAPATH' (Dataplane V2) or networkPolicy.enabled=True.",
                c.urn,
            )
        else:
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
            if ns in namespaces_with_policy:
                continue
            # An unknown namespace (the deployment's, or a policy's) may or may not be the one that matches.
            if is_unknown(ns) or any(is_unknown(n) for n in namespaces_with_policy):
                yield Finding(
                    undetermined(
                        f"Deployment '{d.name}': its namespace or a NetworkPolicy's is unknown at preview"
                    ),
                    d.urn,
                )
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
