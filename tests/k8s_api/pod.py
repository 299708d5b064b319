"""The API server's rules for a pod spec (every Deployment, StatefulSet, Job, CronJob and Argo step runs one), and
the Pod Security "restricted" profile its admission enforces in namespaces labelled for it.

Ported from kubernetes/kubernetes `pkg/apis/core/validation/validation.go`: `ValidatePodSpec`, `validateContainers`
(`validateContainerCommon`: names, image, `validateContainerPorts`, `ValidateEnv` and `ValidateEnvFrom` in
tests/k8s_api/env.py, `ValidateVolumeMounts`, `ValidateContainerResourceRequirements`, `validateProbe` +
`validateLivenessProbe`/`validateStartupProbe`/`validateReadinessProbe`), `ValidateVolumes`, `validateRestartPolicy`, `ValidateTolerations`,
`validateTopologySpreadConstraints`, `validatePodSpecSecurityContext`, `ValidateSecurityContext`; and from
`staging/src/k8s.io/pod-security-admission/policy/check_*.go` (restricted: `check_allowPrivilegeEscalation.go`,
`check_capabilities_restricted.go`, `check_runAsNonRoot.go`, `check_runAsUser.go`,
`check_seccompProfile_restricted.go`, `check_restrictedVolumes.go`; baseline: `check_privileged.go`,
`check_hostNamespaces.go`, `check_hostPorts.go`, `check_hostPathVolumes.go`). Defaulting that runs before
validation (pkg/apis/core/v1/defaults.go: restartPolicy Always, requests from limits, probe thresholds) is applied.
"""

from __future__ import annotations

from typing import Any

from tests.k8s_api import env
from tests.k8s_api import names as n

RESTART_POLICIES = {"Always", "OnFailure", "Never"}
PROTOCOLS = {"TCP", "UDP", "SCTP"}
TOLERATION_OPERATORS = {"Equal", "Exists", ""}
TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
WHEN_UNSATISFIABLE = {"DoNotSchedule", "ScheduleAnyway"}
SECCOMP_TYPES = {"RuntimeDefault", "Unconfined", "Localhost"}
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
# Resources the kubelet may overcommit; every other (extended) resource needs requests == limits.
NATIVE = {"cpu", "memory", "ephemeral-storage"}
# check_restrictedVolumes.go: the only volume sources "restricted" allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}  # fmt: skip
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def pod_spec_errors(
    spec: dict[str, Any], path: str, restart_policies: set[str] = RESTART_POLICIES
) -> list[str]:
    errors: list[str] = []
    volumes = _volumes(spec.get("volumes") or [], f"{path}.volumes", errors)
    containers, init = spec.get("containers") or [], spec.get("initContainers") or []
    if not containers:
        errors.append(f"{path}.containers: Required value")
    seen: set[str] = set()
    for kind, group in (("initContainers", init), ("containers", containers)):
        for i, c in enumerate(group):
            at = f"{path}.{kind}[{i}]"
            name = c.get("name", "")
            if name in seen:
                errors.append(f"{at}.name: Duplicate value: {name!r}")
            seen.add(name)
            errors += container_errors(c, at, volumes, probes=kind == "containers")
    policy = spec.get("restartPolicy") or "Always"  # SetDefaults_PodSpec
    if policy not in restart_policies:
        errors.append(
            f"{path}.restartPolicy: Unsupported value: {policy!r}: supported values: {sorted(restart_policies)}"
        )
    for field in ("hostname", "subdomain"):
        if spec.get(field):
            errors += [
                f"{path}.{field}: Invalid value: {spec[field]!r}: {e}" for e in n.dns1123_label(spec[field])
            ]
    if spec.get("serviceAccountName"):
        errors += [f"{path}.serviceAccountName: {e}" for e in n.dns1123_subdomain(spec["serviceAccountName"])]
    errors += n.labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errors += tolerations_errors(spec.get("tolerations") or [], f"{path}.tolerations")
    errors += _spread_errors(spec.get("topologySpreadConstraints") or [], f"{path}.topologySpreadConstraints")
    errors += _pod_security_context_errors(spec.get("securityContext") or {}, f"{path}.securityContext")
    for field, low in (("terminationGracePeriodSeconds", 0), ("activeDeadlineSeconds", 1)):
        if spec.get(field) is not None and spec[field] < low:
            errors.append(
                f"{path}.{field}: Invalid value: {spec[field]}: must be greater than or equal to {low}"
            )
    return errors


