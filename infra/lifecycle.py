"""Resource options decided once, by resource type, for every resource the program declares (day two).

- `delete_before_replace` where a replacement would collide with the old resource: the resource has a
  fixed physical name (two buckets cannot share a name while the old one still exists), or it is one of
  a kind per parent (a bucket's policy, an IAM binding, a role assignment: creating the new one first and
  then deleting the old would delete the setting both share, leaving none).
- `retain_on_delete` in prod for the resources that hold data or keys: if protection is ever lifted and
  the stack destroyed, the cloud keeps them and only Pulumi's state forgets them.

Pulumi applies a stack transformation to every resource registered after it, components' children
included, so new modules get the same options without repeating them. `ignore_changes` stays beside
each resource (it names the one field a controller owns there).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

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
    # Azure: every resource is addressed by its name in its parent; a role assignment is unique per
    # principal, role and scope (Azure answers RoleAssignmentExists to a second one).
    "azure-native:authorization:RoleAssignment": "principal_id",
    "azure-native:authorization:RoleDefinition": "role_definition_id",
    "azure-native:compute:DiskEncryptionSet": "disk_encryption_set_name",
    "azure-native:consumption:Budget": "budget_name",
    "azure-native:containerregistry:Registry": "registry_name",
    "azure-native:containerservice:AgentPool": "agent_pool_name",
    "azure-native:containerservice:ManagedCluster": "resource_name",
    "azure-native:keyvault:Key": "key_name",
    "azure-native:keyvault:Vault": "vault_name",
    "azure-native:managedidentity:FederatedIdentityCredential": "federated_identity_credential_resource_name",
    "azure-native:managedidentity:UserAssignedIdentity": "resource_name",
    "azure-native:monitor:ActionGroup": "action_group_name",
    "azure-native:monitor:DiagnosticSetting": "name",
    "azure-native:monitor:MetricAlert": "rule_name",
    "azure-native:monitor:SubscriptionDiagnosticSetting": "name",
    "azure-native:network:NatGateway": "nat_gateway_name",
    "azure-native:network:PublicIPAddress": "public_ip_address_name",
    "azure-native:network:Subnet": "subnet_name",
    "azure-native:network:VirtualNetwork": "virtual_network_name",
    "azure-native:operationalinsights:Workspace": "workspace_name",
    "azure-native:resources:ResourceGroup": "resource_group_name",
    "azure-native:storage:BlobContainer": "container_name",
    "azure-native:storage:BlobServiceProperties": "blob_services_name",
    "azure-native:storage:ManagementPolicy": "management_policy_name",
    "azure-native:storage:StorageAccount": "account_name",
    # Kubernetes: Helm release names are unique per namespace (the provider already deletes named
    # Kubernetes objects before replacing them).
    "kubernetes:helm.sh/v3:Release": "name",
}

# Where data or keys live, and the settings that keep them safe (versioning, retention rules, encryption, public
# access blocks, soft delete): kept by the cloud if a prod stack is ever destroyed. A retained bucket whose
# versioning or access block was deleted with the stack would keep its objects but lose what protects them.
RETAINED_IN_PROD: frozenset[str] = frozenset(
    {
        "aws:s3/bucket:Bucket",
        "aws:s3/bucketVersioning:BucketVersioning",
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
        "aws:s3/bucketPolicy:BucketPolicy",
        "aws:s3/bucketLogging:BucketLogging",
        "aws:ecr/lifecyclePolicy:LifecyclePolicy",
        "aws:kms/key:Key",
        "aws:ecr/repository:Repository",
        "aws:cloudwatch/logGroup:LogGroup",
        "gcp:storage/bucket:Bucket",
        "gcp:kms/keyRing:KeyRing",
        "gcp:kms/cryptoKey:CryptoKey",
        "gcp:artifactregistry/repository:Repository",
        "gcp:logging/projectBucketConfig:ProjectBucketConfig",
        "azure-native:resources:ResourceGroup",
        "azure-native:storage:StorageAccount",
        "azure-native:storage:BlobContainer",
        "azure-native:storage:BlobServiceProperties",
        "azure-native:storage:ManagementPolicy",
        "azure-native:keyvault:Vault",
        "azure-native:keyvault:Key",
        "azure-native:containerregistry:Registry",
        "azure-native:operationalinsights:Workspace",
    }
)


def options(type_: str, props: Mapping[str, object], *, prod: bool) -> pulumi.ResourceOptions | None:
    """The options this module adds to one resource (None: nothing to add)."""
    identity = FIXED_IDENTITY.get(type_)
    replace_first = identity is not None and props.get(identity) is not None
    retain = prod and type_ in RETAINED_IN_PROD
    if not (replace_first or retain):
        return None
    return pulumi.ResourceOptions(
        delete_before_replace=True if replace_first else None, retain_on_delete=True if retain else None
    )


def register(*, prod: bool) -> None:
    """Apply `options` to every resource declared from now on in this stack."""

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        extra = options(args.type_, args.props, prod=prod)
        if extra is None:
            return None
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, extra))

    pulumi.runtime.register_stack_transformation(transform)
