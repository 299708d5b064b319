"""The API server's validation of each kind's own fields (the metadata and pod templates: tests/k8s_api/objects.py).

Ported from kubernetes/kubernetes: `pkg/apis/apps/validation/validation.go` (`ValidateDeploymentSpec`,
`ValidateRollingUpdateDeployment`, `ValidateStatefulSetSpec`), `pkg/apis/core/validation/validation.go`
(`ValidateService`/`validateServicePort`, `ValidateConfigMap`, `ValidateSecret`, `ValidateResourceQuota`/
`ValidateResourceQuotaResourceName`), `pkg/apis/autoscaling/validation/validation.go`
(`validateHorizontalPodAutoscalerSpec`, `validateMetricSpec`, `validatePodsSource`, `validateMetricTarget`,
`validateScalingRules`, `validateScalingPolicy`; minReplicasLowerBound is 1: the HPAScaleToZero gate is alpha and
off), `pkg/apis/policy/validation/validation.go` (`ValidatePodDisruptionBudgetSpec`),
`pkg/apis/networking/validation/validation.go` (`ValidateNetworkPolicySpec`, `ValidateNetworkPolicyPort`,
`ValidateNetworkPolicyPeer`, `ValidateIPBlock`), `pkg/apis/rbac/validation/validation.go` (`ValidatePolicyRule`,
`ValidateRoleBindingSubject`, roleRef checks of `ValidateRoleBinding`), `pkg/apis/storage/validation/validation.go`
(`ValidateStorageClass`, `validateProvisioner`, `validateParameters`) and `pkg/apis/batch/validation/validation.go`
(tests/k8s_api/batch.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from tests.k8s_api import batch, pod
from tests.k8s_api import names as n

MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize: ConfigMap and Secret data
HPA_MAX_STABILIZATION_S, HPA_MAX_PERIOD_S = 3600, 1800
METRIC_SOURCES = {"Object": "object", "Pods": "pods", "Resource": "resource", "External": "external",
                  "ContainerResource": "containerResource"}  # fmt: skip
METRIC_TARGET_TYPES = {"Utilization", "Value", "AverageValue"}
SERVICE_TYPES = {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}
STORAGE_PARAMETERS_MAX, STORAGE_PARAMETERS_BYTES = 512, 256 * 1024


def _deployment(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors = _selector_errors(spec)
    if spec.get("replicas", 1) < 0:
        errors.append(f"spec.replicas: Invalid value: {spec['replicas']}: must be greater than or equal to 0")
    rolling = (spec.get("strategy") or {}).get("rollingUpdate")
    if rolling:
        surge, unavailable = rolling.get("maxSurge", "25%"), rolling.get("maxUnavailable", "25%")
        errors += n.int_or_percent(surge, "spec.strategy.rollingUpdate.maxSurge", max_percent=None)
        errors += n.int_or_percent(unavailable, "spec.strategy.rollingUpdate.maxUnavailable")
        if surge in (0, "0%") and unavailable in (0, "0%"):
            errors.append(
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: may not be 0 when `maxSurge` is 0"
            )
    if (spec.get("template") or {}).get("spec", {}).get("activeDeadlineSeconds") is not None:
        errors.append(
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"
        )
    return errors


def _selector_errors(spec: dict[str, Any]) -> list[str]:
    selector = spec.get("selector") or {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return ["spec.selector: Invalid value: empty selector is invalid for deployment"]
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    errors = n.label_selector(selector, "spec.selector")
    if not n.selector_matches(selector, template_labels):
        errors.append(
            "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
        )
    return errors


def _stateful_set(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors = _selector_errors(spec)
    if spec.get("podManagementPolicy", "OrderedReady") not in ("OrderedReady", "Parallel"):
        errors.append(f"spec.podManagementPolicy: Unsupported value: {spec['podManagementPolicy']!r}")
    return errors


def _service(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    ports, kind = spec.get("ports") or [], spec.get("type", "ClusterIP")
    if kind not in SERVICE_TYPES:
        errors.append(f"spec.type: Unsupported value: {kind!r}")
    if spec.get("clusterIP") == "None" and kind != "ClusterIP":
        errors.append('spec.clusterIPs[0]: Invalid value: "None": may only be set to "None" for ClusterIP')
    names: set[str] = set()
    pairs: set[tuple[Any, str]] = set()
    for i, p in enumerate(ports):
        at, name = f"spec.ports[{i}]", p.get("name", "")
        if len(ports) > 1 and not name:
            errors.append(f"{at}.name: Required value")
        elif name:
            errors += [f"{at}.name: Invalid value: {name!r}: {e}" for e in n.dns1123_label(name)]
            if name in names:
                errors.append(f"{at}.name: Duplicate value: {name!r}")
            names.add(name)
        errors += [f"{at}.port: Invalid value: {p.get('port')!r}: {e}" for e in n.port_num(p.get("port"))]
        protocol = p.get("protocol", "TCP")
        if protocol not in pod.PROTOCOLS:
            errors.append(f"{at}.protocol: Unsupported value: {protocol!r}")
        if (p.get("port"), protocol) in pairs:
            errors.append(f"{at}: Duplicate value: {{port: {p.get('port')}, protocol: {protocol}}}")
        pairs.add((p.get("port"), protocol))
        if "targetPort" in p:
            errors += [
                f"{at}.targetPort: Invalid value: {p['targetPort']!r}: {e}"
                for e in n.port_num_or_name(p["targetPort"])
            ]
    return errors + n.labels(spec.get("selector"), "spec.selector")


def _hpa(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas", 0)
    if low < 1:  # minReplicasLowerBound: 1 unless the alpha HPAScaleToZero gate is on
        errors.append(f"spec.minReplicas: Invalid value: {low}: must be greater than or equal to 1")
    if high < 1:
        errors.append(f"spec.maxReplicas: Invalid value: {high}: must be greater than 0")
    if high < low:
        errors.append(
            f"spec.maxReplicas: Invalid value: {high}: must be greater than or equal to `minReplicas`"
        )
    ref = spec.get("scaleTargetRef") or {}
    for field in ("kind", "name"):
        if not ref.get(field):
            errors.append(f"spec.scaleTargetRef.{field}: Required value")
    for i, metric in enumerate(spec.get("metrics") or []):
        errors += _metric_errors(metric, f"spec.metrics[{i}]")
    for direction, rules in (spec.get("behavior") or {}).items():
        errors += _scaling_rules_errors(rules or {}, f"spec.behavior.{direction}")
    return errors


def _metric_errors(metric: dict[str, Any], path: str) -> list[str]:
    kind = metric.get("type")
    if kind not in METRIC_SOURCES:
        return [f"{path}.type: Unsupported value: {kind!r}"]
    present = {METRIC_SOURCES[k] for k in METRIC_SOURCES if METRIC_SOURCES[k] in metric}
    errors = [
        f"{path}.{other}: Forbidden: must populate the given metric source only"
        for other in present - {METRIC_SOURCES[kind]}
    ]
    source = metric.get(METRIC_SOURCES[kind])
    if source is None:
        return [
            *errors,
            f"{path}.{METRIC_SOURCES[kind]}: Required value: must populate information for the given metric source",
        ]
    at = f"{path}.{METRIC_SOURCES[kind]}"
    if kind in ("Object", "Pods", "External") and not (source.get("metric") or {}).get("name"):
        errors.append(f"{at}.metric.name: Required value: must specify a metric name")
    target = source.get("target") or {}
    if target.get("type") not in METRIC_TARGET_TYPES:
        errors.append(f"{at}.target.type: Unsupported value: {target.get('type')!r}")
    for field in ("value", "averageValue", "averageUtilization"):
        if field in target and not (n.quantity(target[field]) or 0) > 0:
            errors.append(f"{at}.target.{field}: Invalid value: {target[field]!r}: must be positive")
    if kind == "Pods" and "averageValue" not in target:
        errors.append(
            f"{at}.target.averageValue: Required value: must specify a positive target averageValue"
        )
    return errors


def _scaling_rules_errors(rules: dict[str, Any], path: str) -> list[str]:
    """validateScalingRules, after SetDefaults_HorizontalPodAutoscalerBehavior fills policies that are absent."""
    errors: list[str] = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and not 0 <= window <= HPA_MAX_STABILIZATION_S:
        errors.append(
            f"{path}.stabilizationWindowSeconds: Invalid value: {window}: must be between 0 and {HPA_MAX_STABILIZATION_S}"
        )
    if rules.get("selectPolicy", "Max") not in ("Max", "Min", "Disabled"):
        errors.append(f"{path}.selectPolicy: Unsupported value: {rules['selectPolicy']!r}")
    if "policies" in rules and not rules["policies"]:
        errors.append(f"{path}.policies: Required value: must specify at least one Policy")
    for i, p in enumerate(rules.get("policies") or []):
        if p.get("type") not in ("Pods", "Percent"):
            errors.append(f"{path}.policies[{i}].type: Unsupported value: {p.get('type')!r}")
        if p.get("value", 0) <= 0:
            errors.append(f"{path}.policies[{i}].value: Invalid value: must be greater than zero")
        if not 0 < p.get("periodSeconds", 0) <= HPA_MAX_PERIOD_S:
            errors.append(
                f"{path}.policies[{i}].periodSeconds: Invalid value: must be in (0, {HPA_MAX_PERIOD_S}]"
            )
    return errors


def _pdb(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    if "minAvailable" in spec and "maxUnavailable" in spec:
        errors.append("spec: Invalid value: minAvailable and maxUnavailable cannot be both set")
    for field in ("minAvailable", "maxUnavailable"):
        if field in spec:
            errors += n.int_or_percent(spec[field], f"spec.{field}")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        errors.append(f"spec.unhealthyPodEvictionPolicy: Unsupported value: {policy!r}")
    return errors + n.label_selector(spec.get("selector"), "spec.selector")


def _network_policy(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors = n.label_selector(spec.get("podSelector"), "spec.podSelector")
    types = spec.get("policyTypes") or []
    if len(types) > 2:
        errors.append("spec.policyTypes: Invalid value: may not specify more than two policyTypes")
    errors += [f"spec.policyTypes: Unsupported value: {t!r}" for t in types if t not in ("Ingress", "Egress")]
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or []):
            at = f"spec.{direction}[{i}]"
            for j, p in enumerate(rule.get("ports") or []):
                errors += _netpol_port_errors(p, f"{at}.ports[{j}]")
            for j, peer in enumerate(rule.get(peers_key) or []):
                errors += _peer_errors(peer, f"{at}.{peers_key}[{j}]")
    return errors


def _netpol_port_errors(p: dict[str, Any], path: str) -> list[str]:
    errors = (
        []
        if p.get("protocol", "TCP") in pod.PROTOCOLS
        else [f"{path}.protocol: Unsupported value: {p['protocol']!r}"]
    )
    port, end = p.get("port"), p.get("endPort")
    if port is not None:
        errors += [f"{path}.port: Invalid value: {port!r}: {e}" for e in n.port_num_or_name(port)]
    if end is not None:
        if not isinstance(port, int):
            errors.append(f"{path}.endPort: Required value: may not be specified when `port` is not a number")
        elif end < port:
            errors.append(f"{path}.endPort: Invalid value: {end}: must be greater than or equal to `port`")
    return errors


def _peer_errors(peer: dict[str, Any], path: str) -> list[str]:
    kinds = [k for k in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(k) is not None]
    if not kinds:
        return [f"{path}: Required value: must specify a peer"]
    if "ipBlock" in kinds and len(kinds) > 1:
        return [f"{path}: Forbidden: may not specify both ipBlock and another peer"]
    errors = n.label_selector(peer.get("podSelector"), f"{path}.podSelector")
    errors += n.label_selector(peer.get("namespaceSelector"), f"{path}.namespaceSelector")
    block = peer.get("ipBlock")
    if block is None or not n.known(block.get("cidr")):
        return errors
    try:
        cidr = ipaddress.ip_network(block["cidr"], strict=False)
    except ValueError:
        return [*errors, f"{path}.ipBlock.cidr: Invalid value: {block['cidr']!r}: must be a valid CIDR"]
    for k, item in enumerate(block.get("except") or []):
        try:
            inner = ipaddress.ip_network(item, strict=False)
        except ValueError:
            errors.append(f"{path}.ipBlock.except[{k}]: Invalid value: {item!r}: must be a valid CIDR")
            continue
        if inner.version != cidr.version or not inner.subnet_of(cidr) or inner.prefixlen <= cidr.prefixlen:  # type: ignore[arg-type]
            errors.append(
                f"{path}.ipBlock.except[{k}]: Invalid value: {item!r}: must be a strict subset of `cidr`"
            )
    return errors


def _data(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    size, seen = 0, set()
    for field in ("data", "binaryData", "stringData"):
        values = obj.get(field)
        if not isinstance(values, dict) or not n.known(values):
            continue
        for key, value in values.items():
            errors += [f"{field}[{key}]: Invalid value: {key!r}: {e}" for e in n.config_map_key(key)]
            if key in seen and obj["kind"] == "ConfigMap":
                errors.append(
                    f"{field}[{key}]: Invalid value: duplicate of key present in another data field"
                )
            seen.add(key)
            size += len(value) if isinstance(value, str) else 0
    if size > MAX_DATA_BYTES:
        errors.append(f"data: Too long: must have at most {MAX_DATA_BYTES} bytes")
    return errors


def _role(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    for i, rule in enumerate(obj.get("rules") or []):
        if not rule.get("verbs"):
            errors.append(f"rules[{i}].verbs: Required value: verbs must contain at least one value")
        if rule.get("nonResourceURLs"):
            errors.append(
                f"rules[{i}].nonResourceURLs: Invalid value: namespaced rules cannot apply to non-resource URLs"
            )
        if rule.get("resources") and not rule.get("apiGroups"):
            errors.append(
                f"rules[{i}].apiGroups: Required value: resource rules must supply at least one api group"
            )
    return errors


def _role_binding(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    ref = obj.get("roleRef") or {}
    errors: list[str] = []
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        errors.append(f"roleRef.apiGroup: Unsupported value: {ref.get('apiGroup')!r}")
    if ref.get("kind") not in ("Role", "ClusterRole"):
        errors.append(f"roleRef.kind: Unsupported value: {ref.get('kind')!r}")
    if not ref.get("name"):
        errors.append("roleRef.name: Required value")
    for i, s in enumerate(obj.get("subjects") or []):
        if s.get("kind") == "ServiceAccount":
            errors += [f"subjects[{i}].name: {e}" for e in n.dns1123_subdomain(s.get("name", ""))]
            if s.get("apiGroup"):
                errors.append(
                    f'subjects[{i}].apiGroup: Unsupported value: {s["apiGroup"]!r}: supported values: ""'
                )
        elif s.get("kind") in ("User", "Group"):
            if s.get("apiGroup") != "rbac.authorization.k8s.io":
                errors.append(f"subjects[{i}].apiGroup: Unsupported value: {s.get('apiGroup')!r}")
        else:
            errors.append(f"subjects[{i}].kind: Unsupported value: {s.get('kind')!r}")
    return errors


QUOTA_STANDARD = {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
                  "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory",
                  "ephemeral-storage", "storage", "requests.cpu", "requests.memory", "requests.storage",
                  "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage"}  # fmt: skip


def _resource_quota(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    for name, value in (spec.get("hard") or {}).items():
        if "/" in name:
            errors += [f"spec.hard[{name}]: {e}" for e in n.qualified_name(name)]
        elif name not in QUOTA_STANDARD and not name.startswith(
            ("count/", "hugepages-", "requests.hugepages-")
        ):
            errors.append(
                f"spec.hard[{name}]: Invalid value: {name!r}: must be a standard resource for quota"
            )
        q = n.quantity(value)
        if q is None or q < 0:
            errors.append(f"spec.hard[{name}]: Invalid value: {value!r}: must be a non-negative quantity")
    return errors


def _storage_class(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    errors = [
        f"provisioner: Invalid value: {e}" for e in n.qualified_name((obj.get("provisioner") or "").lower())
    ]
    params = obj.get("parameters") or {}
    if len(params) > STORAGE_PARAMETERS_MAX:
        errors.append(f"parameters: Too many: must have at most {STORAGE_PARAMETERS_MAX} items")
    if sum(len(k) + len(v) for k, v in params.items() if isinstance(v, str)) > STORAGE_PARAMETERS_BYTES:
        errors.append(f"parameters: Too long: must have at most {STORAGE_PARAMETERS_BYTES} bytes")
    errors += ['parameters: Invalid value: "": field can not be empty' for k in params if not k]
    if obj.get("reclaimPolicy", "Delete") not in ("Delete", "Retain"):
        errors.append(f"reclaimPolicy: Unsupported value: {obj['reclaimPolicy']!r}")
    if obj.get("volumeBindingMode", "Immediate") not in ("Immediate", "WaitForFirstConsumer"):
        errors.append(f"volumeBindingMode: Unsupported value: {obj['volumeBindingMode']!r}")
    return errors


def _job(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    return batch.job_spec_errors(spec, obj["metadata"].get("name", ""), "spec")


def _cron_job(obj: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    job = spec["jobTemplate"]["spec"]
    return batch.cron_job_errors(obj) + batch.job_spec_errors(
        job, obj["metadata"].get("name", ""), "spec.jobTemplate.spec"
    )


CHECKS: Mapping[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "Deployment": _deployment,
    "StatefulSet": _stateful_set,
    "Service": _service,
    "HorizontalPodAutoscaler": _hpa,
    "PodDisruptionBudget": _pdb,
    "NetworkPolicy": _network_policy,
    "ConfigMap": _data,
    "Secret": _data,
    "Role": _role,
    "RoleBinding": _role_binding,
    "ResourceQuota": _resource_quota,
    "StorageClass": _storage_class,
    "Job": _job,
    "CronJob": _cron_job,
}
