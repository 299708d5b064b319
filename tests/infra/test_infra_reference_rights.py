"""The drift reference's writers (promotion/README.md, "Drift reference"): the identity the retraining pipeline's
steps run as reads the reference (drift-check) and replaces it on every promotion (promote), so it may read,
overwrite and delete under the models bucket's `reference/` prefix on each cloud, and read or delete nothing else
there. Judged on the committed plans: the identity is the WorkflowTemplate's service account, the prefix its
`reference` parameter, and each cloud's grants are evaluated (IAM resource patterns, GCS IAM Conditions, Azure
ABAC conditions) against an object under the prefix and one beside it."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pytest
from infra_fixtures import Plan

from infra.shape import SERVICE_ACCOUNTS

ARGO = "kubernetes:argoproj.io/v1alpha1:WorkflowTemplate"
REFERENCE = "reference/reference.jsonl"
BESIDE = "model-store/sentiment/champion.json"  # the promotion store: the same bucket, not the trainer's to read here


def pipeline_identity_and_reference(plan: Plan) -> tuple[str, str]:
    """(identity the pipeline runs as, its `reference` parameter) from the plan's WorkflowTemplate."""
    tpl = plan.one(ARGO)["inputs"]
    sa = (tpl["metadata"]["namespace"], tpl["spec"]["serviceAccountName"])
    (identity,) = [i for i, ref in SERVICE_ACCOUNTS.items() if (ref.namespace, ref.name) == sa]
    params = {p["name"]: p["value"] for p in tpl["spec"]["arguments"]["parameters"]}
    promote = next(t for t in tpl["spec"]["templates"] if t["name"] == "promote")["container"]["args"]
    assert promote[promote.index("--drift-reference") + 1] == "{{workflow.parameters.reference}}"
    return identity, params["reference"]


# ---- AWS: the identity's inline policy, evaluated as IAM matches resources (`*` wildcards)


def aws_allows(doc: dict[str, Any], action: str, arn: str, s3_prefix: str | None = None) -> bool:
    for s in doc["Statement"]:
        if s["Effect"] != "Allow" or action not in s["Action"]:
            continue
        if not any(fnmatch.fnmatchcase(arn, r) for r in s["Resource"]):
            continue
        listed = s.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
        if listed is None or any(fnmatch.fnmatchcase(s3_prefix or "", c) for c in listed):
            return True
    return False


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_pipeline_identity_reads_and_replaces_only_the_reference_on_aws(
    plans: dict[str, Plan], stack: str
) -> None:
    p = plans[stack]
    identity, url = pipeline_identity_and_reference(p)
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    doc = json.loads(p.named(f"mlp-{stack}-identities-{identity}-access")["inputs"]["policy"])
    obj = f"arn:aws:s3:::{bucket}/{prefix}/reference.jsonl"
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        assert aws_allows(doc, action, obj), f"{identity} lacks {action} on {obj}"
    assert aws_allows(doc, "s3:ListBucket", f"arn:aws:s3:::{bucket}", s3_prefix=f"{prefix}/")
    beside = f"arn:aws:s3:::{bucket}/{BESIDE}"
    assert not [a for a in ("s3:GetObject", "s3:DeleteObject") if aws_allows(doc, a, beside)]
    assert not aws_allows(doc, "s3:ListBucket", f"arn:aws:s3:::{bucket}", s3_prefix="")


# ---- GCP: bucket IAM members, their roles' object permissions, and the IAM Condition's CEL


GCS_ROLES = {
    "roles/storage.objectViewer": {"get", "list"},
    "roles/storage.objectCreator": {"create"},
    "roles/storage.objectUser": {"get", "list", "create", "delete"},
}
CEL_CLAUSE = re.compile(r'resource\.name(?: == "([^"]*)"|\.startsWith\("([^"]*)"\))')


def cel_admits(expression: str, resource: str) -> bool:
    """The two clause forms the program writes, joined by `||` (infra/gcp/roles.py PrefixBinding)."""
    clauses = [c.strip() for c in expression.split("||")]
    parsed = [CEL_CLAUSE.fullmatch(c) for c in clauses]
    assert all(parsed), f"unexpected IAM condition {expression!r}"
    return any(m[1] == resource if m[1] is not None else resource.startswith(m[2]) for m in parsed if m)


def gcs_permissions(plan: Plan, member: str, bucket: str, obj: str) -> set[str]:
    granted: set[str] = set()
    for r in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        i = r["inputs"]
        if i["member"] != member or i["bucket"] != bucket:
            continue
        resource = f"projects/_/buckets/{bucket}/objects/{obj}"
        if "condition" not in i or cel_admits(i["condition"]["expression"], resource):
            granted |= GCS_ROLES[i["role"]]
    return granted


