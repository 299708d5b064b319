"""Which Google API method the Pulumi GCP provider (Terraform's google provider) calls for each resource type
the GCP stack declares, and which request member each plan input becomes, so the plan's values can be judged
by Google's own API definitions (the discovery documents, gcp_api_check.py) before `pulumi up`.

`members`: plan path -> request body path (`a.b`, `a[]` each element, `a{key}` / `a{}` map keys / values), or
`?name` for a query parameter. `params`: path parameters the provider builds from several inputs, as a
template over the resource's inputs and its provider's (`project`, `region`); `{x|last}` where the provider
takes `x` as a full resource name or a short one and keeps its last segment. The mapping is the provider's
expander code (terraform-provider-google, `resource_<name>.go`, e.g. `expandStorageBucketLifecycle`); the
snake_case inputs arrive here in camelCase. IAM members are read-modify-write of the resource's policy
(`setIamPolicy`): the member and role go into one binding. Inputs the provider consumes itself are listed
in PROVIDER_ONLY with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Call:
    """One API method (discovery document, method id) and the plan inputs it carries."""

    api: str
    method: str
    members: Mapping[str, str]
    params: Mapping[str, str] = field(default_factory=dict)


def iam(api: str, method: str, resource: str, binding: str = "policy.bindings") -> Call:
    """An `*IAMMember` resource: one binding of the resource's IAM policy."""
    members = {"role": f"{binding}[].role", "member": f"{binding}[].members[]"}
    conditions = {
        f"condition.{k}": f"{binding}[].condition.{k}" for k in ("title", "description", "expression")
    }
    return Call(api, method, members | conditions, {"resource": resource})


KMS = "cloudkms.projects.locations.keyRings"
AR = "artifactregistry.projects.locations.repositories"
CLUSTERS = "container.projects.locations.clusters"
COMPUTE = {"project": "{project}", "region": "{region}"}