def _volumes(volumes: list[dict[str, Any]], path: str, errors: list[str]) -> set[str]:
    declared: set[str] = set()
    for i, v in enumerate(volumes):
        name = v.get("name", "")
        errors += [f"{path}[{i}].name: Invalid value: {name!r}: {e}" for e in n.dns1123_label(name)]
        if name in declared:
            errors.append(f"{path}[{i}].name: Duplicate value: {name!r}")
        declared.add(name)
        sources = set(v) - {"name"}
        if len(sources) != 1:
            errors.append(f"{path}[{i}]: must specify exactly 1 volume type, got {sorted(sources)}")
    return declared


def container_errors(c: dict[str, Any], path: str, volumes: set[str], probes: bool = True) -> list[str]:
    errors = [
        f"{path}.name: Invalid value: {c.get('name')!r}: {e}" for e in n.dns1123_label(c.get("name", ""))
    ]
    if not c.get("image"):
        errors.append(f"{path}.image: Required value")
    port_names: set[str] = set()
    for i, p in enumerate(c.get("ports") or []):
        at = f"{path}.ports[{i}]"
        if p.get("name"):
            errors += [f"{at}.name: Invalid value: {p['name']!r}: {e}" for e in n.port_name(p["name"])]
            if p["name"] in port_names:
                errors.append(f"{at}.name: Duplicate value: {p['name']!r}")
            port_names.add(p["name"])
        errors += [f"{at}.containerPort: Invalid value: {p.get('containerPort')!r}: {e}"
                   for e in n.port_num(p.get("containerPort"))]  # fmt: skip
        if p.get("hostPort") is not None:
            errors += [f"{at}.hostPort: {e}" for e in n.port_num(p["hostPort"], low=0)]
        if p.get("protocol", "TCP") not in PROTOCOLS:
            errors.append(f"{at}.protocol: Unsupported value: {p['protocol']!r}")
    errors += env.env_errors(c.get("env") or [], f"{path}.env")
    errors += env.env_from_errors(c.get("envFrom") or [], f"{path}.envFrom")
    mounts: set[str] = set()
    for i, m in enumerate(c.get("volumeMounts") or []):
        at = f"{path}.volumeMounts[{i}]"
        if m.get("name") not in volumes:
            errors.append(f"{at}.name: Not found: {m.get('name')!r}")
        mount_path = m.get("mountPath")
        if not mount_path:
            errors.append(f"{at}.mountPath: Required value")
        elif mount_path in mounts:
            errors.append(f"{at}.mountPath: Invalid value: {mount_path!r}: must be unique")
        mounts.add(mount_path)
        sub = m.get("subPath") or ""
        if sub.startswith("/") or ".." in sub.split("/"):
            errors.append(f"{at}.subPath: Invalid value: {sub!r}: must be a relative path without '..'")
    errors += resources_errors(c.get("resources") or {}, f"{path}.resources")
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        if c.get(kind) is not None:
            if not probes:
                errors.append(f"{path}.{kind}: Forbidden: may not be set for init containers")
            errors += _probe_errors(c[kind], f"{path}.{kind}", kind)
    return errors + _security_context_errors(c.get("securityContext") or {}, f"{path}.securityContext")


def resources_errors(resources: dict[str, Any], path: str) -> list[str]:
    """ValidateResourceRequirements, after SetDefaults_ResourceRequirements copies missing requests from limits."""
    errors: list[str] = []
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            if "/" not in name and name not in NATIVE and not name.startswith("hugepages-"):
                errors.append(
                    f"{path}.{kind}[{name}]: Invalid value: {name!r}: must be a standard resource for containers"
                )
            if "/" in name:
                errors += [f"{path}.{kind}[{name}]: {e}" for e in n.qualified_name(name)]
            q = n.quantity(value)
            if q is None or q < 0:
                errors.append(
                    f"{path}.{kind}[{name}]: Invalid value: {value!r}: must be a non-negative quantity"
                )
    for name, value in requests.items():
        req, lim = n.quantity(value), n.quantity(limits.get(name))
        extended = "/" in name and "kubernetes.io/" not in name  # helper.IsExtendedResourceName
        if extended and name not in limits:
            errors.append(
                f"{path}.limits: Required value: Limit must be set for non overcommitable resources"
            )
        elif extended and req != lim:
            errors.append(
                f"{path}.requests[{name}]: Invalid value: {value!r}: must be equal to {name} limit of {limits[name]}"
            )
        elif req is not None and lim is not None and req > lim:
            errors.append(
                f"{path}.requests[{name}]: Invalid value: {value!r}: must be less than or equal to {name} limit of {limits[name]}"
            )
    return errors


