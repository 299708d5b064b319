"""Bootstrap program: `pulumi up` once per cloud, by an administrator, before the CI can run.

    cd infra/bootstrap
    pulumi stack init aws-bootstrap && pulumi config set cloud aws && pulumi config set repository acme/eu-ml-platform ...
    pulumi up

Config (read once here): cloud (aws | gcp | azure), repository (<owner>/<repo>), name
(default eu-ml-platform), environments (default [dev, staging, prod]); aws: accountId, region
(default eu-south-2); gcp: project; azure: subscriptionId, resourceGroup, location.
"""

from __future__ import annotations

import pulumi

from infra.bootstrap import github

config = pulumi.Config()
cloud = config.require("cloud")
name: str = config.get("name") or "eu-ml-platform"
repository: str = config.require("repository")
environments: tuple[str, ...] = tuple(
    str(e) for e in (config.get_object("environments") or ("dev", "staging", "prod"))
)
if cloud == "aws":
    from infra.bootstrap.aws import AwsBootstrap, AwsBootstrapArgs

    stack = AwsBootstrap(
        "ci",
        AwsBootstrapArgs(
            name=name,
            repository=repository,
            environments=environments,
            account_id=config.require("accountId"),
            region=config.get("region") or "eu-south-2",
        ),
    )
    pulumi.export("role_arns", stack.role_arns)
    pulumi.export("state_backend", stack.state_bucket.apply(lambda b: f"s3://{b}"))
    pulumi.export("secrets_provider", f"awskms://{stack.secrets_key_alias}")
elif cloud == "gcp":
    from infra.bootstrap.gcp import GcpBootstrap, GcpBootstrapArgs

    gstack = GcpBootstrap(
        "ci",
        GcpBootstrapArgs(
            name=name, repository=repository, environments=environments, project=config.require("project")
        ),
    )
    pulumi.export("service_accounts", gstack.service_accounts)
    pulumi.export("workload_identity_provider", gstack.provider_name)
elif cloud == "azure":
    from infra.bootstrap.azure import AzureBootstrap, AzureBootstrapArgs

    astack = AzureBootstrap(
        "ci",
        AzureBootstrapArgs(
            name=name,
            repository=repository,
            environments=environments,
            subscription_id=config.require("subscriptionId"),
            resource_group=config.require("resourceGroup"),
            location=config.get("location") or "westeurope",
        ),
    )
    pulumi.export("client_ids", astack.client_ids)
else:
    raise github.BootstrapError(f"cloud={cloud!r}: set `pulumi config set cloud aws|gcp|azure`")
