"""Google service accounts for trainer, server and CI deployer, bound to Kubernetes service accounts with
GKE Workload Identity and granted roles on single buckets and repositories (see `roles`)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp import roles
from infra.gcp.registry import Registry
from infra.gcp.storage import Buckets
from infra.shape import IDENTITIES, SERVICE_ACCOUNTS


class Identities(pulumi.ComponentResource):
    emails: dict[str, str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        project: str,
        buckets: Buckets,
        registry: Registry,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:Identities", name, None, opts)
        self.emails = {}
        for identity in IDENTITIES:
            account_id = roles.account_id(cfg, identity)
            account = gcp.serviceaccount.Account(
                f"{name}-{identity}",
                account_id=account_id,
                display_name=f"{cfg.name} {identity}",
                opts=pulumi.ResourceOptions(parent=self),
            )
            email = roles.service_account_email(account_id, project)
            self.emails[identity] = email
            member = f"serviceAccount:{email}"
            child = pulumi.ResourceOptions(parent=self, depends_on=[account])
            gcp.serviceaccount.IAMMember(
                f"{name}-{identity}-workload-identity",
                service_account_id=account.name,
                role=roles.WORKLOAD_IDENTITY_ROLE,
                member=roles.workload_identity_member(project, SERVICE_ACCOUNTS[identity]),
                opts=child,
            )
            for binding in roles.bucket_bindings(identity):
                gcp.storage.BucketIAMMember(
                    f"{name}-{identity}-{binding.target}",
                    bucket=buckets.names[binding.target],
                    role=binding.role,
                    member=member,
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[account, buckets.buckets[binding.target]]
                    ),
                )
            for prefix in roles.prefix_bindings(identity):
                bucket = buckets.names[prefix.target]
                gcp.storage.BucketIAMMember(
                    f"{name}-{identity}-{prefix.target}-{prefix.prefix.strip('/')}",
                    bucket=bucket,
                    role=prefix.role,
                    member=member,
                    condition=gcp.storage.BucketIAMMemberConditionArgs(
                        title=f"{prefix.prefix.strip('/')} only",
                        description=f"{identity}: objects under {prefix.prefix} of the {prefix.target} bucket",
                        expression=prefix.expression(bucket),
                    ),
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[account, buckets.buckets[prefix.target]]
                    ),
                )
            for binding in roles.repository_bindings(identity):
                gcp.artifactregistry.RepositoryIamMember(
                    f"{name}-{identity}-{binding.target}",
                    project=project,
                    location=cfg.region,
                    repository=registry.repository_ids[binding.target],
                    role=binding.role,
                    member=member,
                    opts=pulumi.ResourceOptions(
                        parent=self, depends_on=[account, registry.repositories[binding.target]]
                    ),
                )
        self.register_outputs({"emails": self.emails})