def test_the_pipeline_identity_reads_and_overwrites_only_the_reference_on_gcp(plans: dict[str, Plan]) -> None:
    p = plans["gcp-dev"]
    identity, url = pipeline_identity_and_reference(p)
    bucket, prefix = url.removeprefix("gs://").split("/", 1)
    member = f"serviceAccount:mlp-gcp-dev-{identity}@acme-ml-platform-dev.iam.gserviceaccount.com"
    # An overwrite is a delete and a create on GCS (objectCreator alone gets 403 on the second promotion).
    assert gcs_permissions(p, member, bucket, f"{prefix}/reference.jsonl") >= {"get", "create", "delete"}
    assert not gcs_permissions(p, member, bucket, BESIDE) & {"get", "delete"}


# ---- Azure: conditional container role assignments, the ABAC condition evaluated per data action

BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
CONTRIBUTOR_ACTIONS = tuple(f"{BLOBS}/{a}" for a in ("read", "write", "add/action", "delete", "move/action"))
CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
ABAC = [
    (re.compile(r"ActionMatches\{'([^']+)'\}"), r"(action == '\1')"),
    (re.compile(r"SubOperationMatches\{'([^']+)'\}"), r"(suboperation == '\1')"),
    (re.compile(r"@Resource\[[^\]]+:path\] StringStartsWith '([^']*)'"), r"path.startswith('\1')"),
    (re.compile(r"@Request\[[^\]]+:prefix\] StringStartsWith '([^']*)'"), r"prefix.startswith('\1')"),
    (re.compile(r"!\("), "not ("),
    (re.compile(r"\bAND NOT\b"), "and not"),
    (re.compile(r"\bAND\b"), "and"),
    (re.compile(r"\bOR\b"), "or"),
]


def abac_allows(condition: str, action: str, *, path: str = "", listing: str | None = None) -> bool:
    """The ABAC grammar the program writes (infra/azure/roles.py prefix_condition), as Python: a read with
    `listing` set is a Blob.List under that prefix; every other action is on the blob at `path`."""
    python = condition
    for pattern, replacement in ABAC:
        python = pattern.sub(replacement, python)
    assert set(re.sub(r"'[^']*'", "", python)) <= set("abcdefghijklmnopqrstuvwxyz_.() =\n"), python
    env = {"action": action, "suboperation": "Blob.List" if listing is not None else "", "path": path}
    return bool(eval(python, {"__builtins__": {}}, {**env, "prefix": listing or ""}))  # noqa: S307


def azure_container_grants(plan: Plan, identity: str, container: str) -> list[dict[str, Any]]:
    return [
        r["inputs"]
        for r in plan.of_type("azure-native:authorization:RoleAssignment")
        if r["name"].startswith(f"mlp-azure-dev-identities-{identity}-")
        and str(r["inputs"]["scope"]).endswith(f"/containers/{container}")
    ]


def test_the_pipeline_identity_reads_and_replaces_only_the_reference_on_azure(plans: dict[str, Plan]) -> None:
    p = plans["azure-dev"]
    identity, url = pipeline_identity_and_reference(p)
    container, prefix = url.removeprefix("abfs://").split("@", 1)[0], url.split(".net/", 1)[1]
    (grant,) = [g for g in azure_container_grants(p, identity, container) if "condition" in g]
    assert grant["roleDefinitionId"].endswith(f"/roleDefinitions/{CONTRIBUTOR}")
    assert grant["conditionVersion"] == "2.0"
    for action in CONTRIBUTOR_ACTIONS:
        assert abac_allows(grant["condition"], action, path=f"{prefix}/reference.jsonl"), action
        assert not abac_allows(grant["condition"], action, path=BESIDE), action
    assert abac_allows(grant["condition"], f"{BLOBS}/read", listing=f"{prefix}/")
    assert not abac_allows(grant["condition"], f"{BLOBS}/read", listing="")


def test_a_read_write_prefix_role_on_azure_reads_and_deletes_nothing_outside_it(
    plans: dict[str, Plan],
) -> None:
    # The drift job's drift/ report (Storage Blob Data Contributor on the logs container) was limited in its
    # writes only: it could read the whole container (access logs, audit trails) and delete or rename any blob.
    (grant,) = [
        g
        for g in azure_container_grants(plans["azure-dev"], "monitor", "logs")
        if g["roleDefinitionId"].endswith(f"/roleDefinitions/{CONTRIBUTOR}")
    ]
    for action in CONTRIBUTOR_ACTIONS:
        assert abac_allows(grant["condition"], action, path="drift/report.json"), action
        assert not abac_allows(grant["condition"], action, path="audit/trail.json"), action
    assert not abac_allows(grant["condition"], f"{BLOBS}/read", listing="audit/")
