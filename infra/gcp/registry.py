"""Artifact Registry Docker repositories (CMEK, immutable tags, vulnerability scanning)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp.keys import EnvironmentKey
from infra.naming import tags
from infra.shape import IMAGES


class Registry(pulumi.ComponentResource):
    repositories: dict[str, gcp.artifactregistry.Repository]
    repository_ids: dict[str, str]
    urls: dict[str, str]

    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        project: str,
        key: EnvironmentKey,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:gcp:Registry", name, None, opts)
        self.repositories, self.repository_ids, self.urls = {}, {}, {}
        self.host = f"{cfg.region}-docker.pkg.dev"
        for image in IMAGES:
            repo_id = f"{cfg.name}-{image}"
            self.repositories[image] = gcp.artifactregistry.Repository(
                f"{name}-{image}",
                repository_id=repo_id,
                location=cfg.region,
                format="DOCKER",
                kms_key_name=key.key_name,
                docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
                vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                    enablement_config="INHERITED"
                ),
                labels=tags(cfg, image=image),
                opts=pulumi.ResourceOptions(parent=self, depends_on=key.grants),
            )
            self.repository_ids[image] = repo_id
            self.urls[image] = f"{self.host}/{project}/{repo_id}/{image}"
        self.register_outputs({"urls": self.urls})
