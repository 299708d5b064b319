"""IAM roles for the trainer, the server and the CI deployer, bound to Kubernetes service accounts through
EKS Pod Identity. Documents come from `documents`; the key statement is a separate inline policy because
the key ARN is only known once the key exists (everything else is known at preview)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.aws import cluster_documents, documents
from infra.config import PlatformConfig
from infra.naming import role_name, tags
from infra.shape import (
    BUDGET_IDENTITY,
    BUDGET_SERVICE_ACCOUNT,
    IDENTITIES,
    IMAGE_PULL,
    IMAGE_PUSH,
    SERVICE_ACCOUNTS,
    BudgetJob,
    ServiceAccountRef,
    budget_name,
)

# DescribeBudget's permission (Service Authorization Reference, AWS Budgets: `ViewBudget`, resource type
# `budget`, ARN `arn:${Partition}:budgets::${Account}:budget/${BudgetName}`; Budgets has no region).
VIEW_BUDGET = "budgets:ViewBudget"


# The EBS CSI controller's service account, created by the aws-ebs-csi-driver add-on
# (docs.aws.amazon.com/eks/latest/userguide/csi-iam-role.html).
EBS_CSI_SA = ServiceAccountRef("kube-system", "ebs-csi-controller-sa")


def budget_arn(account_id: str, name: str) -> str:
    return f"arn:aws:budgets::{account_id}:budget/{name}"


def budget_read_policy(account_id: str, name: str) -> dict[str, object]:
    """The budget job's whole policy: read this one budget (limit and forecast), nothing else."""
    return documents.policy(
        [{"Sid": "ReadStackBudget", "Effect": "Allow", "Action": [VIEW_BUDGET],
          "Resource": [budget_arn(account_id, name)]}]
    )  # fmt: skip


class PodRole(pulumi.ComponentResource):
    """An IAM role that exactly one Kubernetes service account may use."""

    role: aws.iam.Role

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        role_name: str,
        account_id: str,
        cluster_name: pulumi.Input[str],
        service_account: ServiceAccountRef,
        policy: Mapping[str, object] | None,
        key_policy: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:PodRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.role = aws.iam.Role(
            name,
            name=role_name,
            assume_role_policy=json.dumps(documents.pod_identity_trust_policy(account_id)),
            max_session_duration=3600,
            tags=tags(cfg, identity=role_name),
            opts=child,
        )
        if policy and policy.get("Statement"):
            aws.iam.RolePolicy(f"{name}-access", role=self.role.id, policy=json.dumps(policy), opts=child)
        if key_policy is not None:
            aws.iam.RolePolicy(f"{name}-key", role=self.role.id, policy=key_policy, opts=child)
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-binding",
            cluster_name=cluster_name,
            namespace=service_account.namespace,
            service_account=service_account.name,
            role_arn=self.role.arn,
            tags=tags(cfg),
            opts=child,
        )
        self.register_outputs({"role_arn": self.role.arn})


class Identities(pulumi.ComponentResource):
    roles: dict[str, PodRole]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        account_id: str,
        cluster_name: pulumi.Input[str],
        bucket_names: Mapping[str, str],
        repository_arns: Mapping[str, str],
        key_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:Identities", name, None, opts)
        self.roles = {}
        for identity in IDENTITIES:
            pushes = [repository_arns[image] for image in IMAGE_PUSH[identity]]
            pulls = [repository_arns[image] for image in IMAGE_PULL[identity]]
            self.roles[identity] = PodRole(
                f"{name}-{identity}",
                cfg,
                role_name=role_name(cfg, identity),
                account_id=account_id,
                cluster_name=cluster_name,
                service_account=SERVICE_ACCOUNTS[identity],
                policy=documents.identity_policy(identity, bucket_names, pushes, pulls),
                key_policy=_key_policy(identity, key_arn),
                opts=pulumi.ResourceOptions(parent=self),
            )
        # The budget cost job (infra/k8s/budget.py): its own role, apart from `roles` (the stack's
        # `identity_principals` output lists the workload identities).
        self.budget_role = PodRole(
            f"{name}-{BUDGET_IDENTITY}",
            cfg,
            role_name=role_name(cfg, BUDGET_IDENTITY),
            account_id=account_id,
            cluster_name=cluster_name,
            service_account=BUDGET_SERVICE_ACCOUNT,
            policy=budget_read_policy(account_id, budget_name(cfg.name)),
            key_policy=None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The EBS CSI driver's controller (infra/aws/block_storage.py): create, attach and resize the volumes
        # it tags, encrypted with the environment key. Not a workload identity either.
        self.ebs_csi_role = PodRole(
            f"{name}-ebs-csi",
            cfg,
            role_name=role_name(cfg, "ebs-csi"),
            account_id=account_id,
            cluster_name=cluster_name,
            service_account=EBS_CSI_SA,
            policy=cluster_documents.ebs_csi_driver_policy(cfg.stack, cfg.region, account_id),
            key_policy=pulumi.Output.from_input(key_arn).apply(
                lambda arn: json.dumps(cluster_documents.ebs_csi_key_policy(arn))
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The account is passed, so the job makes no STS round trip to learn it.
        self.budget_job = BudgetJob(cli_args=("--cloud", "aws", "--account-id", account_id))
        self.register_outputs({})


def _key_policy(identity: str, key_arn: pulumi.Input[str]) -> pulumi.Output[str] | None:
    if documents.key_statement(identity, "probe") is None:
        return None
    return pulumi.Output.from_input(key_arn).apply(
        lambda arn: json.dumps(documents.policy([documents.key_statement(identity, arn)]))
    )
