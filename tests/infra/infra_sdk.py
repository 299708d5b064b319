"""Map a plan's type token to the installed SDK class, to ask the SDK which property carries tags."""

from __future__ import annotations

import functools
import importlib
import inspect
import re

PACKAGES = {
    "aws": "pulumi_aws",
    "gcp": "pulumi_gcp",
    "azure-native": "pulumi_azure_native",
    "kubernetes": "pulumi_kubernetes",
}
# GCP resources whose tag-like property is not `labels` (NotificationChannel's `labels` is its config).
GCP_LABEL_PROPERTY = {
    "gcp:container/cluster:Cluster": "resource_labels",
    "gcp:monitoring/notificationChannel:NotificationChannel": "user_labels",
}
WIRE = {"tags": "tags", "labels": "labels", "resource_labels": "resourceLabels", "user_labels": "userLabels"}


def sdk_class(token: str) -> type:
    package, module, name = token.split(":")
    path = PACKAGES[package]
    if package in ("aws", "gcp"):
        module = module.split("/")[0]
    if module != "index":
        path += "." + module
    return getattr(importlib.import_module(path), name)


@functools.cache
def tag_property(token: str) -> str | None:
    """The wire name of the resource's tag/label map, or None if the resource type takes none."""
    package = token.split(":")[0]
    if package not in ("aws", "gcp", "azure-native"):
        return None
    params = inspect.signature(sdk_class(token)._internal_init).parameters  # type: ignore[attr-defined]
    wanted = GCP_LABEL_PROPERTY.get(token, "labels") if package == "gcp" else "tags"
    return WIRE[wanted] if wanted in params else None


_DEPRECATED_GETTER = re.compile(
    r'@pulumi\.getter(?:\(name="(\w+)"\))?\s+@_utilities\.deprecated\((?:"""|").*?(?:"""|")\)\s+def (\w+)',
    re.S,
)


@functools.cache
def deprecated_inputs(token: str) -> frozenset[str]:
    """Wire names of the resource's input properties that the installed SDK marks deprecated."""
    cls = sdk_class(token)
    args_cls = getattr(inspect.getmodule(cls), f"{cls.__name__}Args")
    return frozenset(wire or snake for wire, snake in _DEPRECATED_GETTER.findall(inspect.getsource(args_cls)))
