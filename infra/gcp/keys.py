"""Cloud KMS key ring and key in the buckets' region, rotated every `keyRotationDays` (<= 90), and the
Google service agents that encrypt with it on the platform's behalf, granted on this key only."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp import roles
from infra.gcp.services import ProjectServices
from infra.naming import tags

SECONDS_PER_DAY = 86_400
# The services whose agents encrypt with the key, and their APIs (an agent exists once its API is on).
AGENT_APIS = {
    "artifactregistry": "artifactregistry.googleapis.com",
    "container": "container.googleapis.com",
    "storage": "storage.googleapis.com",
    "logging": "logging.googleapis.com",
    "compute": "compute.googleapis.com",
}


def service_agent_members(
    name: str, project: str, project_number: str, services: ProjectServices, opts: pulumi.ResourceOptions
) -> dict[str, pulumi.Output[str]]:
    """`serviceAccount:<agent>` of each service that uses the key, from the provider, not spelled out.

    A service agent exists only once its API is enabled (and some only once asked for), so each lookup
    waits for its API. Artifact Registry and GKE answer `generateServiceIdentity` with the agent
    (ServiceIdentity); Cloud Storage's and Cloud Logging's agents come from their own lookups, which also
    create them. Compute Engine's answers without an email (a known gap of the API), so its agent is the
    documented `service-<number>@compute-system` address, used only after the API is enabled.
    """

    def after(api: str) -> pulumi.InvokeOutputOptions:
        return pulumi.InvokeOutputOptions(
            parent=opts.parent, provider=opts.provider, depends_on=services.of([api])
        )

    members: dict[str, pulumi.Output[str]] = {}
    for service in ("artifactregistry", "container"):
        api = AGENT_APIS[service]
        identity = gcp.projects.ServiceIdentity(
            f"{name}-{service}-identity",
            project=project,
            service=api,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=services.of([api]))),
        )
        members[service] = identity.member
    storage = gcp.storage.get_project_service_account_output(
        project=project, opts=after(AGENT_APIS["storage"])
    )
    members["storage"] = storage.email_address.apply(lambda e: f"serviceAccount:{e}")
    logging = gcp.logging.get_project_cmek_settings_output(project=project, opts=after(AGENT_APIS["logging"]))
    members["logging"] = logging.service_account_id.apply(lambda e: f"serviceAccount:{e}")
    members["compute"] = pulumi.Output.from_input(f"serviceAccount:{roles.compute_agent(project_number)}")
    return members


class EnvironmentKey(pulumi.ComponentResource):
    key: gcp.kms.CryptoKey
    # `projects/<p>/locations/<region>/keyRings/<ring>/cryptoKeys/<key>`: known before creation.
    key_name: str
    # Grants to the service agents; a CMEK resource must wait for them.
    grants: list[pulumi.Resource]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        project: str,
        project_number: str,
        services: ProjectServices,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:EnvironmentKey", name, None, opts)
        # GCP never deletes key rings or keys (destroy only forgets them, and the key's versions are
        # destroyed after `destroy_scheduled_duration`); infra/lifecycle.py protects them in prod only.
        ring = gcp.kms.KeyRing(
            f"{name}-ring",
            name=cfg.name,
            location=cfg.region,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.key = gcp.kms.CryptoKey(
            f"{name}-key",
            name="data",
            key_ring=ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=f"{cfg.key_rotation_days * SECONDS_PER_DAY}s",
            destroy_scheduled_duration=f"{30 * SECONDS_PER_DAY}s",
            deletion_policy="PREVENT" if cfg.is_prod else "DELETE",
            labels=tags(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.key_name = f"projects/{project}/locations/{cfg.region}/keyRings/{cfg.name}/cryptoKeys/data"
        child = pulumi.ResourceOptions(parent=self, provider=opts.provider)
        self.grants = [
            gcp.kms.CryptoKeyIAMMember(
                f"{name}-{service}-agent",
                crypto_key_id=self.key.id,
                role=roles.KEY_ROLE,
                member=member,
                opts=pulumi.ResourceOptions(parent=self, depends_on=services.of([AGENT_APIS[service]])),
            )
            for service, member in service_agent_members(
                name, project, project_number, services, child
            ).items()
        ]
        self.register_outputs({"key": self.key.id})
