"""ECR repositories for the training and serving images: immutable tags, scan on push, KMS."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.aws import documents
from infra.config import PlatformConfig
from infra.naming import tags
from infra.shape import IMAGES

# Keep the last N untagged layers' images; tagged releases stay (promotion and rollback need them).
UNTAGGED_IMAGES_KEPT = 10


class Registry(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cfg: PlatformConfig,
        *,
        key_arn: pulumi.Input[str],
        account_id: str,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("eu-ml-platform:aws:Registry", name, None, opts)
        self.repository_names = {image: f"{cfg.name}/{image}" for image in IMAGES}
        self.repository_arns = {
            image: documents.ecr_repository_arn(cfg.region, account_id, repo)
            for image, repo in self.repository_names.items()
        }
        # Known at preview: `<account>.dkr.ecr.<region>.amazonaws.com/<name>`, what ECR returns after create.
        self.host = f"{account_id}.dkr.ecr.{cfg.region}.amazonaws.com"
        self.urls = {image: f"{self.host}/{repo}" for image, repo in self.repository_names.items()}
        self.repositories = {}
        for image, repo in self.repository_names.items():
            repository = aws.ecr.Repository(
                f"{name}-{image}",
                name=repo,
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True
                ),
                encryption_configurations=[
                    aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=key_arn)
                ],
                force_delete=not cfg.is_prod,
                tags=tags(cfg, image=image),
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{image}-lifecycle",
                repository=repository.name,
                policy=pulumi.Output.json_dumps(
                    {
                        "rules": [
                            {
                                "rulePriority": 1,
                                "description": "expire untagged images",
                                "selection": {
                                    "tagStatus": "untagged",
                                    "countType": "imageCountMoreThan",
                                    "countNumber": UNTAGGED_IMAGES_KEPT,
                                },
                                "action": {"type": "expire"},
                            }
                        ]
                    }
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.repositories[image] = repository
        self.register_outputs({"urls": self.urls})