TABLE: dict[str, tuple[Call, ...]] = {
    "gcp:storage/bucket:Bucket": (
        Call("storage.v1", "storage.buckets.insert", {
            "name": "name", "location": "location", "storageClass": "storageClass", "labels": "labels",
            "versioning.enabled": "versioning.enabled",
            "encryption.defaultKmsKeyName": "encryption.defaultKmsKeyName",
            "logging.logBucket": "logging.logBucket", "logging.logObjectPrefix": "logging.logObjectPrefix",
            "publicAccessPrevention": "iamConfiguration.publicAccessPrevention",
            "uniformBucketLevelAccess": "iamConfiguration.uniformBucketLevelAccess.enabled",
            "lifecycleRules[].action.type": "lifecycle.rule[].action.type",
            "lifecycleRules[].action.storageClass": "lifecycle.rule[].action.storageClass",
            "lifecycleRules[].condition.age": "lifecycle.rule[].condition.age",
            "lifecycleRules[].condition.daysSinceNoncurrentTime":
                "lifecycle.rule[].condition.daysSinceNoncurrentTime",
            "lifecycleRules[].condition.matchesPrefixes": "lifecycle.rule[].condition.matchesPrefix",
            "lifecycleRules[].condition.numNewerVersions": "lifecycle.rule[].condition.numNewerVersions",
        }, {"project": "{project}"}),
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (
        Call("storage.v1", "storage.buckets.setIamPolicy", {
            "bucket": "?bucket", **iam("", "", "", "bindings").members,
        }),
    ),
    "gcp:pubsub/topic:Topic": (
        Call("pubsub.v1", "pubsub.projects.topics.create", {
            "labels": "labels", "messageStoragePolicy.allowedPersistenceRegions":
                "messageStoragePolicy.allowedPersistenceRegions",
        }, {"name": "projects/{project}/topics/{name}"}),
    ),
    "gcp:pubsub/subscription:Subscription": (
        Call("pubsub.v1", "pubsub.projects.subscriptions.create", {
            "topic": "topic", "ackDeadlineSeconds": "ackDeadlineSeconds", "labels": "labels",
            "messageRetentionDuration": "messageRetentionDuration", "retainAckedMessages": "retainAckedMessages",
            "expirationPolicy.ttl": "expirationPolicy.ttl",
        }, {"name": "projects/{project}/subscriptions/{name}"}),
    ),
    "gcp:pubsub/topicIAMMember:TopicIAMMember": (
        iam("pubsub.v1", "pubsub.projects.topics.setIamPolicy", "projects/{project}/topics/{topic}"),
    ),
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": (
        iam("pubsub.v1", "pubsub.projects.subscriptions.setIamPolicy",
            "projects/{project}/subscriptions/{subscription}"),
    ),
    "gcp:serviceaccount/account:Account": (
        Call("iam.v1", "iam.projects.serviceAccounts.create", {
            "accountId": "accountId", "displayName": "serviceAccount.displayName",
            "description": "serviceAccount.description",
        }, {"name": "projects/{project}"}),
    ),
    # serviceAccountId is the account's resource name, `projects/<p>/serviceAccounts/<email>`.
    "gcp:serviceaccount/iAMMember:IAMMember": (
        iam("iam.v1", "iam.projects.serviceAccounts.setIamPolicy", "{serviceAccountId}"),
    ),
    "gcp:projects/iAMMember:IAMMember": (
        iam("cloudresourcemanager.v1", "cloudresourcemanager.projects.setIamPolicy", "{project}"),
    ),
    "gcp:projects/iAMAuditConfig:IAMAuditConfig": (
        Call("cloudresourcemanager.v1", "cloudresourcemanager.projects.setIamPolicy", {
            "service": "policy.auditConfigs[].service",
            "auditLogConfigs[].logType": "policy.auditConfigs[].auditLogConfigs[].logType",
            "auditLogConfigs[].exemptedMembers": "policy.auditConfigs[].auditLogConfigs[].exemptedMembers",
        }, {"resource": "{project}"}),
    ),
    "gcp:projects/service:Service": (
        Call("serviceusage.v1", "serviceusage.services.enable", {}, {"name": "projects/{project}/services/{service}"}),
        Call("serviceusage.v1", "serviceusage.services.disable", {
            "disableDependentServices": "disableDependentServices",
        }),
    ),
    "gcp:projects/serviceIdentity:ServiceIdentity": (
        Call("serviceusage.v1beta1", "serviceusage.services.generateServiceIdentity", {},
             {"parent": "projects/{project}/services/{service}"}),
    ),
    "gcp:kms/keyRing:KeyRing": (
        Call("cloudkms.v1", f"{KMS}.create", {"name": "?keyRingId"}, {"parent": "projects/{project}/locations/{location}"}),
    ),
    "gcp:kms/cryptoKey:CryptoKey": (
        Call("cloudkms.v1", f"{KMS}.cryptoKeys.create", {
            "name": "?cryptoKeyId", "purpose": "purpose", "rotationPeriod": "rotationPeriod",
            "destroyScheduledDuration": "destroyScheduledDuration", "labels": "labels",
        }, {"parent": "{keyRing}"}),
    ),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (
        iam("cloudkms.v1", f"{KMS}.cryptoKeys.setIamPolicy", "{cryptoKeyId}"),
    ),
    "gcp:artifactregistry/repository:Repository": (
        Call("artifactregistry.v1", f"{AR}.create", {
            "repositoryId": "?repositoryId", "format": "format", "kmsKeyName": "kmsKeyName", "labels": "labels",
            "description": "description", "dockerConfig.immutableTags": "dockerConfig.immutableTags",
            "vulnerabilityScanningConfig.enablementConfig": "vulnerabilityScanningConfig.enablementConfig",
        }, {"parent": "projects/{project}/locations/{location}"}),
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (
        iam("artifactregistry.v1", f"{AR}.setIamPolicy",
            "projects/{project}/locations/{location}/repositories/{repository}"),
    ),
    "gcp:billing/budget:Budget": (
        Call("billingbudgets.v1", "billingbudgets.billingAccounts.budgets.create", {
            "displayName": "displayName",
            "amount.specifiedAmount.currencyCode": "amount.specifiedAmount.currencyCode",
            "amount.specifiedAmount.units": "amount.specifiedAmount.units",
            "budgetFilter.calendarPeriod": "budgetFilter.calendarPeriod",
            "budgetFilter.projects": "budgetFilter.projects",
            "thresholdRules[].spendBasis": "thresholdRules[].spendBasis",
            "thresholdRules[].thresholdPercent": "thresholdRules[].thresholdPercent",
            **{f"allUpdatesRule.{k}": f"notificationsRule.{k}" for k in (
                "disableDefaultIamRecipients", "monitoringNotificationChannels", "pubsubTopic", "schemaVersion")},
        }, {"parent": "billingAccounts/{billingAccount}"}),
    ),
    "gcp:logging/projectBucketConfig:ProjectBucketConfig": (
        Call("logging.v2", "logging.projects.locations.buckets.create", {
            "bucketId": "?bucketId", "retentionDays": "retentionDays", "locked": "locked",
            "cmekSettings.kmsKeyName": "cmekSettings.kmsKeyName",
        }, {"parent": "projects/{project}/locations/{location}"}),
    ),
    "gcp:logging/projectSink:ProjectSink": (
        Call("logging.v2", "logging.projects.sinks.create", {
            "name": "name", "destination": "destination", "filter": "filter",
            "uniqueWriterIdentity": "?uniqueWriterIdentity",
        }, {"parent": "projects/{project}"}),
    ),
    "gcp:monitoring/notificationChannel:NotificationChannel": (
        Call("monitoring.v3", "monitoring.projects.notificationChannels.create", {
            "type": "type", "displayName": "displayName", "labels": "labels", "userLabels": "userLabels",
        }, {"name": "projects/{project}"}),
    ),
    "gcp:monitoring/alertPolicy:AlertPolicy": (
        Call("monitoring.v3", "monitoring.projects.alertPolicies.create", {
            "combiner": "combiner", "displayName": "displayName", "notificationChannels": "notificationChannels",
            "userLabels": "userLabels", "conditions[].displayName": "conditions[].displayName",
            **{f"conditions[].conditionThreshold.{k}": f"conditions[].conditionThreshold.{k}" for k in (
                "comparison", "duration", "filter", "thresholdValue", "aggregations[].alignmentPeriod",
                "aggregations[].crossSeriesReducer", "aggregations[].perSeriesAligner")},
        }, {"name": "projects/{project}"}),
    ),
    "gcp:compute/network:Network": (
        Call("compute.v1", "compute.networks.insert", {
            "name": "name", "autoCreateSubnetworks": "autoCreateSubnetworks",
        }, {"project": "{project}"}),
    ),
    "gcp:compute/subnetwork:Subnetwork": (
        Call("compute.v1", "compute.subnetworks.insert", {
            "name": "name", "network": "network", "ipCidrRange": "ipCidrRange",
            "privateIpGoogleAccess": "privateIpGoogleAccess",
            "logConfig.aggregationInterval": "logConfig.aggregationInterval",
            "logConfig.flowSampling": "logConfig.flowSampling",
            "secondaryIpRanges[].rangeName": "secondaryIpRanges[].rangeName",
            "secondaryIpRanges[].ipCidrRange": "secondaryIpRanges[].ipCidrRange",
        }, COMPUTE),
    ),
    "gcp:compute/router:Router": (
        Call("compute.v1", "compute.routers.insert", {"name": "name", "network": "network"}, COMPUTE),
    ),
    # A router NAT is an element of its router's `nats`: the provider patches the router.
    "gcp:compute/routerNat:RouterNat": (
        Call("compute.v1", "compute.routers.patch", {
            "router": "?router", "name": "nats[].name", "natIpAllocateOption": "nats[].natIpAllocateOption",
            "sourceSubnetworkIpRangesToNat": "nats[].sourceSubnetworkIpRangesToNat",
            "logConfig.enable": "nats[].logConfig.enable", "logConfig.filter": "nats[].logConfig.filter",
        }, COMPUTE),
    ),
    "gcp:container/cluster:Cluster": (
        Call("container.v1", f"{CLUSTERS}.create", {
            f"{k}": f"cluster.{v}" for k, v in {
                "name": "name", "network": "network", "subnetwork": "subnetwork",
                "initialNodeCount": "initialNodeCount", "minMasterVersion": "initialClusterVersion",
                "resourceLabels": "resourceLabels", "datapathProvider": "networkConfig.datapathProvider",
                "enableShieldedNodes": "shieldedNodes.enabled",
                "databaseEncryption.keyName": "databaseEncryption.keyName",
                "databaseEncryption.state": "databaseEncryption.state",
                "ipAllocationPolicy.clusterSecondaryRangeName": "ipAllocationPolicy.clusterSecondaryRangeName",
                "ipAllocationPolicy.servicesSecondaryRangeName":
                    "ipAllocationPolicy.servicesSecondaryRangeName",
                "loggingConfig.enableComponents": "loggingConfig.componentConfig.enableComponents",
                "masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock":
                    "masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock",
                "masterAuthorizedNetworksConfig.cidrBlocks[].displayName":
                    "masterAuthorizedNetworksConfig.cidrBlocks[].displayName",
                "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled":
                    "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled",
                "nodeConfig.serviceAccount": "nodeConfig.serviceAccount",
                "privateClusterConfig.enablePrivateEndpoint": "privateClusterConfig.enablePrivateEndpoint",
                "privateClusterConfig.enablePrivateNodes": "privateClusterConfig.enablePrivateNodes",
                "privateClusterConfig.masterIpv4CidrBlock": "privateClusterConfig.masterIpv4CidrBlock",
                "releaseChannel.channel": "releaseChannel.channel",
                "workloadIdentityConfig.workloadPool": "workloadIdentityConfig.workloadPool",
            }.items()
        }, {"parent": "projects/{project}/locations/{location}"}),
    ),
    "gcp:container/nodePool:NodePool": (
        Call("container.v1", f"{CLUSTERS}.nodePools.create", {
            "name": "nodePool.name", "initialNodeCount": "nodePool.initialNodeCount",
            **{f"autoscaling.{k}": f"nodePool.autoscaling.{k}" for k in (
                "locationPolicy", "totalMinNodeCount", "totalMaxNodeCount", "minNodeCount", "maxNodeCount")},
            **{f"management.{k}": f"nodePool.management.{k}" for k in ("autoRepair", "autoUpgrade")},
            **{f"nodeConfig.{k}": f"nodePool.config.{k}" for k in (
                "bootDiskKmsKey", "diskSizeGb", "diskType", "labels", "machineType", "oauthScopes",
                "resourceLabels", "serviceAccount", "spot", "shieldedInstanceConfig.enableIntegrityMonitoring",
                "shieldedInstanceConfig.enableSecureBoot", "workloadMetadataConfig.mode", "taints[].key",
                "taints[].value", "taints[].effect")},
            "nodeConfig.guestAccelerators[].count": "nodePool.config.accelerators[].acceleratorCount",
            "nodeConfig.guestAccelerators[].type": "nodePool.config.accelerators[].acceleratorType",
            "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion":
                "nodePool.config.accelerators[].gpuDriverInstallationConfig.gpuDriverVersion",
        # `cluster`: "May be specified in the format projects/{{project}}/locations/{{location}}/clusters/
        # {{cluster}} or as just the name of the cluster" (the provider's docstring); the program passes the id.
        }, {"parent": "projects/{project}/locations/{location}/clusters/{cluster|last}"}),
    ),
}  # fmt: skip

# Inputs the provider consumes itself: no request member carries them (so nothing of Google's to check).
DELETION = "what the provider does on `pulumi destroy` (Terraform-only setting)"
PROVIDER_ONLY: dict[str, dict[str, str]] = {
    "gcp:storage/bucket:Bucket": {
        "forceDestroy": "the provider deletes the objects before the bucket",
        "deletionPolicy": DELETION,
        "lifecycleRules[].condition.withState": "sent as condition.isLive (LIVE: true, ARCHIVED: false)",
    },
    "gcp:kms/cryptoKey:CryptoKey": {"deletionPolicy": DELETION},
    "gcp:container/cluster:Cluster": {
        "deletionProtection": "the provider refuses to delete the cluster while set (Terraform-only)",
        "removeDefaultNodePool": "the provider deletes the default pool after create (nodePools.delete)",
    },
    "gcp:projects/service:Service": {"disableOnDestroy": DELETION},
}
