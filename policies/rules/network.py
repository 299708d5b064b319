"""Network exposure: nothing reachable from the internet unless a reviewed waiver allows it.

Open ingress (AWS security groups and their rule resources, GCP firewall rules, Azure NSGs and security
rules), Kubernetes Services of type LoadBalancer/NodePort and Ingresses without an internal
annotation, and nodes with public IPs. The explicit allow-list is policies/waivers.yaml: a public
entry point is accepted by a named approver, with a reason and an expiry, never by a config switch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .core import Context, Resource, Rule, as_list, get, is_unknown, truthy, types, undetermined

# Sources meaning "anyone": CIDRs of the whole address space and Azure's service tags for it.
OPEN_SOURCES = frozenset({"0.0.0.0/0", "::/0", "*", "internet", "any"})

SG = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SG_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
NSG = "azure-native:network:NetworkSecurityGroup"
NSG_RULE = "azure-native:network:SecurityRule"
INGRESS_TYPES = types(SG, SG_RULE, SG_INGRESS, GCP_FIREWALL, NSG, NSG_RULE)


def _open(values: list[Any]) -> tuple[list[str], bool]:
    """(open sources among values, whether any value is unknown)."""
    unknown = any(is_unknown(v) for v in values)
    return [str(v) for v in values if isinstance(v, str) and v.lower() in OPEN_SOURCES], unknown


def _items(data: Any, *keys: str) -> list[Any]:
    """The elements of list fields; a list unknown as a whole stays one unknown element (as_list drops it)."""
    out: list[Any] = []
    for key in keys:
        v = get(data, key)
        out += [v] if is_unknown(v) else as_list(v)
    return out


def _ports(rule: Any, lo: str = "fromPort", hi: str = "toPort") -> str:
    a, b = get(rule, lo), get(rule, hi)
    return f"ports {a}-{b}" if a is not None else "all ports"


def _azure_rule(rule: Any, where: str) -> Iterator[str]:
    gate = {"direction": get(rule, "direction"), "access": get(rule, "access")}
    if any(
        not is_unknown(v) and str(v or "").lower() != want
        for v, want in ((gate["direction"], "inbound"), (gate["access"], "allow"))
    ):
        return
    sources = [get(rule, "sourceAddressPrefix"), *_items(rule, "sourceAddressPrefixes")]
    found, unknown = _open([s for s in sources if s is not None])
    # An open source behind an unknown direction/access may be an inbound allow: not decidable.
    gate_unknown = [k for k, v in gate.items() if is_unknown(v)]
    if found and not gate_unknown:
        port = get(rule, "destinationPortRange") or get(rule, "destinationPortRanges") or "*"
        yield f"{where} allows inbound from {found[0]!r} to port(s) {port}: restrict the source to known ranges or a private endpoint."
    elif found or unknown:
        what = gate_unknown + (["a source address"] if unknown else [])
        yield undetermined(f"{where} has {', '.join(what)} unknown at preview")


def check_ingress(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == SG:
        if is_unknown(get(i, "ingress")):
            yield undetermined("ingress is unknown at preview")
        for n, rule in enumerate(as_list(get(i, "ingress"))):
            found, unknown = _open(_items(rule, "cidrBlocks", "ipv6CidrBlocks"))
            if found:
                yield f"ingress[{n}] allows {found[0]} on {_ports(rule)}: restrict cidrBlocks to known ranges or reference a security group."
            elif unknown:
                yield undetermined(f"ingress[{n}] has CIDR blocks unknown at preview")
    elif r.type == SG_RULE:
        if get(i, "type") != "ingress":
            return
        found, unknown = _open(_items(i, "cidrBlocks", "ipv6CidrBlocks"))
        if found:
            yield f"ingress rule allows {found[0]} on {_ports(i)}: restrict cidrBlocks or use sourceSecurityGroupId."
        elif unknown:
            yield undetermined("cidrBlocks are unknown at preview")
    elif r.type == SG_INGRESS:
        found, unknown = _open([get(i, "cidrIpv4"), get(i, "cidrIpv6")])
        if found:
            yield f"ingress rule allows {found[0]} on {_ports(i)}: restrict cidrIpv4/cidrIpv6 or use referencedSecurityGroupId."
        elif unknown:
            yield undetermined("cidrIpv4/cidrIpv6 are unknown at preview")
    elif r.type == GCP_FIREWALL:
        gate = {"direction": get(i, "direction"), "allows": get(i, "allows"), "disabled": get(i, "disabled")}
        if not is_unknown(gate["direction"]) and str(gate["direction"] or "INGRESS").upper() != "INGRESS":
            return
        if (not is_unknown(gate["allows"]) and not as_list(gate["allows"])) or truthy(gate["disabled"]):
            return
        found, unknown = _open(_items(i, "sourceRanges"))
        # An open range behind an unknown direction/allows/disabled may be live ingress: not decidable.
        gate_unknown = [k for k, v in gate.items() if is_unknown(v)]
        if found and not gate_unknown:
            yield f"firewall allows ingress from {found[0]}: restrict sourceRanges (or use IAP ranges / internal load balancers)."
        elif found or unknown:
            what = gate_unknown + (["sourceRanges"] if unknown else [])
            yield undetermined(f"{', '.join(what)} unknown at preview")
    elif r.type == NSG:
        if is_unknown(get(i, "securityRules")):
            yield undetermined("securityRules are unknown at preview")
        for n, rule in enumerate(as_list(get(i, "securityRules"))):
            yield from _azure_rule(get(rule, "properties") or rule, f"securityRules[{n}]")
    elif r.type == NSG_RULE:
        yield from _azure_rule(i, "security rule")


# Annotations that make a cloud load balancer internal (AWS LB controller and in-tree, GKE, AKS).
INTERNAL_LB = {
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
    "networking.gke.io/load-balancer-type": "internal",
    "cloud.google.com/load-balancer-type": "internal",
    "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
}
INTERNAL_INGRESS = {
    "alb.ingress.kubernetes.io/scheme": "internal",
    "kubernetes.io/ingress.class": "gce-internal",
    "appgw.ingress.kubernetes.io/use-private-ip": "true",
    "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
}
SERVICE = "kubernetes:core/v1:Service"
INGRESS = types("kubernetes:networking.k8s.io/v1:Ingress", "kubernetes:networking.k8s.io/v1beta1:Ingress")


def _internal(annotations: Any, table: dict[str, str]) -> bool:
    if not isinstance(annotations, dict):
        return False
    return any(str(annotations.get(k, "")).lower() == v for k, v in table.items())


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def _chart_services(values: Any, path: str = "values") -> Iterator[tuple[str, Any]]:
    """(path, block) of every `service`/`ingress`-like block in a chart's values (charts name them
    `service`, `server.service`, `<component>.ingress`, ...)."""
    if isinstance(values, dict):
        for key, value in values.items():
            where = f"{path}.{key}"
            if isinstance(value, dict) and (key.lower().endswith("service") or key.lower() == "ingress"):
                yield where, value
            yield from _chart_services(value, where)
    elif isinstance(values, list):
        for n, item in enumerate(values):
            yield from _chart_services(item, f"{path}[{n}]")


def _check_chart(r: Resource) -> Iterator[str]:
    """Services and Ingresses a chart will create, as far as its values say (what the chart renders
    by default is not visible at plan time: see the report's limitations)."""
    for where, block in _chart_services(get(r.inputs, "values")):
        annotations = block.get("annotations")
        if where.lower().endswith("ingress"):
            if truthy(block.get("enabled")) and not _internal(annotations, INTERNAL_INGRESS):
                yield f"{where}.enabled without an internal annotation exposes the chart to the internet: set the cloud's internal ingress annotation."
            continue
        kind = block.get("type")
        if is_unknown(kind):
            yield undetermined(f"{where}.type is unknown at preview")
        elif kind == "NodePort":
            yield f"{where}.type=NodePort opens a port on every node: use ClusterIP."
        elif kind == "LoadBalancer" and not _internal(annotations, INTERNAL_LB):
            yield f"{where}.type=LoadBalancer without an internal annotation gets an internet-facing load balancer: add the cloud's internal annotation or use ClusterIP."


def check_k8s_exposure(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type == HELM_RELEASE:
        yield from _check_chart(r)
        return
    annotations = get(r.inputs, "metadata.annotations")
    if is_unknown(annotations):
        yield undetermined("metadata.annotations are unknown at preview")
        return
    if r.type == SERVICE:
        kind = get(r.inputs, "spec.type") or "ClusterIP"
        if is_unknown(kind):
            yield undetermined("spec.type is unknown at preview")
        elif kind == "NodePort":
            yield "Service of type NodePort opens a port on every node: use ClusterIP behind an internal load balancer or Ingress."
        elif kind == "LoadBalancer" and not _internal(annotations, INTERNAL_LB):
            yield "Service of type LoadBalancer gets an internet-facing load balancer: add the cloud's internal annotation (e.g. service.beta.kubernetes.io/aws-load-balancer-scheme: internal)."
    elif INGRESS(r.type):
        cls = get(r.inputs, "spec.ingressClassName")
        if cls == "gce-internal" or _internal(annotations, INTERNAL_INGRESS):
            return
        yield "Ingress without an internal annotation is exposed to the internet: set alb.ingress.kubernetes.io/scheme: internal (or the cloud's equivalent)."


LT = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_TYPES = types(
    LT,
    "aws:ec2/instance:Instance",
    "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool",
    "azure-native:containerservice:ManagedCluster",
    "azure-native:containerservice:AgentPool",
)


def _public_ip(data: Any, path: str, where: str, message: str) -> Iterator[str]:
    # truthy() reads an unknown as false, which would pass a flag that may turn out true.
    value = get(data, path)
    if is_unknown(value):
        yield undetermined(f"{where}{path} is unknown at preview")
    elif truthy(value):
        yield message


def check_node_ips(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == LT:
        if is_unknown(get(i, "networkInterfaces")):
            yield undetermined("networkInterfaces are unknown at preview")
        for n, nic in enumerate(as_list(get(i, "networkInterfaces"))):
            where = f"networkInterfaces[{n}]."
            yield from _public_ip(
                nic,
                "associatePublicIpAddress",
                where,
                f"{where}associatePublicIpAddress is true: nodes get public IPs. Use private subnets and a NAT gateway.",
            )
    elif r.type == "aws:ec2/instance:Instance":
        yield from _public_ip(
            i, "associatePublicIpAddress", "", "associatePublicIpAddress is true: use a private subnet."
        )
    elif r.type == "gcp:container/cluster:Cluster":
        private = get(i, "privateClusterConfig.enablePrivateNodes")
        if is_unknown(private):
            yield undetermined("privateClusterConfig.enablePrivateNodes is unknown at preview")
        elif private is not True:
            yield "GKE nodes get public IPs: set privateClusterConfig.enablePrivateNodes=True."
    elif r.type == "gcp:container/nodePool:NodePool":
        if is_unknown(get(i, "networkConfig.enablePrivateNodes")):
            yield undetermined("networkConfig.enablePrivateNodes is unknown at preview")
        elif get(i, "networkConfig.enablePrivateNodes") is False:
            yield "networkConfig.enablePrivateNodes=False gives this pool's nodes public IPs: remove it or set True."
    elif r.type == "azure-native:containerservice:ManagedCluster":
        if is_unknown(get(i, "agentPoolProfiles")):
            yield undetermined("agentPoolProfiles are unknown at preview")
        for n, pool in enumerate(as_list(get(i, "agentPoolProfiles"))):
            where = f"agentPoolProfiles[{n}]."
            yield from _public_ip(
                pool, "enableNodePublicIP", where, f"{where}enableNodePublicIP is true: set it to False."
            )
    elif r.type == "azure-native:containerservice:AgentPool":
        yield from _public_ip(i, "enableNodePublicIP", "", "enableNodePublicIP is true: set it to False.")


RULES = (
    Rule(
        name="network-no-open-ingress",
        description="No security group, firewall rule or NSG rule admits traffic from 0.0.0.0/0, ::/0, '*' or Internet.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Restrict the source to known CIDRs, a security group, IAP or a private endpoint; an accepted public entry point needs a waiver in policies/waivers.yaml.",
        url="https://docs.aws.amazon.com/vpc/latest/userguide/security-group-rules.html",
        validate=check_ingress,
        applies_to=INGRESS_TYPES,
    ),
    Rule(
        name="k8s-no-public-service",
        description="Kubernetes Services (and chart values declaring them) are not NodePort or internet-facing LoadBalancer, and Ingresses are internal.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="Use ClusterIP, or an internal load balancer annotation (aws-load-balancer-scheme: internal, networking.gke.io/load-balancer-type: Internal, azure-load-balancer-internal: 'true').",
        url="https://kubernetes.io/docs/concepts/services-networking/service/#internal-load-balancer",
        validate=check_k8s_exposure,
        applies_to=lambda t: t in (SERVICE, HELM_RELEASE) or INGRESS(t),
    ),
    Rule(
        name="node-no-public-ip",
        description="Cluster nodes and instances have no public IP addresses.",
        kind="resource",
        severity="high",
        enforcement="mandatory",
        remediation="Run nodes in private subnets (GKE enablePrivateNodes, AKS enableNodePublicIP=False, no associatePublicIpAddress) with NAT for egress.",
        url="https://cloud.google.com/kubernetes-engine/docs/how-to/legacy/network-isolation",
        validate=check_node_ips,
        applies_to=NODE_TYPES,
    ),
)
