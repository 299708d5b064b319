"""The Google APIs the platform uses, enabled first, and every resource made to wait for the APIs it calls.

On a fresh project a resource created while its API is still being enabled fails with
`SERVICE_DISABLED` (or 403 "API has not been used in project"): enabling is asynchronous on Google's side
and Pulumi does not know that a key ring needs Cloud KMS. A stack transformation adds the dependency
to every GCP resource by its type, so new resources get it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

# Type-token prefix -> the APIs a resource of that kind calls (all of them: GKE also creates Compute
# Engine instances and disks; IAM bindings on a project go through Resource Manager).
APIS_OF_TYPE: Mapping[str, tuple[str, ...]] = {
    "gcp:artifactregistry/": ("artifactregistry.googleapis.com",),
    "gcp:billing/": ("billingbudgets.googleapis.com",),
    "gcp:compute/": ("compute.googleapis.com",),
    "gcp:container/": ("container.googleapis.com", "compute.googleapis.com"),
    "gcp:kms/": ("cloudkms.googleapis.com",),
    "gcp:logging/": ("logging.googleapis.com",),
    "gcp:monitoring/": ("monitoring.googleapis.com",),
    "gcp:projects/iAMAuditConfig:": ("cloudresourcemanager.googleapis.com",),
    "gcp:projects/iAMMember:": ("cloudresourcemanager.googleapis.com",),
    "gcp:pubsub/": ("pubsub.googleapis.com",),
    "gcp:serviceaccount/": ("iam.googleapis.com",),
    "gcp:storage/": ("storage.googleapis.com",),
}
SERVICES: tuple[str, ...] = tuple(sorted({api for apis in APIS_OF_TYPE.values() for api in apis}))


def apis_for(type_: str) -> tuple[str, ...]:
    return next((apis for prefix, apis in APIS_OF_TYPE.items() if type_.startswith(prefix)), ())


class ProjectServices(pulumi.ComponentResource):
    """Enables SERVICES (idempotent: an already enabled API is left as is; never disabled on destroy)."""

    services: dict[str, gcp.projects.Service]

    def __init__(self, name: str, *, project: str, opts: pulumi.ResourceOptions) -> None:
        super().__init__("eu-ml-platform:gcp:ProjectServices", name, None, opts)
        self.services = {
            api: gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=project,
                service=api,
                # Other stacks or people may use the API too: never turn it off with this stack.
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in SERVICES
        }
        self.register_outputs({})

    def of(self, apis: Sequence[str]) -> list[pulumi.Resource]:
        return [self.services[a] for a in apis]

    def wait_for_apis(self) -> None:
        """From now on, every GCP resource depends on the services of its type."""
        services = self

        def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
            needed = services.of(apis_for(args.type_))
            if not needed:
                return None
            extra = pulumi.ResourceOptions(depends_on=needed)
            return pulumi.ResourceTransformationResult(
                args.props, pulumi.ResourceOptions.merge(args.opts, extra)
            )

        pulumi.runtime.register_stack_transformation(transform)