def _probe_errors(probe: dict[str, Any], path: str, kind: str) -> list[str]:
    handlers = [h for h in PROBE_HANDLERS if probe.get(h) is not None]
    errors: list[str] = []
    if not handlers:
        errors.append(f"{path}: Required value: must specify a handler type")
    elif len(handlers) > 1:
        errors.append(f"{path}.{handlers[1]}: Forbidden: may not specify more than 1 handler type")
    for field in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        if probe.get(field, 0) < 0:
            errors.append(
                f"{path}.{field}: Invalid value: {probe[field]}: must be greater than or equal to 0"
            )
    if kind in ("livenessProbe", "startupProbe") and probe.get("successThreshold", 1) not in (0, 1):
        errors.append(f"{path}.successThreshold: Invalid value: {probe['successThreshold']}: must be 1")
    if kind == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
        errors.append(
            f"{path}.terminationGracePeriodSeconds: Invalid value: must not be set for readinessProbes"
        )
    for handler in ("httpGet", "tcpSocket", "grpc"):
        if handler in probe:
            port = probe[handler].get("port")
            errors += [f"{path}.{handler}.port: Invalid value: {port!r}: {e}" for e in
                       (n.port_num(port) if handler == "grpc" else n.port_num_or_name(port))]  # fmt: skip
    return errors


def tolerations_errors(tolerations: list[dict[str, Any]], path: str) -> list[str]:
    errors: list[str] = []
    for i, t in enumerate(tolerations):
        at = f"{path}[{i}]"
        key, op, value, effect = (
            t.get("key", ""),
            t.get("operator", ""),
            t.get("value", ""),
            t.get("effect", ""),
        )
        if key:
            errors += [f"{at}.key: Invalid value: {key!r}: {e}" for e in n.qualified_name(key)]
        elif op != "Exists":
            errors.append(
                f"{at}.operator: Invalid value: {op!r}: operator must be Exists when `key` is empty"
            )
        if op not in TOLERATION_OPERATORS:
            errors.append(f'{at}.operator: Unsupported value: {op!r}: supported values: "Equal", "Exists"')
        elif op == "Exists" and value:
            errors.append(
                f"{at}.operator: Invalid value: {value!r}: value must be empty when `operator` is 'Exists'"
            )
        elif op != "Exists" and value:
            errors += [f"{at}.value: Invalid value: {value!r}: {e}" for e in n.label_value(value)]
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(
                f"{at}.effect: Invalid value: {effect!r}: effect must be 'NoExecute' when `tolerationSeconds` is set"
            )
        if effect and effect not in TAINT_EFFECTS:
            errors.append(
                f"{at}.effect: Unsupported value: {effect!r}: supported values: {sorted(TAINT_EFFECTS)}"
            )
    return errors


def taint_errors(key: str, value: str, effect: str, path: str) -> list[str]:
    """validateNodeTaints (a node's spec.taints): what node pools must declare."""
    errors = [f"{path}.key: Invalid value: {key!r}: {e}" for e in n.qualified_name(key)]
    errors += [f"{path}.value: Invalid value: {value!r}: {e}" for e in n.label_value(value)]
    if effect not in TAINT_EFFECTS:
        errors.append(
            f"{path}.effect: Unsupported value: {effect!r}: supported values: {sorted(TAINT_EFFECTS)}"
        )
    return errors


