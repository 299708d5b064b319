"""Block storage for PersistentVolumes: the EBS CSI driver add-on and the default StorageClass the shared
Kubernetes layer declares. The driver's Pod Identity role is `Identities.ebs_csi_role` (infra/aws/identity.py).

A new EKS cluster has no EBS CSI driver ("not automatically installed when you first create a cluster";
the in-tree `kubernetes.io/aws-ebs` provisioner is migrated to it) and, from Kubernetes 1.30, no default
StorageClass (docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html, .../ebs-csi-migration-faq.html,
.../kubernetes-versions-standard.html, "Kubernetes 1.30"). Without both, the Prometheus server's PVC and
Alertmanager's volumeClaimTemplates stay Pending and `up` times out.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.aws.identity import PodRole
from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import StorageClassSpec

# docs.aws.amazon.com/eks/latest/userguide/add-ons-aws-ebs-csi-driver.html: "The Amazon EKS add-on name is
# aws-ebs-csi-driver". No configuration values: the StorageClass is declared in Kubernetes, not by the add-on.
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
DEFAULT_STORAGE_CLASS = "gp3-encrypted"


def default_storage_class(key_arn: pulumi.Input[str]) -> StorageClassSpec:
    """gp3 volumes encrypted with the environment key (the driver's parameters `type`, `encrypted`,
    `kmsKeyId`: github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/parameters.md)."""
    return StorageClassSpec(
        name=DEFAULT_STORAGE_CLASS,
        provisioner=EBS_CSI_PROVISIONER,
        parameters={"type": "gp3", "encrypted": "true", "kmsKeyId": key_arn},
    )


class BlockStorage(pulumi.ComponentResource):
    """The EBS CSI driver add-on, running as its Pod Identity role, and the StorageClass that uses it."""

    addon: aws.eks.Addon
    storage_class: StorageClassSpec

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        cluster_name: pulumi.Input[str],
        role: PodRole,
        key_arn: pulumi.Input[str],
        after: list[pulumi.Resource],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:BlockStorage", name, None, opts)
        # The role's association exists before the add-on's pods start, so they get its credentials. The
        # controller is a Deployment: the add-on becomes ACTIVE only once nodes exist (`after`).
        self.addon = aws.eks.Addon(
            f"{name}-ebs-csi-driver",
            cluster_name=cluster_name,
            addon_name=EBS_CSI_ADDON,
            tags=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role.association, *after]),
        )
        self.storage_class = default_storage_class(key_arn)
        self.register_outputs({})
