"""PersistentVolumes bind on every cloud: EKS gets the EBS CSI driver (add-on, Pod Identity role, least
privilege) and a default StorageClass encrypted with the environment key, and every PVC consumer names a
class the stack declares or the cloud's documented default and waits for it (review: infra.md, 1 and 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from infra_fixtures import STACKS, Plan, aws_iam_definition

from infra import plan as planner
from infra.aws import cluster_documents, documents

# Literals, not imports: the plan's values are checked against the documented names.
EBS_CSI_ADDON = (
    "aws-ebs-csi-driver"  # docs.aws.amazon.com/eks/latest/userguide/add-ons-aws-ebs-csi-driver.html
)
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

AWS = ("dev", "staging", "prod")
ADDON = "aws:eks/addon:Addon"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
# Default StorageClasses the managed cluster ships itself (nothing to declare):
# GKE: cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/gce-pd-csi-driver (`standard-rwo`);
# AKS: learn.microsoft.com/azure/aks/azure-disk-csi (`managed-csi`). EKS 1.30+ ships none.
CLOUD_DEFAULT_CLASS = {"gcp": "standard-rwo", "azure": "managed-csi", "aws": None}


def _short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _ebs_csi_policy(p: Plan) -> dict[str, Any]:
    access = p.named(f"mlp-{p['stack']}-identities-ebs-csi-access", "aws:iam/rolePolicy:RolePolicy")
    doc: dict[str, Any] = json.loads(access["inputs"]["policy"])
    return doc


@pytest.mark.parametrize("stack", AWS)
def test_eks_installs_the_ebs_csi_addon_as_its_own_pod_identity_role(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    (addon,) = [a for a in p.of_type(ADDON) if a["inputs"]["addonName"] == EBS_CSI_ADDON]
    assert addon["inputs"]["clusterName"] == planner.load_stack(stack).name
    assert "configurationValues" not in addon["inputs"]  # the StorageClass is declared in Kubernetes
    assert addon["inputs"]["tags"]["stack"] == stack
    binding = p.named(f"mlp-{stack}-identities-ebs-csi-binding")
    assert (binding["inputs"]["namespace"], binding["inputs"]["serviceAccount"]) == (
        "kube-system",
        "ebs-csi-controller-sa",
    )
    role = p.named(f"mlp-{stack}-identities-ebs-csi", "aws:iam/role:Role")
    assert role["urn"] in binding["dependencies"]  # roleArn comes from this role
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust == documents.pod_identity_trust_policy(
        statement["Condition"]["StringEquals"]["aws:SourceAccount"]
    )
    # The add-on's pods start with credentials (association first) and on nodes (system pool first).
    deps = {_short(u) for u in addon["dependencies"]}
    assert {f"mlp-{stack}-identities-ebs-csi-binding", f"mlp-{stack}-eks-system"} <= deps
    # The Kubernetes layer (and so every PVC) waits for the driver.
    (k8s_provider,) = p.of_type("pulumi:providers:kubernetes")
    assert addon["urn"] in k8s_provider["dependencies"]


@pytest.mark.parametrize("stack", AWS)
def test_ebs_csi_policy_is_scoped_and_every_action_exists(plans: dict[str, Plan], stack: str) -> None:
    cfg = planner.load_stack(stack)
    doc = _ebs_csi_policy(plans[stack])
    ec2 = botocore.session.get_session().get_service_model("ec2")
    operations = set(ec2.operation_names)
    actions = {a for s in doc["Statement"] for a in s["Action"]}
    assert {a.split(":")[0] for a in actions} == {"ec2"}
    assert {a.split(":")[1] for a in actions} <= operations, actions
    for s in doc["Statement"]:
        assert s["Effect"] == "Allow"
        if "*" in s["Resource"]:
            assert s["Resource"] == ["*"] and set(s["Action"]) <= documents.ACTIONS_WITHOUT_RESOURCE_TYPES, s
            assert all(a.startswith("ec2:Describe") for a in s["Action"]), s
        else:
            assert all(r.startswith(f"arn:aws:ec2:{cfg.region}:") for r in s["Resource"]), s
            assert "Condition" in s, s  # writes only on the driver's volumes and this cluster's nodes
    writes = {a for s in doc["Statement"] if s["Resource"] != ["*"] for a in s["Action"]}
    assert writes == {
        "ec2:AttachVolume", "ec2:CreateTags", "ec2:CreateVolume", "ec2:DeleteVolume", "ec2:DetachVolume",
        "ec2:ModifyVolume",
    }  # fmt: skip
    # Only attach/detach reach instances: this cluster's nodes, or the driver's own volumes.
    nodes = [s for s in doc["Statement"] if any(":instance/" in r for r in s["Resource"])]
    assert {a for s in nodes for a in s["Action"]} == {"ec2:AttachVolume", "ec2:DetachVolume"}
    assert sorted(json.dumps(s["Condition"]) for s in nodes) == sorted(
        json.dumps({"StringEquals": {key: value}})
        for key, value in (
            (f"aws:ResourceTag/{cluster_documents.NODE_STACK_TAG}", cfg.stack),
            ("aws:ResourceTag/ebs.csi.aws.com/cluster", "true"),
        )
    )
    # The node condition holds only because every node pool's launch template tags its instances so.
    templates = plans[stack].of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for lt in templates:
        (instance,) = [t for t in lt["inputs"]["tagSpecifications"] if t["resourceType"] == "instance"]
        assert instance["tags"][cluster_documents.NODE_STACK_TAG] == cfg.stack, lt["name"]


def test_describe_actions_take_no_resource_per_aws_definitions() -> None:
    (ec2,) = [s for s in aws_iam_definition() if s["prefix"] == "ec2"]
    privileges = {a["privilege"]: a for a in ec2["privileges"]}
    for action in documents.EBS_CSI_DESCRIBE:
        types = [t["resource_type"] for t in privileges[action.split(":")[1]]["resource_types"]]
        assert [t for t in types if t] == [], (action, types)


def test_ebs_csi_key_policy_names_one_key_and_grants_only_to_aws_resources() -> None:
    key = "arn:aws:kms:eu-south-2:111122223333:key/abc"
    doc = cluster_documents.ebs_csi_key_policy(key)
    kms = botocore.session.get_session().get_service_model("kms")
    for s in doc["Statement"]:
        assert s["Resource"] == [key]
        assert {a.split(":")[1] for a in s["Action"]} <= set(kms.operation_names), s
    (grant,) = [s for s in doc["Statement"] if "kms:CreateGrant" in s["Action"]]
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}


def test_the_ebs_csi_key_policy_is_attached_to_the_driver_role(updates: dict[str, Plan]) -> None:
    p = updates["dev"]
    policy = json.loads(
        p.named("mlp-dev-identities-ebs-csi-key", "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"]
    )
    key = p["outputs"]["key_ids"]["environment"]
    assert policy == cluster_documents.ebs_csi_key_policy(key)


@pytest.mark.parametrize("stack", AWS)
def test_eks_declares_a_default_gp3_class_encrypted_with_the_environment_key(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    (sc,) = p.of_type(STORAGE_CLASS)
    i = sc["inputs"]
    assert i["metadata"]["annotations"] == {DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}
    assert i["provisioner"] == EBS_CSI_PROVISIONER
    assert {k: v for k, v in i["parameters"].items() if k != "kmsKeyId"} == {
        "type": "gp3",
        "encrypted": "true",
    }
    assert p.named(f"mlp-{stack}-key-key", "aws:kms/key:Key")["urn"] in sc["dependencies"]
    assert i["volumeBindingMode"] == "WaitForFirstConsumer"
    assert i["allowVolumeExpansion"] is True


def test_the_class_key_is_the_environment_key(updates: dict[str, Plan]) -> None:
    (sc,) = updates["dev"].of_type(STORAGE_CLASS)
    assert sc["inputs"]["parameters"]["kmsKeyId"] == updates["dev"]["outputs"]["key_ids"]["environment"]


def _claims(p: Plan) -> Iterator[tuple[dict[str, Any], str, str | None]]:
    """Every PVC consumer: (resource, where, storageClassName or None for the cluster default)."""
    for r in p.resources:
        i = r["inputs"]
        if r["type"] == "kubernetes:core/v1:PersistentVolumeClaim":
            yield r, "pvc", i.get("spec", {}).get("storageClassName")
        elif r["type"] == "kubernetes:apps/v1:StatefulSet":
            for t in i["spec"].get("volumeClaimTemplates", []):
                yield r, f"volumeClaimTemplates/{t['metadata']['name']}", t["spec"].get("storageClassName")
        elif r["type"] == RELEASE:
            yield from ((r, where, cls) for where, cls in _chart_volumes(i.get("values", {}), ""))


def _chart_volumes(values: Any, path: str) -> Iterator[tuple[str, str | None]]:
    """Enabled `persistentVolume` / `persistence` blocks of chart values (Prometheus, Grafana, ...)."""
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        if key in ("persistentVolume", "persistence") and isinstance(value, dict):
            if value.get("enabled"):
                yield f"{path}{key}", value.get("storageClass") or value.get("storageClassName")
        else:
            yield from _chart_volumes(value, f"{path}{key}.")


@pytest.mark.parametrize("stack", STACKS)
def test_every_volume_claim_names_a_class_that_exists_and_waits_for_it(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    declared = {sc["inputs"]["metadata"]["name"]: sc for sc in p.of_type(STORAGE_CLASS)}
    defaults = [
        sc for sc in declared.values()
        if sc["inputs"]["metadata"].get("annotations", {}).get(DEFAULT_STORAGE_CLASS_ANNOTATION) == "true"
    ]  # fmt: skip
    cloud_default = CLOUD_DEFAULT_CLASS[p["cloud"]]
    assert len(defaults) <= 1
    # A stack declares a default class exactly where its cloud ships none.
    assert bool(defaults) == (cloud_default is None), (stack, sorted(declared))
    claims = list(_claims(p))
    where = {(r["name"], w) for r, w, _ in claims}
    # The consumers the review found: Prometheus's server volume and Alertmanager's claim template.
    assert {(f"mlp-{stack}-addons-prometheus", "server.persistentVolume"),
            (f"mlp-{stack}-monitoring-alertmanager", "volumeClaimTemplates/data")} <= where  # fmt: skip
    for r, w, cls in claims:
        if cls is None and defaults:
            assert defaults[0]["urn"] in r["dependencies"], (
                r["name"],
                w,
                "does not wait for the default class",
            )
        elif cls is None:
            assert cloud_default is not None, (r["name"], w)
        else:
            assert cls in declared or cls == cloud_default, (r["name"], w, cls)
            if cls in declared:
                assert declared[cls]["urn"] in r["dependencies"], (r["name"], w, cls)


def test_azure_container_role_assignments_wait_for_their_container(plans: dict[str, Plan]) -> None:
    p = plans["azure-dev"]
    containers = {
        (c["inputs"]["accountName"], c["inputs"]["containerName"]): c["urn"]
        for c in p.of_type("azure-native:storage:BlobContainer")
    }
    scoped = [
        r for r in p.of_type("azure-native:authorization:RoleAssignment")
        if "/blobServices/default/containers/" in str(r["inputs"].get("scope"))
    ]  # fmt: skip
    assert len(scoped) >= 5
    for r in scoped:
        scope = r["inputs"]["scope"]
        account = scope.split("/storageAccounts/")[1].split("/")[0]
        container = scope.rsplit("/containers/", 1)[1]
        assert containers[(account, container)] in r["dependencies"], (r["name"], scope)
