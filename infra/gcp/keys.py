"""Cloud KMS key ring and key in the buckets' region, rotated every `keyRotationDays` (<= 90)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp import roles
from infra.naming import tags

SECONDS_PER_DAY = 86_400


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
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:EnvironmentKey", name, None, opts)
        ring = gcp.kms.KeyRing(
            f"{name}-ring",
            name=cfg.name,
            location=cfg.region,
            # Key rings cannot be deleted in GCP; protect it everywhere so `destroy` does not pretend.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
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
            opts=pulumi.ResourceOptions(parent=self, protect=cfg.is_prod),
        )
        self.key_name = f"projects/{project}/locations/{cfg.region}/keyRings/{cfg.name}/cryptoKeys/data"
        self.grants = [
            gcp.kms.CryptoKeyIAMMember(
                f"{name}-{service}-agent",
                crypto_key_id=self.key.id,
                role=roles.KEY_ROLE,
                member=f"serviceAccount:{email}",
                opts=pulumi.ResourceOptions(parent=self),
            )
            for service, email in roles.service_agents(project_number).items()
        ]
        self.register_outputs({"key": self.key.id})
