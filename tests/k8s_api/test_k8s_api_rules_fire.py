"""Each ported API-server rule (tests/k8s_api/) fires on a mutated object and stays quiet on the compliant one: a
rule that could not fail would prove nothing about the rendered objects it is run on."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.k8s_api import kinds, objects, pod
from tests.k8s_api import names as n

LABELS = {"app.kubernetes.io/name": "triton"}
CONTAINER: dict[str, Any] = {
    "name": "triton",
    "image": "reg/serving:1",
    "ports": [{"name": "http", "containerPort": 8000}, {"name": "grpc", "containerPort": 8001}],
    "env": [{"name": "MODEL", "value": "sentiment"}],
    "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"},
    },
    "livenessProbe": {"httpGet": {"path": "/live", "port": "http"}, "periodSeconds": 10},
    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8000}, "successThreshold": 2},
    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
}
POD: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "serviceAccountName": "triton",
    "nodeSelector": {"platform.eu-ml/pool": "serving"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": LABELS}}],
    "containers": [CONTAINER],
    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
}  # fmt: skip
META = {"name": "triton", "namespace": "serving", "labels": LABELS}
BASE: dict[str, dict[str, Any]] = {
    "Deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": META, "spec": {
        "replicas": 1, "selector": {"matchLabels": LABELS},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": LABELS, "annotations": {"prometheus.io/scrape": "true"}}, "spec": POD}}},
    "Service": {"apiVersion": "v1", "kind": "Service", "metadata": META, "spec": {
        "selector": LABELS, "ports": [{"name": "http", "port": 8000, "targetPort": "http"},
                                      {"name": "grpc", "port": 8001, "targetPort": 8001}]}},
    "HorizontalPodAutoscaler": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": META,
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "triton"},
                 "minReplicas": 1, "maxReplicas": 3,
                 "metrics": [{"type": "Pods", "pods": {"metric": {"name": "queue_us"},
                                                       "target": {"type": "AverageValue", "averageValue": "20000"}}}],
                 "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0},
                              "scaleDown": {"stabilizationWindowSeconds": 300,
                                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}}},
    "PodDisruptionBudget": {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": META,
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": LABELS}}},
    "NetworkPolicy": {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": META, "spec": {
        "podSelector": {"matchLabels": LABELS}, "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": 8000, "protocol": "TCP"}]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}],
                    "ports": [{"port": 443, "protocol": "TCP", "endPort": 444}]}]}},
    "ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**META, "name": "dashboards"},
                  "data": {"serving.json": "{}"}},
    "Namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving", "labels": LABELS}},
    "ServiceAccount": {"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {**META, "annotations": {"iam.gke.io/gcp-service-account": "a@b.iam"}}},
    "Role": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": META,
             "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]},
    "RoleBinding": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": META,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "triton"},
                    "subjects": [{"kind": "ServiceAccount", "name": "ci-deployer", "namespace": "ci"}]},
    "ResourceQuota": {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": META,
                      "spec": {"hard": {"requests.nvidia.com/gpu": "4", "pods": "10"}}},
    "StorageClass": {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
                     "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"},
                     "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"},
    "Job": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {**META, "name": "train"}, "spec": {
        "completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 3,
        "template": {"metadata": {"labels": LABELS}, "spec": {**POD, "restartPolicy": "Never", "subdomain": "train"}}}},
    "CronJob": {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {**META, "name": "drift"}, "spec": {
        "schedule": "17 * * * *", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 60,
        "jobTemplate": {"spec": {"template": {"metadata": {"labels": LABELS},
                                              "spec": {**POD, "restartPolicy": "OnFailure"}}}}}},
    "WorkflowTemplate": {"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
        "metadata": {**META, "name": "retrain-dev"}, "spec": {
            "serviceAccountName": "trainer", "securityContext": POD["securityContext"],
            "volumeClaimTemplates": [{"metadata": {"name": "work"}, "spec": {}}],
            "templates": [{"name": "dag", "dag": {"tasks": []}},
                          {"name": "train", "nodeSelector": {"platform.eu-ml/pool": "gpu"},
                           "container": {"image": "reg/training:1", "securityContext": CONTAINER["securityContext"],
                                         "volumeMounts": [{"name": "work", "mountPath": "/work"}]}}]}},
}  # fmt: skip
EXECUTOR = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
RESTRICTED = {"serving"}

Mutation = Callable[[dict[str, Any]], Any]


def _pod(o: dict[str, Any]) -> dict[str, Any]:
    return o["spec"]["template"]["spec"]


def _c(o: dict[str, Any]) -> dict[str, Any]:
    return _pod(o)["containers"][0]


# (kind, mutation, part of the API server's message)
CASES: list[tuple[str, Mutation, str]] = [
    # apimachinery: names, labels, annotations (ValidateObjectMeta)
    ("Namespace", lambda o: o["metadata"].update(name="Serving"), "RFC 1123 label"),
    ("Service", lambda o: o["metadata"].update(name="1triton"), "DNS-1035 label"),
    ("ConfigMap", lambda o: o["metadata"].update(name="a_b"), "RFC 1123 subdomain"),
    ("ServiceAccount", lambda o: o["metadata"]["labels"].update({"a/b/c": "x"}), "qualified name"),
    ("ServiceAccount", lambda o: o["metadata"]["labels"].update(k="v" * 64), "no more than 63 characters"),
    ("ServiceAccount", lambda o: o["metadata"]["labels"].update({"x" * 254 + "/k": "v"}), "prefix part"),
    ("ServiceAccount", lambda o: o["metadata"]["labels"].update(k="a b"), "valid label"),
    ("ServiceAccount", lambda o: o["metadata"]["annotations"].update(big="x" * 262144), "at most 262144 bytes"),
    ("ServiceAccount", lambda o: o["metadata"]["annotations"].update({"bad key": "x"}), "name part must consist"),
    # pod spec (ValidatePodSpec and friends)
    ("Deployment", lambda o: _c(o).update(name="Triton"), "RFC 1123 label"),
    ("Deployment", lambda o: _pod(o)["containers"].append(copy.deepcopy(_c(o))), "Duplicate value: 'triton'"),
    ("Deployment", lambda o: _c(o).update(image=""), "image: Required"),
    ("Deployment", lambda o: _c(o)["ports"][0].update(name="http-metrics-port"), "no more than 15"),
    ("Deployment", lambda o: _c(o)["ports"][0].update(name="8000"), "at least one letter"),
    ("Deployment", lambda o: _c(o)["ports"][1].update(name="http"), "Duplicate value: 'http'"),
    ("Deployment", lambda o: _c(o)["ports"][0].update(containerPort=70000), "between 1 and 65535"),
    ("Deployment", lambda o: _c(o)["ports"][0].update(protocol="HTTP"), "protocol: Unsupported"),
    ("Deployment", lambda o: _c(o)["env"].append({"name": "1=X", "value": "v"}), "environment variable name"),
    ("Deployment", lambda o: _c(o)["env"].append({"name": "S", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}), "may not be specified when `value`"),
    ("Deployment", lambda o: _c(o)["env"].append({"name": "S", "valueFrom": {"secretKeyRef": {"name": "S_x", "key": "k"}}}), "RFC 1123 subdomain"),
    ("Deployment", lambda o: _c(o)["volumeMounts"].append({"name": "data", "mountPath": "/data"}), "Not found: 'data'"),
    ("Deployment", lambda o: _c(o)["volumeMounts"].append({"name": "tmp", "mountPath": "/tmp"}), "must be unique"),
    ("Deployment", lambda o: _pod(o)["volumes"].append({"name": "tmp", "emptyDir": {}}), "Duplicate value: 'tmp'"),
    ("Deployment", lambda o: _pod(o)["volumes"].append({"name": "x"}), "exactly 1 volume type"),
    ("Deployment", lambda o: _c(o)["resources"]["requests"].update(memory="2Gi"), "less than or equal to memory limit"),
    ("Deployment", lambda o: _c(o)["resources"]["requests"].update({"nvidia.com/gpu": "2"}), "must be equal to nvidia.com/gpu limit"),
    ("Deployment", lambda o: _c(o)["resources"]["limits"].pop("nvidia.com/gpu") and _c(o)["resources"]["requests"].update({"nvidia.com/gpu": "1"}), "Limit must be set"),
    ("Deployment", lambda o: _c(o)["resources"]["requests"].update(cpu="lots"), "non-negative quantity"),
    ("Deployment", lambda o: _c(o)["resources"]["requests"].update(gpu="1"), "standard resource for containers"),
    ("Deployment", lambda o: _c(o)["livenessProbe"].update(successThreshold=2), "successThreshold: Invalid value: 2: must be 1"),
    ("Deployment", lambda o: _c(o).update(startupProbe={**_c(o)["livenessProbe"], "successThreshold": 3}), "must be 1"),
    ("Deployment", lambda o: _c(o)["livenessProbe"].update(exec={"command": ["true"]}), "more than 1 handler"),
    ("Deployment", lambda o: _c(o)["readinessProbe"].pop("httpGet"), "must specify a handler type"),
    ("Deployment", lambda o: _c(o)["readinessProbe"].update(periodSeconds=-1), "greater than or equal to 0"),
    ("Deployment", lambda o: _c(o)["readinessProbe"]["httpGet"].update(port=0), "between 1 and 65535"),
    ("Deployment", lambda o: _c(o)["readinessProbe"].update(terminationGracePeriodSeconds=5), "readinessProbes"),
    ("Deployment", lambda o: _pod(o).update(restartPolicy="Never"), "restartPolicy: Unsupported value: 'Never'"),
    ("Deployment", lambda o: _pod(o).update(serviceAccountName="Triton"), "RFC 1123 subdomain"),
    ("Deployment", lambda o: _pod(o)["nodeSelector"].update(pool="gpu pool"), "valid label"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(operator="Exists"), "value must be empty"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(key=""), "operator must be Exists"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(operator="In"), "operator: Unsupported"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(effect="NO_SCHEDULE"), "effect: Unsupported"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(tolerationSeconds=30), "must be 'NoExecute'"),
    ("Deployment", lambda o: _pod(o)["tolerations"][0].update(value="a b"), "valid label"),
    ("Deployment", lambda o: _pod(o)["topologySpreadConstraints"][0].update(maxSkew=0), "greater than zero"),
    ("Deployment", lambda o: _pod(o)["topologySpreadConstraints"][0].update(whenUnsatisfiable="Never"), "whenUnsatisfiable: Unsupported"),
    ("Deployment", lambda o: _pod(o)["topologySpreadConstraints"][0].update(minDomains=2), "requires DoNotSchedule"),
    ("Deployment", lambda o: _pod(o)["topologySpreadConstraints"].append(copy.deepcopy(_pod(o)["topologySpreadConstraints"][0])), "Duplicate value"),
    ("Deployment", lambda o: _pod(o)["topologySpreadConstraints"][0]["labelSelector"].update(matchExpressions=[{"key": "a", "operator": "In"}]), "must be specified when `operator`"),
    ("Deployment", lambda o: _pod(o)["securityContext"].update(runAsUser=-1), "between 0 and 2147483647"),
    ("Deployment", lambda o: _pod(o)["securityContext"].update(seccompProfile={"type": "Localhost"}), "localhostProfile"),
    ("Deployment", lambda o: _c(o)["securityContext"].update(privileged=True), "`privileged` to true"),
    # Pod Security "restricted" (admission, in namespaces that enforce it)
    ("Deployment", lambda o: _c(o)["securityContext"].pop("capabilities"), "unrestricted capabilities"),
    ("Deployment", lambda o: _c(o)["securityContext"].update(capabilities={"drop": ["ALL"], "add": ["NET_ADMIN"]}), "unrestricted capabilities"),
    ("Deployment", lambda o: _c(o)["securityContext"].pop("allowPrivilegeEscalation"), "allowPrivilegeEscalation != false"),
    ("Deployment", lambda o: _pod(o)["securityContext"].pop("runAsNonRoot"), "runAsNonRoot != true"),
    ("Deployment", lambda o: _pod(o)["securityContext"].pop("seccompProfile"), "seccompProfile (pod or container"),
    ("Deployment", lambda o: _pod(o)["volumes"].append({"name": "host", "hostPath": {"path": "/"}}), "restricted volume types"),
    ("Deployment", lambda o: _pod(o).update(hostNetwork=True), "host namespaces"),
    # apps: Deployment (ValidateDeploymentSpec)
    ("Deployment", lambda o: o["spec"]["selector"].update(matchLabels={"app": "other"}), "does not match template"),
    ("Deployment", lambda o: o["spec"].update(selector={}), "empty selector"),
    ("Deployment", lambda o: o["spec"]["strategy"]["rollingUpdate"].update(maxSurge=0), "may not be 0 when `maxSurge` is 0"),
    ("Deployment", lambda o: o["spec"]["strategy"]["rollingUpdate"].update(maxUnavailable="150%"), "greater than 100%"),
    ("Deployment", lambda o: o["spec"].update(replicas=-1), "greater than or equal to 0"),
    ("Deployment", lambda o: o["spec"]["template"]["metadata"]["annotations"].update({"bad key": "x"}), "name part must consist"),
    # core: Service (ValidateService, validateServicePort)
    ("Service", lambda o: o["spec"]["ports"][1].pop("name"), "name: Required value"),
    ("Service", lambda o: o["spec"]["ports"][1].update(name="http"), "Duplicate value: 'http'"),
    ("Service", lambda o: o["spec"]["ports"][1].update(port=8000), "Duplicate value: {port: 8000"),
    ("Service", lambda o: o["spec"]["ports"][0].update(port=0), "between 1 and 65535"),
    ("Service", lambda o: o["spec"]["ports"][0].update(targetPort="http_port"), "alpha-numeric"),
    ("Service", lambda o: o["spec"]["ports"][0].update(name="HTTP"), "RFC 1123 label"),
    ("Service", lambda o: o["spec"].update(clusterIP="None", type="NodePort"), "may only be set to \"None\""),
    ("Service", lambda o: o["spec"]["selector"].update(app="a b"), "valid label"),
    # autoscaling: HPA (ValidateHorizontalPodAutoscaler)
    ("HorizontalPodAutoscaler", lambda o: o["spec"].update(minReplicas=0), "minReplicas: Invalid value: 0"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"].update(maxReplicas=0, minReplicas=1), "must be greater than 0"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"].update(minReplicas=4), "greater than or equal to `minReplicas`"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["scaleTargetRef"].pop("name"), "scaleTargetRef.name: Required"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["metrics"][0].update(type="Resource"), "must populate"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["metrics"][0]["pods"]["target"].update(type="Utilization", averageValue="0"), "must be positive"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["metrics"][0]["pods"]["target"].update(type="Average"), "target.type: Unsupported"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["behavior"]["scaleDown"].update(stabilizationWindowSeconds=3601), "between 0 and 3600"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["behavior"]["scaleUp"].update(policies=[]), "at least one Policy"),
    ("HorizontalPodAutoscaler", lambda o: o["spec"]["behavior"]["scaleDown"]["policies"][0].update(periodSeconds=1801), "periodSeconds"),
    # policy: PDB
    ("PodDisruptionBudget", lambda o: o["spec"].update(minAvailable=1), "cannot be both set"),
    ("PodDisruptionBudget", lambda o: o["spec"].update(maxUnavailable="120%"), "greater than 100%"),
    ("PodDisruptionBudget", lambda o: o["spec"].update(maxUnavailable=-1), "greater than or equal to 0"),
    # networking: NetworkPolicy
    ("NetworkPolicy", lambda o: o["spec"]["ingress"][0]["ports"][0].update(protocol="HTTP"), "protocol: Unsupported"),
    ("NetworkPolicy", lambda o: o["spec"]["ingress"][0]["ports"][0].update(port=0), "between 1 and 65535"),
    ("NetworkPolicy", lambda o: o["spec"]["egress"][0]["ports"][0].update(endPort=400), "greater than or equal to `port`"),
    ("NetworkPolicy", lambda o: o["spec"]["egress"][0]["ports"][0].update(port="https"), "when `port` is not a number"),
    ("NetworkPolicy", lambda o: o["spec"]["ingress"][0]["from"].append({}), "must specify a peer"),
    ("NetworkPolicy", lambda o: o["spec"]["egress"][0]["to"][0].update(podSelector={}), "both ipBlock and another peer"),
    ("NetworkPolicy", lambda o: o["spec"]["egress"][0]["to"][0]["ipBlock"].update(cidr="10.0.0.0/8"), "strict subset"),
    ("NetworkPolicy", lambda o: o["spec"]["egress"][0]["to"][0]["ipBlock"].update(cidr="10.0.0.300/8"), "valid CIDR"),
    ("NetworkPolicy", lambda o: o["spec"]["policyTypes"].append("Both"), "policyTypes"),
    # core: ConfigMap, ResourceQuota; rbac; storage
    ("ConfigMap", lambda o: o["data"].update({"a/b.json": "{}"}), "valid config key"),
    ("ConfigMap", lambda o: o["data"].update(big="x" * (1024 * 1024 + 1)), "at most 1048576 bytes"),
    ("ResourceQuota", lambda o: o["spec"]["hard"].update(gpus="1"), "standard resource for quota"),
    ("ResourceQuota", lambda o: o["spec"]["hard"].update(pods="-1"), "non-negative quantity"),
    ("Role", lambda o: o["rules"][0].update(verbs=[]), "at least one value"),
    ("Role", lambda o: o["rules"][0].update(apiGroups=[]), "at least one api group"),
    ("RoleBinding", lambda o: o["roleRef"].update(apiGroup="rbac"), "roleRef.apiGroup"),
    ("RoleBinding", lambda o: o["subjects"][0].update(apiGroup="rbac.authorization.k8s.io"), "subjects[0].apiGroup"),
    ("StorageClass", lambda o: o.update(reclaimPolicy="Recycle"), "reclaimPolicy: Unsupported"),
    ("StorageClass", lambda o: o.update(provisioner="ebs csi"), "provisioner"),
    ("StorageClass", lambda o: o["metadata"].update(namespace="x"), "namespace: Forbidden"),
    # batch: Job, CronJob
    ("Job", lambda o: _pod(o).update(restartPolicy="Always"), "restartPolicy: Unsupported value: 'Always'"),
    ("Job", lambda o: _pod(o).pop("restartPolicy"), "restartPolicy: Unsupported value: 'Always'"),
    ("Job", lambda o: o["metadata"].update(name="t" * 62), "invalid DNS label"),
    ("Job", lambda o: o["metadata"].update(name="t" * 64), "job-name"),
    ("Job", lambda o: o["spec"].pop("completions"), "when completion mode is Indexed"),
    ("Job", lambda o: o["spec"].update(backoffLimit=-1), "greater than or equal to 0"),
    ("Job", lambda o: _pod(o).update(subdomain="Train"), "subdomain"),
    ("Job", lambda o: o["spec"].update(podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}}]}), "must be ordered"),
    ("CronJob", lambda o: o["metadata"].update(name="d" * 53), "no more than 52 characters"),
    ("CronJob", lambda o: o["spec"].update(schedule="17 * * *"), "not a standard cron expression"),
    ("CronJob", lambda o: o["spec"].update(schedule="CRON_TZ=UTC 17 * * * *"), "use timeZone field"),
    ("CronJob", lambda o: o["spec"].update(timeZone="Europe/Atlantis"), "unknown time zone"),
    ("CronJob", lambda o: o["spec"].update(concurrencyPolicy="Never"), "concurrencyPolicy"),
    ("CronJob", lambda o: o["spec"]["jobTemplate"]["spec"]["template"]["spec"].update(restartPolicy="Always"), "restartPolicy"),
    # Argo: the pods its controller makes (main + Argo's own init/wait)
    ("WorkflowTemplate", lambda o: o["spec"]["templates"][1]["container"]["volumeMounts"].append({"name": "data", "mountPath": "/d"}), "Not found: 'data'"),
    ("WorkflowTemplate", lambda o: o["spec"]["templates"][1]["container"].pop("securityContext"), "container 'main'"),
    ("WorkflowTemplate", lambda o: o["spec"].pop("securityContext"), "seccompProfile (pod or container 'wait'"),
    ("WorkflowTemplate", lambda o: o["spec"]["templates"][1]["nodeSelector"].update(pool="a b"), "valid label"),
]  # fmt: skip


def _errors(obj: dict[str, Any]) -> list[str]:
    return objects.api_errors(obj, RESTRICTED | {"serving"}, executor=EXECUTOR)


@pytest.mark.parametrize("kind", sorted(BASE))
def test_the_compliant_objects_pass(kind: str) -> None:
    assert _errors(BASE[kind]) == []


@pytest.mark.parametrize(("kind", "mutate", "message"), CASES, ids=[f"{k}-{m}" for k, _, m in CASES])
def test_each_rule_fires_on_a_mutated_object(kind: str, mutate: Mutation, message: str) -> None:
    bad = copy.deepcopy(BASE[kind])
    mutate(bad)
    errors = _errors(bad)
    assert any(message in e for e in errors), f"expected {message!r} in {errors}"


def test_every_kind_with_rules_has_a_firing_case() -> None:
    assert set(kinds.CHECKS) - {"StatefulSet", "Secret"} <= {k for k, _, _ in CASES}


def test_node_taints_helm_values_and_the_argo_executor_are_checked() -> None:
    assert pod.taint_errors("nvidia.com/gpu", "present", "NoSchedule", "t") == []
    assert any(
        "effect: Unsupported" in e for e in pod.taint_errors("nvidia.com/gpu", "present", "NO_SCHEDULE", "t")
    )
    assert any(
        "valid label" in e for e in pod.taint_errors("nvidia.com/gpu", "yes please", "NoSchedule", "t")
    )
    assert objects.helm_values_errors({"controller": {"nodeSelector": {"pool": "system"}}}) == []
    assert objects.helm_values_errors({"controller": {"nodeSelector": {"pool": "sys tem"}}})
    assert objects.helm_values_errors({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]})
    assert objects.helm_values_errors({"podAnnotations": {"bad key": "1"}})
    wt = BASE["WorkflowTemplate"]
    assert any("container 'wait'" in e for e in objects.api_errors(wt, {"serving"}, executor={}))
    assert (
        n.quantity("12Gi") == 12 * 2**30
        and n.quantity("250m") == n.quantity("0.25")
        and n.quantity("1e3") == 1000
    )
