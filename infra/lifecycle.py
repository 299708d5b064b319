"""Resource options decided once, by resource type, for every resource the program declares (day two).

- `delete_before_replace` where a replacement would collide with the old resource: the resource has a
  fixed physical name (two buckets cannot share a name while the old one still exists), or it is one of
  a kind per parent (a bucket's policy, an IAM binding, a role assignment: creating the new one first and
  then deleting the old would delete the setting both share, leaving none).
- `protect` and `retain_on_delete` in prod (table `KEPT`, one reason per type): protection makes a plan that
  would delete a store, a key, what guards them or a cluster fail; retention keeps the stores and keys in the
  cloud if protection is lifted and the stack destroyed on purpose (only Pulumi's state forgets them).
  Outside prod nothing is protected (`pulumi destroy` of a dev stack must work).

Pulumi applies a stack transformation to every resource registered after it, components' children
included, so new modules get the same options without repeating them. `ignore_changes` stays beside
each resource (it names the one field a controller owns there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from infra.azure_names import AZURE_NAME_INPUTS

# Type token -> the constructor argument that fixes the identity (the option applies when it is set).
FIXED_IDENTITY: Mapping[str, str] = {
    # AWS: names, and settings that exist once per bucket / group / cluster / service account.
    "aws:budgets/budget:Budget": "name",
    "aws:cloudtrail/trail:Trail": "name",
    "aws:cloudwatch/logGroup:LogGroup": "name",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "name",
    "aws:ecr/repository:Repository": "name",
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": "repository",
    "aws:eks/cluster:Cluster": "name",
    "aws:eks/addon:Addon": "addon_name",
    "aws:eks/accessEntry:AccessEntry": "principal_arn",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": "principal_arn",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": "service_account",
    "aws:iam/role:Role": "name",
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": "aws_service_name",
    "aws:kms/alias:Alias": "name",
    "aws:autoscaling/tag:Tag": "autoscaling_group_name",
    "aws:s3/bucket:Bucket": "bucket",
    "aws:sns/topic:Topic": "name",
    **{
        f"aws:s3/{t[0].lower()}{t[1:]}:{t}": "bucket"
        for t in (
            "BucketLifecycleConfiguration",
            "BucketLogging",
            "BucketOwnershipControls",
            "BucketPolicy",
            "BucketPublicAccessBlock",
            "BucketServerSideEncryptionConfiguration",
            "BucketVersioning",
        )
    },  # fmt: skip
    # GCP: names, and IAM bindings (one per role and member).
    "gcp:artifactregistry/repository:Repository": "repository_id",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": "member",
    "gcp:compute/network:Network": "name",
    "gcp:compute/router:Router": "name",
    "gcp:compute/routerNat:RouterNat": "name",
    "gcp:compute/subnetwork:Subnetwork": "name",
    "gcp:container/cluster:Cluster": "name",
    "gcp:container/nodePool:NodePool": "name",
    "gcp:kms/cryptoKey:CryptoKey": "name",
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": "member",
    "gcp:kms/keyRing:KeyRing": "name",
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": "bucket_id",
    "gcp:logging/projectSink:ProjectSink": "name",
    "gcp:projects/iAMAuditConfig:IAMAuditConfig": "service",
    "gcp:projects/iAMMember:IAMMember": "member",
    "gcp:pubsub/subscription:Subscription": "name",
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": "member",
    "gcp:pubsub/topic:Topic": "name",
    "gcp:pubsub/topicIAMMember:TopicIAMMember": "member",
    "gcp:serviceaccount/account:Account": "account_id",
    "gcp:serviceaccount/iAMMember:IAMMember": "member",
    "gcp:storage/bucket:Bucket": "name",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "member",
    # Azure: every other type is addressed by its name in its parent (`identity_input` reads its name input from
    # infra/azure_names.py). A role assignment's name is a random GUID, but ARM allows one per principal, role and
    # scope (it answers RoleAssignmentExists to a second one).
    "azure-native:authorization:RoleAssignment": "principal_id",
    # Kubernetes: Helm release names are unique per namespace (the provider already deletes named
    # Kubernetes objects before replacing them).
    "kubernetes:helm.sh/v3:Release": "name",
}


@dataclass(frozen=True, slots=True)
class Keep:
    """What a stack does to keep one type of resource when a plan would delete it."""

    why: str
    protect: bool = True
    """In prod: a plan that would delete or replace it fails (`pulumi state unprotect` first, on purpose)."""
    retain: bool = True
    """In prod: a destroy (its protection lifted first) leaves it in the cloud; Pulumi's state forgets it."""
    retain_everywhere: bool = False
    """Not the stack's alone (account-wide): a destroy leaves it in every environment."""


