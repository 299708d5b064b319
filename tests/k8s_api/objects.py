"""The API server's validation of each kind of object this repository declares or renders, on top of the OpenAPI
schema (kubernetes-validate): `api_errors(obj)` returns the HTTP 422 messages (and, for pods in a namespace that
enforces Pod Security "restricted", the admission's 403 reasons); `assert_accepted(objs)` fails with all of them,
and with the keys of a ConfigMap or Secret among `objs` that a pod's envFrom takes and the kubelet would skip
(tests/k8s_api/env.py).

Every object: `ValidateObjectMeta` with the kind's name rule (tests/k8s_api/names.py); its own fields
(tests/k8s_api/kinds.py, batch.py); every pod it makes (tests/k8s_api/pod.py), with the template restartPolicy its
controller allows (`ValidatePodTemplateSpecForReplicaSet`: Always; batch `validateJobSpec`: OnFailure or Never).
Argo's CRDs are checked as the pods its controller creates from them (argo-workflows
workflow/controller/workflowpod.go `createWorkflowPod`: the template's container as `main`, the executor's `init`
and `wait` with the controller config's `executor.securityContext`, the workflow's volumes plus its
volumeClaimTemplates, restartPolicy Never).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from typing import Any

from tests.k8s_api import env, pod
from tests.k8s_api import names as n
from tests.k8s_api.kinds import CHECKS

CLUSTER_SCOPED = {"Namespace", "StorageClass", "ClusterRole", "ClusterRoleBinding"}
NAME_RULES: Mapping[str, Callable[[str], list[str]]] = {
    "Namespace": n.dns1123_label,
    "Service": n.dns1035_label,  # ValidateServiceName = NameIsDNS1035Label
    "Role": n.path_segment_name,
    "RoleBinding": n.path_segment_name,
}
ARGO_KINDS = {"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate"}


def api_errors(
    obj: dict[str, Any], restricted: Set[str] = frozenset(), executor: dict[str, Any] | None = None
) -> list[str]:
    """`restricted`: namespaces whose Pod Security enforce label is "restricted"; `executor`: the Argo controller's
    executor securityContext (the chart's `executor.securityContext`), None to leave Argo's own containers out."""
    if not n.known(obj.get("spec")) or not n.known(obj.get("metadata")):
        return []  # a preview that cannot know them yet (the callers assert what they expect to be known)
    kind, meta = obj.get("kind", ""), obj.get("metadata") or {}
    errors = n.object_meta(
        meta, "metadata", NAME_RULES.get(kind, n.dns1123_subdomain), kind not in CLUSTER_SCOPED
    )
    spec = obj.get("spec") or {}
    namespace = meta.get("namespace", "")
    check = CHECKS.get(kind)
    if check is not None:
        errors += check(obj, spec)
    for path, template_meta, pod_spec, policies in pod_templates(obj, executor):
        errors += n.object_meta({"name": "x", **template_meta}, f"{path}.metadata", n.dns1123_subdomain, True)
        errors += pod.pod_spec_errors(pod_spec, f"{path}.spec", policies)
        if namespace in restricted:
            errors += pod.restricted_errors(pod_spec, f"{path}.spec")
    return [f"{kind} {namespace}/{meta.get('name')}: {e}" for e in errors]


def assert_accepted(
    objs: Any, restricted: Set[str] = frozenset(), executor: dict[str, Any] | None = None
) -> int:
    """Fail with every message the API server would answer; returns how many objects were checked."""
    found = list(objects(objs))
    errors = [e for o in found for e in api_errors(o, restricted, executor)]
    errors += env.skipped_keys(_pods(found), found)
    assert not errors, "the API server would refuse these objects (or the kubelet drop):\n" + "\n".join(
        errors
    )
    return len(found)


def _pods(found: list[dict[str, Any]]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, namespace, pod spec) of every pod the objects make."""
    for o in found:
        meta = o.get("metadata") or {}
        if n.known(o.get("spec")) and n.known(meta):
            namespace = meta.get("namespace", "")
            for path, _, spec, _ in pod_templates(o, None):
                yield f"{o.get('kind')} {namespace}/{meta.get('name')}: {path}.spec", namespace, spec


def objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from objects(item)
    elif isinstance(value, dict) and "kind" in value:
        yield value


def pod_templates(
    obj: dict[str, Any], executor: dict[str, Any] | None
) -> Iterator[tuple[str, dict, dict, set[str]]]:
    """(path, template metadata, pod spec, allowed restartPolicy values) of every pod the object makes."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
        t = spec.get("template") or {}
        yield "spec.template", t.get("metadata") or {}, _with_claims(t.get("spec") or {}, spec), {"Always"}
    elif kind == "Job":
        t = spec["template"]
        yield "spec.template", _job_labels(t, obj), t["spec"], {"OnFailure", "Never"}
    elif kind == "CronJob":
        t = spec["jobTemplate"]["spec"]["template"]
        yield "spec.jobTemplate.spec.template", t.get("metadata") or {}, t["spec"], {"OnFailure", "Never"}
    elif kind in ARGO_KINDS:
        yield from argo_pods(spec, executor)


def _job_labels(template: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The Job strategy adds `batch.kubernetes.io/job-name: <name>` (a label value: at most 63 characters)."""
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), "batch.kubernetes.io/job-name": job["metadata"]["name"]}
    return meta


