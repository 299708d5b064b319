"""Every object-storage URL a workload of a plan opens through fsspec has its filesystem in that workload's image.

The inference-record writer runs inside Triton's sentiment model and opens the stack's logs bucket as s3://,
gs:// or abfs://; fsspec resolves the scheme to a separate package (s3fs, gcsfs, adlfs) at the first write.
An image without it drops every record in production while every local run (a folder) works. The scheme ->
package mapping is fsspec's own registry; the image's packages are its committed requirements file.
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest
from fsspec.registry import known_implementations
from infra_fixtures import STACKS, Plan
from packaging.utils import canonicalize_name

from containers import wheelhouse

WORKLOADS = ("Deployment", "CronJob", "Job", "StatefulSet", "DaemonSet")


def _containers(plan: Plan) -> Iterator[tuple[str, dict[str, Any]]]:
    for r in plan.iter_custom():
        kind = r["type"].rsplit(":", 1)[-1]
        if not r["type"].startswith("kubernetes:") or kind not in WORKLOADS:
            continue
        spec = r["inputs"]["spec"]
        pod = (
            spec["jobTemplate"]["spec"]["template"]["spec"] if kind == "CronJob" else spec["template"]["spec"]
        )
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            yield r["name"], c


def filesystem_distributions(url: str) -> set[str]:
    """The distributions that provide fsspec's implementation of the URL's scheme."""
    protocol = fsspec.utils.get_protocol(url)
    module = known_implementations[protocol]["class"].split(".")[0]
    return {canonicalize_name(d) for d in md.packages_distributions()[module]}


@pytest.mark.parametrize("stack", STACKS)
def test_object_storage_urls_have_their_filesystem_in_the_image(plans: dict[str, Plan], stack: str) -> None:
    plan = plans[stack]
    images = {plan.doc["outputs"][f"{i}_image"]: i for i in ("serving", "training")}
    checked = 0
    for name, container in _containers(plan):
        image = images.get(container.get("image"))
        if image is None:
            continue
        pins = wheelhouse.pins(image).keys()
        for env in container.get("env", []):
            value = env.get("value")
            if not isinstance(value, str) or not value.startswith(("s3://", "gs://", "abfs://", "az://")):
                continue
            missing = filesystem_distributions(value) - pins
            assert not missing, (
                f"{stack}: {name}/{container['name']} opens {env['name']}={value} but the {image} image lacks "
                f"{sorted(missing)}: add it to containers/requirements.py and run `python -m containers.requirements`"
            )
            checked += 1
    assert checked, f"{stack}: no workload env names an object-storage URL (the records sink moved?)"


def test_the_serving_image_is_checked_for_records_on_every_cloud(plans: dict[str, Plan]) -> None:
    schemes = set()
    for stack in STACKS:
        serving = plans[stack].doc["outputs"]["serving_image"]
        for _, c in _containers(plans[stack]):
            if c.get("image") == serving:
                schemes |= {
                    e["value"].split("://")[0]
                    for e in c.get("env", [])
                    if e["name"] == "MONITORING_RECORDS_URL"
                }
    assert schemes == {"s3", "gs", "abfs"}