_DATA = "holds the data (datasets, checkpoints, models, logs)"
_BUCKET_SETTING = "guards a bucket's data: deleting it first would leave a retained bucket without it"
_BLOB_SETTING = "guards the account's blobs: deleting it first would leave a retained account without it"
_IMAGES = "holds the images serving and training run (tags are immutable: a new repository starts empty)"
_KEY = "encrypts the data: without it the buckets, images and secrets cannot be read"
_AUDIT = "holds the audit trail (`auditRetentionDays`); a new one starts empty"
_CLUSTER = (
    "runs the platform: a replacement is an outage, so prod refuses one; not retained, since it holds no data "
    "of its own (stores hold it) and one left behind by a deliberate destroy would keep billing its nodes"
)

# Type token -> how it is kept. Protection and retention are decided here only: each cloud's code sets neither.
# The stores, and the settings that keep their data safe (versioning, retention rules, encryption, public access
# blocks, soft delete): those are resources of their own, which the store's `protect` does not cover, and a prod
# destroy or replacement deletes dependents before what they depend on.
KEPT: Mapping[str, Keep] = {
    "aws:s3/bucket:Bucket": Keep(_DATA),
    **{
        f"aws:s3/{t[0].lower()}{t[1:]}:{t}": Keep(_BUCKET_SETTING)
        for t in (
            "BucketVersioning",
            "BucketLifecycleConfiguration",
            "BucketServerSideEncryptionConfiguration",
            "BucketPublicAccessBlock",
            "BucketOwnershipControls",
            "BucketPolicy",
            "BucketLogging",
        )
    },  # fmt: skip
    "aws:kms/key:Key": Keep(_KEY),
    "aws:ecr/repository:Repository": Keep(_IMAGES),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": Keep("decides which images a repository keeps"),
    "aws:cloudwatch/logGroup:LogGroup": Keep(_AUDIT),
    "aws:eks/cluster:Cluster": Keep(_CLUSTER, retain=False),
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": Keep(
        "account-wide: other stacks in the account use it", protect=False, retain_everywhere=True
    ),
    "gcp:storage/bucket:Bucket": Keep(_DATA),
    "gcp:kms/keyRing:KeyRing": Keep(_KEY),
    "gcp:kms/cryptoKey:CryptoKey": Keep(_KEY),
    "gcp:artifactregistry/repository:Repository": Keep(_IMAGES),
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": Keep(_AUDIT),
    "gcp:container/cluster:Cluster": Keep(_CLUSTER, retain=False),
    "azure-native:resources:ResourceGroup": Keep("holds every other resource: deleting it deletes them all"),
    "azure-native:storage:StorageAccount": Keep(_DATA),
    "azure-native:storage:BlobContainer": Keep(_DATA),
    "azure-native:storage:BlobServiceProperties": Keep(_BLOB_SETTING),
    "azure-native:storage:ManagementPolicy": Keep(_BLOB_SETTING),
    "azure-native:keyvault:Vault": Keep(_KEY),
    "azure-native:keyvault:Key": Keep(_KEY),
    "azure-native:containerregistry:Registry": Keep(_IMAGES),
    "azure-native:operationalinsights:Workspace": Keep(_AUDIT),
    "azure-native:containerservice:ManagedCluster": Keep(_CLUSTER, retain=False),
}


def identity_input(type_: str) -> str | None:
    """The constructor argument (snake_case, as a transformation sees it) that fixes a resource's identity."""
    if type_ in FIXED_IDENTITY:
        return FIXED_IDENTITY[type_]
    if type_ in AZURE_NAME_INPUTS:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", AZURE_NAME_INPUTS[type_][0]).lower()
    return None


def options(type_: str, props: Mapping[str, object], *, prod: bool) -> pulumi.ResourceOptions | None:
    """The options this module adds to one resource (None: nothing to add)."""
    identity = identity_input(type_)
    replace_first = identity is not None and props.get(identity) is not None
    keep = KEPT.get(type_)
    protect = keep is not None and prod and keep.protect
    retain = keep is not None and (keep.retain_everywhere or (prod and keep.retain))
    if not (replace_first or protect or retain):
        return None
    return pulumi.ResourceOptions(
        delete_before_replace=True if replace_first else None,
        protect=True if protect else None,
        retain_on_delete=True if retain else None,
    )


def register(*, prod: bool) -> None:
    """Apply `options` to every resource declared from now on in this stack."""

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        extra = options(args.type_, args.props, prod=prod)
        if extra is None:
            return None
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, extra))

    pulumi.runtime.register_stack_transformation(transform)
