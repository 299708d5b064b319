"""Every pod that runs one of our images runs as the user that image was built for (its Dockerfile's USER).

The serving Deployment ran the serving image (USER 10002) as uid 1000 and the monitoring jobs ran the training
image (USER 10001) as uid 1000: files the build gives the image's user (a home, a cache, a writable folder) are
not theirs, and a security review reads the override as a mistake. Argo's steps and the training Job take the
image's own USER (no runAsUser); the pipeline's work volume gets its group (pipeline/argo.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dockerfile_parse import DockerfileParser
from infra_fixtures import STACKS, Plan, k8s_objects

from pipeline import argo as pipeline_argo
from tests.k8s_api.objects import pod_templates

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ("training", "serving")


def image_user(image: str) -> tuple[int, int]:
    users = [i["value"] for i in DockerfileParser(path=str(ROOT / "containers" / image / "Dockerfile")).structure
             if i["instruction"] == "USER"]  # fmt: skip
    uid, _, gid = users[-1].partition(":")
    return int(uid), int(gid or uid)


def ours(container_image: str) -> str | None:
    repository = container_image.split("@")[0].rsplit(":", 1)[0]
    name = repository.rsplit("/", 1)[-1]
    return name if name in IMAGES else None


def users_of_our_pods(plan: Plan) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, image, the effective run-as fields) of every container of ours in the plan's pods."""
    found = []
    for obj in k8s_objects(plan):
        for path, _meta, spec, _ in pod_templates(obj, None):
            pod_sc = spec.get("securityContext") or {}
            for c in spec.get("containers") or []:
                image = ours(str(c.get("image", "")))
                if image is None:
                    continue
                sc = {**pod_sc, **(c.get("securityContext") or {})}
                fields = {k: sc[k] for k in ("runAsUser", "runAsGroup", "fsGroup") if k in sc}
                found.append((f"{obj['kind']}/{obj['metadata']['name']} {path} {c['name']}", image, fields))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_pods_run_our_images_as_the_images_user(plans: dict[str, Plan], stack: str) -> None:
    found = users_of_our_pods(plans[stack])
    assert {image for _, image, _ in found} == set(IMAGES)  # not vacuous: both images run in every stack
    wrong = []
    for where, image, fields in found:
        uid, gid = image_user(image)
        expected = {"runAsUser": uid, "runAsGroup": gid, "fsGroup": gid}
        wrong += [f"{where}: {k}={v}, the {image} image's is {expected[k]}" for k, v in fields.items()
                  if v != expected[k]]  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_the_pipelines_volume_group_is_the_training_images() -> None:
    assert image_user("training")[1] == pipeline_argo.IMAGE_UID
