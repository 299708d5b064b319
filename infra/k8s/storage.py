"""The cluster's default StorageClass, where the cloud's managed cluster ships none (CloudPlatform)."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_kubernetes as k8s

from infra.shape import DEFAULT_STORAGE_CLASS_ANNOTATION, StorageClassSpec


def default_storage_class(
    name: str, spec: StorageClassSpec | None, labels: Mapping[str, str], opts: pulumi.ResourceOptions
) -> list[pulumi.Resource]:
    """Declare `spec` as the default class; the PVC consumers (charts, StatefulSets) depend on the result.
    None (GKE, AKS: a default class ships with the cluster) declares nothing."""
    if spec is None:
        return []
    return [
        k8s.storage.v1.StorageClass(
            f"{name}-{spec.name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=spec.name, labels=dict(labels), annotations={DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}
            ),
            provisioner=spec.provisioner,
            parameters=dict(spec.parameters),
            volume_binding_mode=spec.volume_binding_mode,
            allow_volume_expansion=spec.allow_volume_expansion,
            reclaim_policy=spec.reclaim_policy,
            opts=opts,
        )
    ]
