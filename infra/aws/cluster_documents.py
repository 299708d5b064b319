"""IAM documents of the cluster's own controllers: the cluster autoscaler and the EBS CSI driver.

Built with documents.py's helpers; the describe actions they grant on `*` are listed there
(ACTIONS_WITHOUT_RESOURCE_TYPES), because the checks of every document read that one list.
"""

from __future__ import annotations

from infra.aws.documents import CLUSTER_AUTOSCALER_DESCRIBE, EBS_CSI_DESCRIBE, Document, _statement, policy

# The tag the EBS CSI driver puts on every volume it creates (kubernetes-sigs/aws-ebs-csi-driver, the
# `ebs.csi.aws.com/cluster: true` tag AmazonEBSCSIDriverPolicy conditions on): its writes are limited to those.
EBS_CSI_VOLUME_TAG = "ebs.csi.aws.com/cluster"
# The tag this stack's launch templates put on every node they start (infra/aws/cluster.py, `tags(cfg)`):
# a tag the stack sets itself, not one the service is assumed to add.
NODE_STACK_TAG = "stack"
# A CMK-encrypted EBS volume: EC2 creates it with a data key and a grant on the caller's behalf
# (docs.aws.amazon.com/eks/latest/userguide/csi-iam-role.html, "custom KMS key for encryption").
EBS_KEY_USE = ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext"]


def cluster_autoscaler_policy(cluster_name: str, region: str, account_id: str) -> Document:
    """Cluster autoscaler: describe (no resource types) and resize only the ASGs tagged for this cluster."""
    return policy(
        [
            _statement(
                "Describe",
                sorted(CLUSTER_AUTOSCALER_DESCRIBE),
                ["*"],
            ),
            _statement(
                "ResizeOwnGroups",
                ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                [f"arn:aws:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/*"],
                Condition={
                    "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                },
            ),
            _statement(
                "DescribeNodegroups",
                ["eks:DescribeNodegroup"],
                [f"arn:aws:eks:{region}:{account_id}:nodegroup/{cluster_name}/*"],
            ),
        ]
    )


_ATTACH = ["ec2:AttachVolume", "ec2:DetachVolume"]


def ebs_csi_driver_policy(stack: str, region: str, account_id: str) -> Document:
    """The EBS CSI controller (dynamic provisioning, attach, resize; no snapshots): AmazonEBSCSIDriverPolicy's
    volume statements, limited to this account and region, to volumes the driver tagged and to this
    cluster's nodes. The managed policy grants its writes on `*`; here only describes take `*`."""
    volumes = f"arn:aws:ec2:{region}:{account_id}:volume/*"
    instances = f"arn:aws:ec2:{region}:{account_id}:instance/*"
    own_volume = {"StringEquals": {f"aws:ResourceTag/{EBS_CSI_VOLUME_TAG}": "true"}}
    return policy(
        [
            _statement("Describe", sorted(EBS_CSI_DESCRIBE), ["*"]),
            _statement(
                "CreateTaggedVolumes",
                ["ec2:CreateVolume"],
                [volumes],
                Condition={"StringEquals": {f"aws:RequestTag/{EBS_CSI_VOLUME_TAG}": "true"}},
            ),
            # CreateVolume's TagSpecifications need CreateTags, at creation only.
            _statement(
                "TagOnCreate",
                ["ec2:CreateTags"],
                [volumes],
                Condition={"StringEquals": {"ec2:CreateAction": "CreateVolume"}},
            ),
            _statement(
                "ManageOwnVolumes", ["ec2:DeleteVolume", "ec2:ModifyVolume"], [volumes], Condition=own_volume
            ),
            # Attach and detach authorize the volume and the instance separately: the first statement allows
            # the driver's volumes, the second this cluster's nodes. Each names both resource types the
            # actions take (what IAM analysers such as parliament expect); its condition decides which one
            # it allows, as in AWS's example "attach volumes with a tag to instances with a tag".
            _statement("AttachOwnVolumes", _ATTACH, [volumes, instances], Condition=own_volume),
            _statement(
                "AttachToClusterNodes",
                _ATTACH,
                [volumes, instances],
                Condition={"StringEquals": {f"aws:ResourceTag/{NODE_STACK_TAG}": stack}},
            ),
        ]
    )


def ebs_csi_key_policy(key_arn: str) -> Document:
    """The environment key, for the volumes the driver creates: data keys, and grants for EC2 only."""
    return policy(
        [
            _statement("UseEnvironmentKey", EBS_KEY_USE, [key_arn]),
            _statement(
                "GrantToEc2",
                ["kms:CreateGrant"],
                [key_arn],
                Condition={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ),
        ]
    )
