"""Prod differs from dev where it must: protection, no force_destroy, on-demand serving, digests."""

from __future__ import annotations

import pytest
from infra_fixtures import Plan

PROTECTED = (
    "aws:kms/key:Key",
    "aws:s3/bucket:Bucket",
    "aws:ecr/repository:Repository",
    "aws:eks/cluster:Cluster",
)


def test_prod_protects_stateful_resources_and_dev_does_not(plans: dict[str, Plan]) -> None:
    for token in PROTECTED:
        assert all(r["protect"] for r in plans["prod"].of_type(token)), token
        assert not any(r["protect"] for r in plans["dev"].of_type(token)), token
    assert not any(r["inputs"]["forceDestroy"] for r in plans["prod"].of_type("aws:s3/bucket:Bucket"))
    assert not any(r["inputs"]["forceDelete"] for r in plans["prod"].of_type("aws:ecr/repository:Repository"))
    assert plans["prod"].one("aws:eks/cluster:Cluster")["inputs"]["deletionProtection"] is True


def test_prod_images_are_pinned_by_digest(plans: dict[str, Plan]) -> None:
    out = plans["prod"]["outputs"]
    for key in ("serving_image", "training_image"):
        repo, digest = out[key].split("@")
        assert digest.startswith("sha256:") and len(digest) == 71
        assert repo == out["image_repositories"][key.split("_")[0]]


# --- every resource that holds or governs data is protected in prod, on every cloud ------------------------
# The services that store data or keys, by type-token prefix. Every type of these services in a prod plan is
# either protected or listed in NOT_DATA with the reason a delete or replace loses nothing: a new child of a
# store (an Azure file share, an S3 object-lock setting...) fails here until it is classified.
DATA_SERVICES = {
    "aws": ("aws:s3/", "aws:kms/", "aws:ecr/", "aws:cloudwatch/logGroup:"),
    "gcp": ("gcp:storage/", "gcp:kms/", "gcp:artifactregistry/", "gcp:logging/"),
    "azure": (
        "azure-native:resources:ResourceGroup",
        "azure-native:storage:",
        "azure-native:keyvault:",
        "azure-native:containerregistry:",
        "azure-native:operationalinsights:",
    ),
}
NOT_DATA = {
    # Access grants: who may read, not what is kept; the next `up` grants again.
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    # A second name for the protected key (the program refers to the key by ARN).
    "aws:kms/alias:Alias",
    # Routes new audit entries into the protected log bucket; what it routed stays there.
    "gcp:logging/projectSink:ProjectSink",
}
# Resources that must exist in each prod plan (the check above is not vacuous): the stores and what governs
# them (a delete suspends versioning, drops soft delete or the retention rules, or the data itself).
MUST_BE_PROTECTED = {
    "aws": ("aws:s3/bucket:Bucket", "aws:s3/bucketVersioning:BucketVersioning",
            "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "aws:kms/key:Key",
            "aws:cloudwatch/logGroup:LogGroup", "aws:ecr/lifecyclePolicy:LifecyclePolicy"),
    "gcp": ("gcp:storage/bucket:Bucket", "gcp:logging/projectBucketConfig:ProjectBucketConfig",
            "gcp:kms/keyRing:KeyRing", "gcp:kms/cryptoKey:CryptoKey"),
    "azure": ("azure-native:storage:StorageAccount", "azure-native:storage:BlobContainer",
              "azure-native:storage:BlobServiceProperties", "azure-native:storage:ManagementPolicy",
              "azure-native:keyvault:Vault", "azure-native:keyvault:Key", "azure-native:resources:ResourceGroup"),
}  # fmt: skip


@pytest.fixture(scope="module")
def prod_plans(plans: dict[str, Plan]) -> dict[str, Plan]:
    """AWS's committed prod stack; GCP and Azure commit only dev stacks, so their prod variant is derived."""
    from test_infra_first_up_gaps import prod_variant

    from infra import plan as planner

    derived = {cloud: Plan(planner.run(prod_variant(f"{cloud}-dev"), {})) for cloud in ("gcp", "azure")}
    return {"aws": plans["prod"], **derived}


@pytest.mark.parametrize("cloud", sorted(DATA_SERVICES))
def test_prod_protects_every_resource_that_holds_or_governs_data(
    plans: dict[str, Plan], prod_plans: dict[str, Plan], cloud: str
) -> None:
    """A store's children are separate resources: the account's or bucket's `protect` does not cover them,
    and a prod `destroy` or replacement deletes them first (dependents go before what they depend on)."""
    data = [
        r
        for r in prod_plans[cloud].iter_custom()
        if r["type"].startswith(DATA_SERVICES[cloud]) and r["type"] not in NOT_DATA
    ]
    assert {r["type"] for r in data} >= set(MUST_BE_PROTECTED[cloud])
    assert [(r["type"], r["name"]) for r in data if not r["protect"]] == []
    # Protection stops an accidental delete; retention keeps the data and the settings that guard it when a prod
    # stack is destroyed on purpose (its protection lifted first).
    assert [(r["type"], r["name"]) for r in data if not r["retainOnDelete"]] == []
    dev = {"aws": "dev", "gcp": "gcp-dev", "azure": "azure-dev"}[cloud]
    # Outside prod nothing is protected (it would make `pulumi destroy` of a dev stack fail) and no data is left
    # behind by a destroy.
    assert not any(r["protect"] for r in plans[dev].iter_custom())
    assert not any(
        r["retainOnDelete"] for r in plans[dev].iter_custom() if r["type"].startswith(DATA_SERVICES[cloud])
    )


# --- protection and retention are decided in one table (infra/lifecycle.py KEPT), applied in one place --------
def test_no_cloud_module_sets_protect_or_retain_itself() -> None:
    """A `protect=` beside one resource and a retention rule in the table drift apart (a new store protected but
    not retained, or the reverse): only infra/lifecycle.py sets either option."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "infra"
    found = [
        f"{path.relative_to(root.parent)}:{node.lineno} {kw.arg}="
        for path in sorted(root.rglob("*.py"))
        if path.name != "lifecycle.py" or path.parent != root
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg in ("protect", "retain_on_delete")
    ]
    assert found == [], "set these in infra/lifecycle.py KEPT instead"


def test_every_plan_protects_and_retains_exactly_what_the_table_says(
    plans: dict[str, Plan], prod_plans: dict[str, Plan]
) -> None:
    from infra.lifecycle import KEPT

    rendered = {**{f"{c}-prod": p for c, p in prod_plans.items()}, **plans}
    for stack, plan in rendered.items():
        prod = stack.endswith("prod")
        for r in plan.iter_custom():
            keep = KEPT.get(r["type"])
            protect = keep is not None and prod and keep.protect
            retain = keep is not None and (keep.retain_everywhere or (prod and keep.retain))
            assert (r["protect"], r["retainOnDelete"]) == (protect, retain), (stack, r["type"], r["name"])
    # No entry outlives its resources, and the clusters stay protected without being retained.
    declared = {r["type"] for p in prod_plans.values() for r in p.iter_custom()}
    assert set(KEPT) - declared == set()
    clusters = [t for t in KEPT if t.endswith((":Cluster", ":ManagedCluster"))]
    assert len(clusters) == 3 and all(KEPT[t].protect and not KEPT[t].retain for t in clusters)
