"""Which AWS API call the Pulumi AWS provider makes for each resource type the AWS stacks declare, and which
API member each plan input becomes, so the plans' values can be judged by AWS's own definitions (botocore's
service models) before a real account refuses them at `pulumi up`.

Paths: `a.b` structure members, `a[]` each element of a list, `a{key}` / `a{}` each key / value of a map.
A plan map sent as a list of key/value structures (most services' tags) maps its keys and values onto the
list's members (`tags{key}` -> `Tags[].Key`). A plan path mapped to a list or map of scalars covers its
elements too. Inputs the provider consumes itself (no API member) are listed with why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Generated names: Terraform's PrefixedUniqueId appends 26 characters (terraform-plugin-sdk helper/id,
# UniqueIDSuffixLength = 26: a UTC timestamp to 1/10,000 s and an 8-hex-digit counter).
UNIQUE_SUFFIX = "20261202000000000000000001"
# Pulumi autonaming: `<logical name>-<7 random hex characters>` (pulumi-terraform-bridge AutoName).
AUTONAME_SUFFIX = "-0a1b2c3"


def prefixed(prefix: str) -> str:
    return prefix + UNIQUE_SUFFIX


@dataclass(frozen=True)
class Call:
    """One API operation and the plan inputs it carries (plan path -> API member path)."""

    service: str
    operation: str
    members: Mapping[str, str]
    # plan path -> how the provider turns the input into the sent value (a prefix into a generated name)
    transforms: Mapping[str, Callable[[str], str]] = field(default_factory=dict)


def kv(member: str, key: str = "Key", value: str = "Value", source: str = "tags") -> dict[str, str]:
    """A plan map sent as a list of key/value structures."""
    return {source: member, f"{source}{{key}}": f"{member}[].{key}", f"{source}{{}}": f"{member}[].{value}"}


EC2_TAGS = kv("TagSpecifications[].Tags")

TABLE: dict[str, tuple[Call, ...]] = {
    "aws:iam/role:Role": (
        Call("iam", "CreateRole", {
            "name": "RoleName", "path": "Path", "description": "Description",
            "assumeRolePolicy": "AssumeRolePolicyDocument", "maxSessionDuration": "MaxSessionDuration",
            "permissionsBoundary": "PermissionsBoundary", **kv("Tags"),
        }),
    ),
    "aws:iam/rolePolicy:RolePolicy": (
        Call("iam", "PutRolePolicy", {"name": "PolicyName", "role": "RoleName", "policy": "PolicyDocument"}),
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": (
        Call("iam", "AttachRolePolicy", {"role": "RoleName", "policyArn": "PolicyArn"}),
    ),
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": (
        Call("iam", "CreateServiceLinkedRole", {
            "awsServiceName": "AWSServiceName", "customSuffix": "CustomSuffix", "description": "Description",
        }),
        Call("iam", "TagRole", kv("Tags")),
    ),
    "aws:eks/cluster:Cluster": (
        Call("eks", "CreateCluster", {
            "name": "name", "version": "version", "roleArn": "roleArn", "tags": "tags",
            "vpcConfig.subnetIds": "resourcesVpcConfig.subnetIds",
            "vpcConfig.securityGroupIds": "resourcesVpcConfig.securityGroupIds",
            "vpcConfig.endpointPrivateAccess": "resourcesVpcConfig.endpointPrivateAccess",
            "vpcConfig.endpointPublicAccess": "resourcesVpcConfig.endpointPublicAccess",
            "vpcConfig.publicAccessCidrs": "resourcesVpcConfig.publicAccessCidrs",
            "enabledClusterLogTypes": "logging.clusterLogging[].types",
            "encryptionConfig.provider.keyArn": "encryptionConfig[].provider.keyArn",
            "encryptionConfig.resources": "encryptionConfig[].resources",
            "accessConfig.authenticationMode": "accessConfig.authenticationMode",
            "accessConfig.bootstrapClusterCreatorAdminPermissions":
                "accessConfig.bootstrapClusterCreatorAdminPermissions",
            "deletionProtection": "deletionProtection",
        }),
    ),
    "aws:eks/nodeGroup:NodeGroup": (
        Call("eks", "CreateNodegroup", {
            "clusterName": "clusterName", "nodeGroupName": "nodegroupName",
            "nodeGroupNamePrefix": "nodegroupName", "amiType": "amiType", "capacityType": "capacityType",
            "instanceTypes": "instanceTypes", "labels": "labels", "nodeRoleArn": "nodeRole",
            "launchTemplate.id": "launchTemplate.id", "launchTemplate.name": "launchTemplate.name",
            "launchTemplate.version": "launchTemplate.version",
            "scalingConfig.desiredSize": "scalingConfig.desiredSize",
            "scalingConfig.minSize": "scalingConfig.minSize", "scalingConfig.maxSize": "scalingConfig.maxSize",
            "subnetIds": "subnets", "tags": "tags", "taints": "taints", "taints[].key": "taints[].key",
            "taints[].value": "taints[].value", "taints[].effect": "taints[].effect",
            "updateConfig.maxUnavailable": "updateConfig.maxUnavailable",
            "updateConfig.maxUnavailablePercentage": "updateConfig.maxUnavailablePercentage",
            "diskSize": "diskSize", "version": "version", "releaseVersion": "releaseVersion",
        }, {"nodeGroupNamePrefix": prefixed}),
    ),
    "aws:eks/addon:Addon": (
        Call("eks", "CreateAddon", {
            "clusterName": "clusterName", "addonName": "addonName", "addonVersion": "addonVersion",
            "configurationValues": "configurationValues", "resolveConflictsOnCreate": "resolveConflicts",
            "serviceAccountRoleArn": "serviceAccountRoleArn", "tags": "tags",
        }),
        Call("eks", "UpdateAddon", {"resolveConflictsOnUpdate": "resolveConflicts"}),
    ),
    "aws:eks/accessEntry:AccessEntry": (
        Call("eks", "CreateAccessEntry", {
            "clusterName": "clusterName", "principalArn": "principalArn", "type": "type",
            "kubernetesGroups": "kubernetesGroups", "userName": "username", "tags": "tags",
        }),
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        Call("eks", "AssociateAccessPolicy", {
            "clusterName": "clusterName", "principalArn": "principalArn", "policyArn": "policyArn",
            "accessScope.type": "accessScope.type", "accessScope.namespaces": "accessScope.namespaces",
        }),
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": (
        Call("eks", "CreatePodIdentityAssociation", {
            "clusterName": "clusterName", "namespace": "namespace", "serviceAccount": "serviceAccount",
            "roleArn": "roleArn", "tags": "tags",
        }),
    ),
    "aws:ecr/repository:Repository": (
        Call("ecr", "CreateRepository", {
            "name": "repositoryName", "imageTagMutability": "imageTagMutability",
            "imageScanningConfiguration.scanOnPush": "imageScanningConfiguration.scanOnPush",
            "encryptionConfigurations[].encryptionType": "encryptionConfiguration.encryptionType",
            "encryptionConfigurations[].kmsKey": "encryptionConfiguration.kmsKey", **kv("tags"),
        }),
    ),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": (
        Call("ecr", "PutLifecyclePolicy", {"repository": "repositoryName", "policy": "lifecyclePolicyText"}),
    ),
    "aws:kms/key:Key": (
        Call("kms", "CreateKey", {
            "description": "Description", "policy": "Policy", "keyUsage": "KeyUsage",
            "customerMasterKeySpec": "KeySpec", "multiRegion": "MultiRegion",
            **kv("Tags", key="TagKey", value="TagValue"),
        }),
        Call("kms", "EnableKeyRotation", {"rotationPeriodInDays": "RotationPeriodInDays"}),
        Call("kms", "ScheduleKeyDeletion", {"deletionWindowInDays": "PendingWindowInDays"}),
    ),
    "aws:kms/alias:Alias": (Call("kms", "CreateAlias", {"name": "AliasName", "targetKeyId": "TargetKeyId"}),),
    "aws:s3/bucket:Bucket": (
        Call("s3", "CreateBucket", {"bucket": "Bucket"}),
        Call("s3", "PutBucketTagging", kv("Tagging.TagSet")),
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        Call("s3", "PutBucketLifecycleConfiguration", {
            "bucket": "Bucket", "rules": "LifecycleConfiguration.Rules",
            "rules[].id": "LifecycleConfiguration.Rules[].ID",
            "rules[].status": "LifecycleConfiguration.Rules[].Status",
            "rules[].filter.prefix": "LifecycleConfiguration.Rules[].Filter.Prefix",
            "rules[].expiration.days": "LifecycleConfiguration.Rules[].Expiration.Days",
            "rules[].noncurrentVersionExpiration.noncurrentDays":
                "LifecycleConfiguration.Rules[].NoncurrentVersionExpiration.NoncurrentDays",
            "rules[].abortIncompleteMultipartUpload.daysAfterInitiation":
                "LifecycleConfiguration.Rules[].AbortIncompleteMultipartUpload.DaysAfterInitiation",
            "rules[].transitions[].days": "LifecycleConfiguration.Rules[].Transitions[].Days",
            "rules[].transitions[].storageClass": "LifecycleConfiguration.Rules[].Transitions[].StorageClass",
        }),
    ),
    "aws:s3/bucketLogging:BucketLogging": (
        Call("s3", "PutBucketLogging", {
            "bucket": "Bucket", "targetBucket": "BucketLoggingStatus.LoggingEnabled.TargetBucket",
            "targetPrefix": "BucketLoggingStatus.LoggingEnabled.TargetPrefix",
        }),
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": (
        Call("s3", "PutBucketOwnershipControls", {
            "bucket": "Bucket", "rule.objectOwnership": "OwnershipControls.Rules[].ObjectOwnership",
        }),
    ),
    "aws:s3/bucketPolicy:BucketPolicy": (Call("s3", "PutBucketPolicy", {"bucket": "Bucket", "policy": "Policy"}),),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": (
        Call("s3", "PutPublicAccessBlock", {"bucket": "Bucket"} | {
            k: f"PublicAccessBlockConfiguration.{k[0].upper()}{k[1:]}"
            for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        }),
    ),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        Call("s3", "PutBucketEncryption", {
            "bucket": "Bucket",
            "rules[].applyServerSideEncryptionByDefault.sseAlgorithm":
                "ServerSideEncryptionConfiguration.Rules[].ApplyServerSideEncryptionByDefault.SSEAlgorithm",
            "rules[].applyServerSideEncryptionByDefault.kmsMasterKeyId":
                "ServerSideEncryptionConfiguration.Rules[].ApplyServerSideEncryptionByDefault.KMSMasterKeyID",
            "rules[].bucketKeyEnabled": "ServerSideEncryptionConfiguration.Rules[].BucketKeyEnabled",
        }),
    ),
    "aws:s3/bucketVersioning:BucketVersioning": (
        Call("s3", "PutBucketVersioning", {
            "bucket": "Bucket", "versioningConfiguration.status": "VersioningConfiguration.Status",
            "versioningConfiguration.mfaDelete": "VersioningConfiguration.MFADelete",
        }),
    ),
    "aws:cloudwatch/logGroup:LogGroup": (
        Call("logs", "CreateLogGroup", {
            "name": "logGroupName", "kmsKeyId": "kmsKeyId", "logGroupClass": "logGroupClass", "tags": "tags",
        }),
        Call("logs", "PutRetentionPolicy", {"retentionInDays": "retentionInDays"}),
    ),
    "aws:cloudwatch/metricAlarm:MetricAlarm": (
        Call("cloudwatch", "PutMetricAlarm", {
            "name": "AlarmName", "alarmDescription": "AlarmDescription", "namespace": "Namespace",
            "metricName": "MetricName", "comparisonOperator": "ComparisonOperator", "period": "Period",
            "evaluationPeriods": "EvaluationPeriods", "datapointsToAlarm": "DatapointsToAlarm",
            "statistic": "Statistic", "extendedStatistic": "ExtendedStatistic", "threshold": "Threshold",
            "treatMissingData": "TreatMissingData", "unit": "Unit", "actionsEnabled": "ActionsEnabled",
            "alarmActions": "AlarmActions", "okActions": "OKActions",
            "insufficientDataActions": "InsufficientDataActions",
            **kv("Dimensions", key="Name", source="dimensions"), **kv("Tags"),
        }),
    ),
    "aws:sns/topic:Topic": (
        Call("sns", "CreateTopic", {"name": "Name", "kmsMasterKeyId": "Attributes{}", **kv("Tags")}),
    ),
    "aws:sns/topicSubscription:TopicSubscription": (
        Call("sns", "Subscribe", {"topic": "TopicArn", "protocol": "Protocol", "endpoint": "Endpoint"}),
    ),
    "aws:budgets/budget:Budget": (
        Call("budgets", "CreateBudget", {
            "accountId": "AccountId", "name": "Budget.BudgetName", "budgetType": "Budget.BudgetType",
            "limitAmount": "Budget.BudgetLimit.Amount", "limitUnit": "Budget.BudgetLimit.Unit",
            "timeUnit": "Budget.TimeUnit",
            "costFilters[].name": "Budget.CostFilters{key}", "costFilters[].values": "Budget.CostFilters{}",
            "notifications": "NotificationsWithSubscribers",
            "notifications[].comparisonOperator": "NotificationsWithSubscribers[].Notification.ComparisonOperator",
            "notifications[].notificationType": "NotificationsWithSubscribers[].Notification.NotificationType",
            "notifications[].threshold": "NotificationsWithSubscribers[].Notification.Threshold",
            "notifications[].thresholdType": "NotificationsWithSubscribers[].Notification.ThresholdType",
            "notifications[].subscriberEmailAddresses": "NotificationsWithSubscribers[].Subscribers",
            "notifications[].subscriberEmailAddresses[]": "NotificationsWithSubscribers[].Subscribers[].Address",
            "notifications[].subscriberSnsTopicArns[]": "NotificationsWithSubscribers[].Subscribers[].Address",
            **kv("ResourceTags"),
        }),
    ),
    "aws:cloudtrail/trail:Trail": (
        Call("cloudtrail", "CreateTrail", {
            "name": "Name", "s3BucketName": "S3BucketName", "s3KeyPrefix": "S3KeyPrefix",
            "includeGlobalServiceEvents": "IncludeGlobalServiceEvents", "isMultiRegionTrail": "IsMultiRegionTrail",
            "enableLogFileValidation": "EnableLogFileValidation", "kmsKeyId": "KmsKeyId",
            "snsTopicName": "SnsTopicName", **kv("TagsList"),
        }),
        Call("cloudtrail", "PutEventSelectors", {
            "eventSelectors": "EventSelectors", "eventSelectors[].readWriteType": "EventSelectors[].ReadWriteType",
            "eventSelectors[].includeManagementEvents": "EventSelectors[].IncludeManagementEvents",
            "eventSelectors[].dataResources": "EventSelectors[].DataResources",
            "eventSelectors[].dataResources[].type": "EventSelectors[].DataResources[].Type",
            "eventSelectors[].dataResources[].values": "EventSelectors[].DataResources[].Values",
        }),
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        Call("ec2", "CreateLaunchTemplate", {
            "name": "LaunchTemplateName", "namePrefix": "LaunchTemplateName", "description": "VersionDescription",
            "userData": "LaunchTemplateData.UserData",
            **{f"blockDeviceMappings[].{p}": f"LaunchTemplateData.BlockDeviceMappings[].{m}" for p, m in (
                ("deviceName", "DeviceName"), ("ebs.volumeSize", "Ebs.VolumeSize"),
                ("ebs.volumeType", "Ebs.VolumeType"), ("ebs.encrypted", "Ebs.Encrypted"),
                ("ebs.deleteOnTermination", "Ebs.DeleteOnTermination"), ("ebs.kmsKeyId", "Ebs.KmsKeyId"),
                ("ebs.iops", "Ebs.Iops"), ("ebs.throughput", "Ebs.Throughput"))},
            **{f"metadataOptions.{p}": f"LaunchTemplateData.MetadataOptions.{p[0].upper()}{p[1:]}" for p in (
                "httpEndpoint", "httpTokens", "httpPutResponseHopLimit", "instanceMetadataTags")},
            "tagSpecifications": "LaunchTemplateData.TagSpecifications",
            "tagSpecifications[].resourceType": "LaunchTemplateData.TagSpecifications[].ResourceType",
            **kv("LaunchTemplateData.TagSpecifications[].Tags", source="tagSpecifications[].tags"),
            **EC2_TAGS,
        }, {"namePrefix": prefixed}),
    ),
    "aws:ec2/vpc:Vpc": (
        Call("ec2", "CreateVpc", {"cidrBlock": "CidrBlock", "instanceTenancy": "InstanceTenancy", **EC2_TAGS}),
        Call("ec2", "ModifyVpcAttribute", {
            "enableDnsHostnames": "EnableDnsHostnames.Value", "enableDnsSupport": "EnableDnsSupport.Value",
        }),
    ),
    "aws:ec2/subnet:Subnet": (
        Call("ec2", "CreateSubnet", {
            "vpcId": "VpcId", "cidrBlock": "CidrBlock", "availabilityZone": "AvailabilityZone", **EC2_TAGS,
        }),
        Call("ec2", "ModifySubnetAttribute", {"mapPublicIpOnLaunch": "MapPublicIpOnLaunch.Value"}),
    ),
    "aws:ec2/eip:Eip": (Call("ec2", "AllocateAddress", {"domain": "Domain", **EC2_TAGS}),),
    "aws:ec2/internetGateway:InternetGateway": (
        Call("ec2", "CreateInternetGateway", EC2_TAGS),
        Call("ec2", "AttachInternetGateway", {"vpcId": "VpcId"}),
    ),
    "aws:ec2/natGateway:NatGateway": (
        Call("ec2", "CreateNatGateway", {
            "allocationId": "AllocationId", "subnetId": "SubnetId", "connectivityType": "ConnectivityType",
            **EC2_TAGS,
        }),
    ),
    "aws:ec2/routeTable:RouteTable": (
        Call("ec2", "CreateRouteTable", {"vpcId": "VpcId", **EC2_TAGS}),
        Call("ec2", "CreateRoute", {
            "routes[].cidrBlock": "DestinationCidrBlock", "routes[].natGatewayId": "NatGatewayId",
            "routes[].gatewayId": "GatewayId",
        }),
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        Call("ec2", "AssociateRouteTable", {
            "routeTableId": "RouteTableId", "subnetId": "SubnetId", "gatewayId": "GatewayId",
        }),
    ),
    "aws:autoscaling/tag:Tag": (
        Call("autoscaling", "CreateOrUpdateTags", {
            "autoscalingGroupName": "Tags[].ResourceId", "tag.key": "Tags[].Key", "tag.value": "Tags[].Value",
            "tag.propagateAtLaunch": "Tags[].PropagateAtLaunch",
        }),
    ),
}  # fmt: skip

# Inputs the provider consumes itself: no API member carries them (so nothing of AWS's to check).
PROVIDER_ONLY: dict[str, dict[str, str]] = {
    "aws:ecr/repository:Repository": {"forceDelete": "the provider deletes the images before the repository"},
    "aws:s3/bucket:Bucket": {"forceDestroy": "the provider empties the bucket before deleting it"},
    "aws:kms/key:Key": {"enableKeyRotation": "chooses EnableKeyRotation (mapped) over DisableKeyRotation"},
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "updateDefaultVersion": "ModifyLaunchTemplate's DefaultVersion is the version the provider just made",
    },
}

# Inputs Pulumi fills in when the program leaves them out: `<logical name>-<7 hex>`.
AUTONAMED: dict[str, str] = {"aws:iam/rolePolicy:RolePolicy": "name"}
