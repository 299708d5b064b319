"""The object-storage URIs a pod on each cloud can use, judged before `launch` renders the Job.

The trainer reads and writes through fsspec: s3fs (``s3://``, ``s3a://``), gcsfs (``gs://``, ``gcs://``) and
adlfs (``az://``, ``abfs://``, ``abfss://``). On the cluster its pod has its own cloud's identity only (EKS Pod
Identity, GKE / Azure Workload Identity, bound to the `trainer` service account): a GKE pod has no credentials for
``s3://``, so the Job it was given failed with exit 2 once a GPU node had scaled up and pulled the image, and the
default checkpoint URI was one (the aws dev stack's bucket) for every cloud.

Azure stacks export their buckets as ``https://<account>.blob.core.windows.net/<container>`` (infra/README.md,
stack outputs), which fsspec would read as a plain web page: `from_stack_output` rewrites it into the adlfs form
``az://<container>@<account>.blob.core.windows.net/<prefix>``, which names the storage account; a bare
``az://<container>/...`` leaves adlfs without one (AZURE_STORAGE_ACCOUNT_NAME is no variable the Job can set).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from training.errors import ConfigError

SCHEMES: dict[str, tuple[str, ...]] = {
    "aws": ("s3", "s3a"),
    "gcp": ("gs", "gcs"),
    "azure": ("az", "abfs", "abfss"),
}
# infra/naming.py (global_name, compact_name) and infra/<cloud>/storage.py: the checkpoints bucket of a stack,
# exported as its output `checkpoint_bucket_uri`.
CHECKPOINT_BUCKETS = {
    "aws": "s3://<org>-mlp-<stack>-checkpoints",
    "gcp": "gs://<org>-mlp-<stack>-checkpoints",
    "azure": "https://<org>mlp<stack>data.blob.core.windows.net/checkpoints",
}
DEFAULT_CHECKPOINT_URI = "s3://acme-mlp-dev-checkpoints/sentiment-train"
"""The aws `dev` stack's checkpoints bucket (org acme): `launch`'s default, on aws only."""

_AZURE_BLOB_URL = re.compile(
    r"^https://(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.windows\.net/(?P<container>[^/?#]+)(?P<rest>/[^?#]*)?$"
)


def scheme(uri: str) -> str:
    return uri.partition("://")[0].lower() if "://" in uri else ""


def cloud_of(uri: str) -> str | None:
    """The cloud whose object store `uri` names, None for anything else (a path, file://, https://...)."""
    return next((cloud for cloud, schemes in SCHEMES.items() if scheme(uri) in schemes), None)


def from_stack_output(uri: str) -> str:
    """An Azure stack's `https://<account>.blob.core.windows.net/<container>[/prefix]` as adlfs reads it
    (`az://<container>@<account>.blob.core.windows.net[/prefix]`); any other URI unchanged."""
    found = _AZURE_BLOB_URL.match(uri)
    if found is None:
        return uri
    return f"az://{found['container']}@{found['account']}.blob.core.windows.net{found['rest'] or ''}"


def _flag(field: str) -> str:
    return {"checkpoint_uri": "--checkpoint-uri", "data_uri": "--data"}[field]


def _accepted(cloud: str) -> str:
    schemes = " ".join(f"{s}://" for s in SCHEMES[cloud])
    return f"{schemes}, or the stack output's https:// blob URL" if cloud == "azure" else schemes


def _where_to_write(cloud: str, name: str) -> str:
    return (
        f"pass --checkpoint-uri {CHECKPOINT_BUCKETS[cloud]}/{name}: your stack's output checkpoint_bucket_uri "
        "(`pulumi stack output checkpoint_bucket_uri --stack <stack>`) plus a prefix for this run"
    )


def _check_cloud(field: str, uri: str, cloud: str, name: str, env: Mapping[str, str]) -> None:
    owner = cloud_of(uri)
    if owner != cloud:
        what = f"{owner} storage" if owner else "no object store of a cloud"
        if field == "checkpoint_uri" and uri == DEFAULT_CHECKPOINT_URI:
            what = f"{what} (the default: the aws dev stack's bucket)"
        fix = (
            _where_to_write(cloud, name)
            if field == "checkpoint_uri"
            else f"copy the data into this stack's raw bucket and pass {_flag(field)} with its URI"
        )
        raise ConfigError(
            field,
            f"{uri!r} is {what}; a pod on {cloud} has only {cloud}'s workload identity and cannot use it "
            f"({_accepted(cloud)} only): {fix}",
        )
    if cloud == "azure" and "@" not in uri.partition("://")[2].partition("/")[0]:
        if "AZURE_STORAGE_CONNECTION_STRING" in env:
            return  # the connection string names the account
        raise ConfigError(
            field,
            f"{uri!r} names no storage account, and the pod's identity needs one: write "
            f"{scheme(uri)}://<container>@<account>.blob.core.windows.net/<prefix>, or pass the stack's output "
            f"as it is ({CHECKPOINT_BUCKETS['azure']}/<prefix>; `launch` rewrites it)",
        )


def checkpoint_uri(uri: str, *, cloud: str | None, name: str, env: Mapping[str, str]) -> str:
    """The checkpoint URI the Job gets: an object store the pod on `cloud` can write (ConfigError otherwise)."""
    uri = from_stack_output(uri)
    if "://" not in uri or uri.startswith("file://"):
        raise ConfigError(
            "checkpoint_uri",
            f"{uri!r} is local: a spot node's disk is lost with the node; use the checkpoints bucket "
            f"(s3://, gs:// or az://){'; ' + _where_to_write(cloud, name) if cloud else ''}",
        )
    if cloud is not None:
        _check_cloud("checkpoint_uri", uri, cloud, name, env)
    return uri


def data_uri(uri: str | None, *, cloud: str | None, name: str, env: Mapping[str, str]) -> str | None:
    """The data URI the Job gets: a path in the image and an https:// URL pass; a bucket must be `cloud`'s."""
    if uri is None:
        return None
    uri = from_stack_output(uri)
    if cloud is not None and cloud_of(uri) is not None:
        _check_cloud("data_uri", uri, cloud, name, env)
    return uri
