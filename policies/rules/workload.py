"""Serving workloads on Kubernetes: hardened pods, limits, probes, pinned images, HPA and PDB."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .core import Context, Finding, Resource, Rule, as_list, as_number, get, is_unknown, references, types

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"
HPA = types(
    "kubernetes:autoscaling/v2:HorizontalPodAutoscaler", "kubernetes:autoscaling/v1:HorizontalPodAutoscaler"
)
PDB = types("kubernetes:policy/v1:PodDisruptionBudget")
POD_SPEC = {
    DEPLOYMENT: "spec.template.spec",
    STATEFULSET: "spec.template.spec",
    "kubernetes:apps/v1:DaemonSet": "spec.template.spec",
    "kubernetes:batch/v1:Job": "spec.template.spec",
    "kubernetes:batch/v1:CronJob": "spec.jobTemplate.spec.template.spec",
    "kubernetes:core/v1:Pod": "spec",
}
WORKLOADS = types(*POD_SPEC)
LONG_RUNNING = types(DEPLOYMENT, STATEFULSET)
MAX_REPLICAS = 20


def pod_spec(r: Resource) -> dict[str, Any]:
    spec = get(r.inputs, POD_SPEC[r.type])
    return spec if isinstance(spec, dict) else {}


def containers(r: Resource) -> list[tuple[str, dict[str, Any]]]:
    spec = pod_spec(r)
    out = []
    for key in ("initContainers", "containers"):
        for c in as_list(spec.get(key)):
            if isinstance(c, dict):
                out.append((f"{key}[{c.get('name', '?')}]", c))
    return out


def check_security_context(r: Resource, ctx: Context) -> Iterator[str]:
    pod_ctx = pod_spec(r).get("securityContext") or {}
    for where, c in containers(r):
        sc = c.get("securityContext") or {}
        non_root = sc.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
        if non_root is not True and not is_unknown(non_root):
            yield f"{where}: set securityContext.runAsNonRoot=True (and a numeric runAsUser)."
        if sc.get("readOnlyRootFilesystem") is not True:
            yield f"{where}: set securityContext.readOnlyRootFilesystem=True (mount an emptyDir for scratch space)."
        if sc.get("allowPrivilegeEscalation") is not False:
            yield f"{where}: set securityContext.allowPrivilegeEscalation=False."
        if sc.get("privileged") is True:
            yield f"{where}: remove securityContext.privileged=True."


def check_resources_probes(r: Resource, ctx: Context) -> Iterator[str]:
    for where, c in containers(r):
        limits = get(c, "resources.limits") or {}
        missing = [k for k in ("cpu", "memory") if k not in limits]
        if missing and not is_unknown(limits):
            yield f"{where}: set resources.limits {missing} (and requests) so one pod cannot starve the node."
        if LONG_RUNNING(r.type) and where.startswith("containers"):
            for probe in ("readinessProbe", "livenessProbe"):
                if c.get(probe) is None:
                    yield f"{where}: add a {probe} (Triton: HTTP GET /v2/health/ready and /v2/health/live)."


def _environment(r: Resource, ctx: Context) -> str | None:
    if ctx.environment:
        return ctx.environment
    for path in ("metadata.labels.environment", "metadata.labels.app.kubernetes.io/environment"):
        v = get(r.inputs, path)
        if isinstance(v, str):
            return v
    return None


def check_image(r: Resource, ctx: Context) -> Iterator[str]:
    prod = _environment(r, ctx) == "prod"
    for where, c in containers(r):
        image = c.get("image")
        if not isinstance(image, str) or is_unknown(image):
            continue
        name, _, digest = image.partition("@")
        tag = name.rsplit("/", 1)[-1].partition(":")[2]
        if tag == "latest" or (not tag and not digest):
            yield f"{where}: image {image!r} floats ('latest' or no tag): pin a version tag, and a digest in prod."
        elif prod and not digest.startswith("sha256:"):
            yield f"{where}: image {image!r} is not pinned by digest in prod: use name@sha256:<digest> from the build record."


def check_hpa(r: Resource, ctx: Context) -> Iterator[str]:
    lo_raw, hi_raw = get(r.inputs, "spec.minReplicas", 1), get(r.inputs, "spec.maxReplicas")
    lo, hi = as_number(lo_raw), as_number(hi_raw)
    cap = float(ctx.setting("maxReplicas", MAX_REPLICAS))
    if hi is None:
        if not is_unknown(hi_raw):
            yield "HPA has no spec.maxReplicas."
        return
    if lo is not None and lo > hi:
        yield f"HPA minReplicas {lo:g} > maxReplicas {hi:g}."
    if hi > cap:
        yield f"HPA maxReplicas {hi:g} exceeds the cap {cap:g} (pack config maxReplicas)."
    if lo is not None and lo < 1:
        yield "HPA minReplicas < 1 leaves the service with no pod."


def _name(r: Resource) -> Any:
    return get(r.inputs, "metadata.name")


def _targets(hpa: Resource, dep: Resource) -> bool:
    ref = get(hpa.inputs, "spec.scaleTargetRef") or {}
    name = get(ref, "name")
    if is_unknown(name):
        return dep.urn in hpa.dependencies
    return get(ref, "kind") == "Deployment" and name in {_name(dep), dep.name}


def _selects(pdb: Resource, dep: Resource) -> bool:
    sel = get(pdb.inputs, "spec.selector.matchLabels")
    labels = get(dep.inputs, "spec.template.metadata.labels")
    if is_unknown(sel) or is_unknown(labels):
        return dep.urn in pdb.dependencies
    if not isinstance(sel, dict) or not isinstance(labels, dict) or not sel:
        return False
    ns = (
        get(pdb.inputs, "metadata.namespace") or "default",
        get(dep.inputs, "metadata.namespace") or "default",
    )
    return ns[0] == ns[1] and all(labels.get(k) == v for k, v in sel.items())


def check_availability(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    hpas = [r for r in resources if HPA(r.type)]
    pdbs = [r for r in resources if PDB(r.type)]
    for dep in resources:
        if dep.type != DEPLOYMENT:
            continue
        if not any(_targets(h, dep) or references(h, dep) for h in hpas):
            yield Finding(f"Deployment '{dep.name}' has no HorizontalPodAutoscaler targeting it.", dep.urn)
        if not any(_selects(p, dep) for p in pdbs):
            yield Finding(
                f"Deployment '{dep.name}' has no PodDisruptionBudget selecting its pods (node drains could take the service down).",
                dep.urn,
            )


RULES = (
    Rule(
        name="k8s-workload-security-context",
        description="Pods run as non-root with a read-only root filesystem and no privilege escalation.",
        kind="resource",
        severity="high",
        enforcement="advisory",
        remediation="securityContext: runAsNonRoot=True, runAsUser=1000, readOnlyRootFilesystem=True, allowPrivilegeEscalation=False, capabilities.drop=['ALL'].",
        url="https://kubernetes.io/docs/tasks/configure-pod-container/security-context/",
        validate=check_security_context,
        applies_to=WORKLOADS,
    ),
    Rule(
        name="k8s-workload-resources-probes",
        description="Containers declare CPU/memory limits; long-running ones have readiness and liveness probes.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Set resources.requests/limits and readiness/liveness probes on every serving container.",
        url="https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",
        validate=check_resources_probes,
        applies_to=WORKLOADS,
    ),
    Rule(
        name="k8s-image-pinned",
        description="Images are never 'latest' or untagged, and are pinned by digest in prod.",
        kind="resource",
        severity="high",
        enforcement="advisory",
        remediation="Use the image reference from reports/images/build-record.json: name@sha256:<digest> in prod, name:<version> elsewhere.",
        url="https://kubernetes.io/docs/concepts/containers/images/#image-names",
        validate=check_image,
        applies_to=WORKLOADS,
        config_schema={"environment": {"type": "string"}},
    ),
    Rule(
        name="k8s-hpa-bounds",
        description=f"Autoscalers have 1 <= minReplicas <= maxReplicas <= {MAX_REPLICAS}.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Set spec.minReplicas and spec.maxReplicas within the cap (pack config maxReplicas).",
        url="https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/",
        validate=check_hpa,
        applies_to=HPA,
        config_schema={"maxReplicas": {"type": "number"}},
    ),
    Rule(
        name="k8s-serving-availability",
        description="Every Deployment has an HPA targeting it and a PodDisruptionBudget selecting its pods.",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="Declare autoscaling/v2 HorizontalPodAutoscaler(scaleTargetRef=Deployment) and policy/v1 PodDisruptionBudget(selector=the pod labels).",
        url="https://kubernetes.io/docs/tasks/run-application/configure-pdb/",
        validate=check_availability,
        applies_to=types(DEPLOYMENT, "kubernetes:autoscaling/*", "kubernetes:policy/v1:PodDisruptionBudget"),
    ),
)