def _spread_errors(constraints: list[dict[str, Any]], path: str) -> list[str]:
    errors: list[str] = []
    pairs: set[tuple[str, str]] = set()
    for i, c in enumerate(constraints):
        at = f"{path}[{i}]"
        if c.get("maxSkew", 0) <= 0:
            errors.append(f"{at}.maxSkew: Invalid value: {c.get('maxSkew')}: must be greater than zero")
        key, when = c.get("topologyKey", ""), c.get("whenUnsatisfiable")
        if not key:
            errors.append(f"{at}.topologyKey: Required value: can not be empty")
        else:
            errors += [f"{at}.topologyKey: Invalid value: {key!r}: {e}" for e in n.qualified_name(key)]
        if when not in WHEN_UNSATISFIABLE:
            errors.append(f"{at}.whenUnsatisfiable: Unsupported value: {when!r}")
        if c.get("minDomains") is not None and (when != "DoNotSchedule" or c["minDomains"] <= 0):
            errors.append(
                f"{at}.minDomains: Invalid value: {c['minDomains']}: requires DoNotSchedule and > 0"
            )
        if (key, when) in pairs:
            errors.append(f"{at}: Duplicate value: {{{key!r}, {when!r}}}")
        pairs.add((key, when))
        errors += n.label_selector(c.get("labelSelector"), f"{at}.labelSelector")
    return errors


def _seccomp_errors(profile: dict[str, Any] | None, path: str) -> list[str]:
    if not profile:
        return []
    kind = profile.get("type")
    if kind not in SECCOMP_TYPES:
        return [f"{path}.type: Unsupported value: {kind!r}"]
    if (kind == "Localhost") != bool(profile.get("localhostProfile")):
        return [f"{path}.localhostProfile: localhostProfile must be set if and only if type is Localhost"]
    return []


def _pod_security_context_errors(sc: dict[str, Any], path: str) -> list[str]:
    errors = [f"{path}.{f}: Invalid value: {sc[f]}: must be between 0 and 2147483647, inclusive"
              for f in ("runAsUser", "runAsGroup", "fsGroup") if sc.get(f) is not None and sc[f] < 0]  # fmt: skip
    return errors + _seccomp_errors(sc.get("seccompProfile"), f"{path}.seccompProfile")


def _security_context_errors(sc: dict[str, Any], path: str) -> list[str]:
    errors = [f"{path}.{f}: Invalid value: {sc[f]}: must be between 0 and 2147483647, inclusive"
              for f in ("runAsUser", "runAsGroup") if sc.get(f) is not None and sc[f] < 0]  # fmt: skip
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged"):
            errors.append(
                f"{path}: Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
            )
        if "CAP_SYS_ADMIN" in ((sc.get("capabilities") or {}).get("add") or []):
            errors.append(
                f"{path}: Invalid value: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"
            )
    return errors + _seccomp_errors(sc.get("seccompProfile"), f"{path}.seccompProfile")


def restricted_errors(spec: dict[str, Any], path: str) -> list[str]:
    """Pod Security "restricted" (latest): the admission refuses the pod (403) with these reasons."""
    errors: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            errors.append(f"{path}: host namespaces ({field}=true)")
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            errors.append(f"{path}: restricted volume types (volume {v.get('name')!r} uses {sorted(kinds)})")
    if pod_sc.get("runAsUser") == 0:
        errors.append(f"{path}: runAsUser=0 (pod must not set runAsUser=0)")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        sc, name = c.get("securityContext") or {}, c.get("name")
        caps = sc.get("capabilities") or {}
        if sc.get("privileged"):
            errors.append(
                f"{path}: privileged (container {name!r} must not set securityContext.privileged=true)"
            )
        if sc.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{path}: allowPrivilegeEscalation != false (container {name!r} must set "
                          "securityContext.allowPrivilegeEscalation=false)")  # fmt: skip
        if "ALL" not in (caps.get("drop") or []) or set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            errors.append(f"{path}: unrestricted capabilities (container {name!r} must set "
                          "securityContext.capabilities.drop=[\"ALL\"] and add only NET_BIND_SERVICE)")  # fmt: skip
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            errors.append(f"{path}: runAsNonRoot != true (pod or container {name!r} must set "
                          "securityContext.runAsNonRoot=true)")  # fmt: skip
        if sc.get("runAsUser") == 0:
            errors.append(f"{path}: runAsUser=0 (container {name!r} must not set runAsUser=0)")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            errors.append(f"{path}: seccompProfile (pod or container {name!r} must set "
                          "securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")")  # fmt: skip
        if any(p.get("hostPort") for p in c.get("ports") or []):
            errors.append(f"{path}: hostPort (container {name!r} uses hostPorts)")
    return errors