def _with_claims(pod_spec: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A StatefulSet's volumeClaimTemplates become volumes of its pods (mounts may name them)."""
    claims = [{"name": c["metadata"]["name"], "persistentVolumeClaim": {"claimName": c["metadata"]["name"]}}
              for c in spec.get("volumeClaimTemplates") or []]  # fmt: skip
    return {**pod_spec, "volumes": [*(pod_spec.get("volumes") or []), *claims]} if claims else pod_spec


def argo_pods(
    spec: dict[str, Any], executor: dict[str, Any] | None
) -> Iterator[tuple[str, dict, dict, set[str]]]:
    """The pod Argo's controller creates for each container template (workflowpod.go createWorkflowPod)."""
    claims = [{"name": c["metadata"]["name"], "persistentVolumeClaim": {"claimName": c["metadata"]["name"]}}
              for c in spec.get("volumeClaimTemplates") or []]  # fmt: skip
    volumes = [*(spec.get("volumes") or []), *claims]
    argo_own: list[dict[str, Any]] = []
    if executor is not None:
        volumes.append({"name": "var-run-argo", "emptyDir": {}})
        argo_own = [{"name": "wait", "image": "argoexec", "securityContext": executor,
                     "volumeMounts": [{"name": "var-run-argo", "mountPath": "/var/run/argo"}]}]  # fmt: skip
    for i, t in enumerate(spec.get("templates") or []):
        if "container" not in t:
            continue
        main = {**t["container"], "name": "main"}
        pod_spec = {
            "restartPolicy": "Never",
            "serviceAccountName": spec.get("serviceAccountName"),
            "securityContext": t.get("securityContext", spec.get("securityContext")),
            "nodeSelector": t.get("nodeSelector", spec.get("nodeSelector")),
            "tolerations": t.get("tolerations", spec.get("tolerations")),
            "volumes": volumes,
            "containers": [*argo_own, main],
            **({"initContainers": [{**argo_own[0], "name": "init"}]} if argo_own else {}),
        }
        meta = {
            "labels": {
                **((spec.get("podMetadata") or {}).get("labels") or {}),
                **((t.get("metadata") or {}).get("labels") or {}),
            }
        }
        yield (
            f"spec.templates[{i}] (pod)",
            meta,
            {k: v for k, v in pod_spec.items() if v is not None},
            {"Never"},
        )


def helm_values_errors(values: Any, path: str = "values") -> list[str]:
    """What chart values put into objects verbatim: nodeSelector (labels), tolerations, pod labels/annotations."""
    errors: list[str] = []
    if isinstance(values, dict):
        for key, value in values.items():
            at = f"{path}.{key}"
            if key == "nodeSelector" and isinstance(value, dict):
                errors += n.labels(value, at)
            elif key == "tolerations" and isinstance(value, list):
                errors += pod.tolerations_errors(value, at)
            elif key in ("podLabels", "commonLabels") and isinstance(value, dict):
                errors += n.labels(value, at)
            elif key == "podAnnotations" and isinstance(value, dict):
                errors += n.annotations(value, at)
            else:
                errors += helm_values_errors(value, at)
    elif isinstance(values, list):
        for i, item in enumerate(values):
            errors += helm_values_errors(item, f"{path}[{i}]")
    return errors
