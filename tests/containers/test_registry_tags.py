"""Tags never move in the registry either, against a real OCI registry (distribution 2.8 on a free
127.0.0.1 port) and tiny images made with buildah from scratch (one small layer each: seconds).

A second push of a tag the registry holds must not re-point it: the same build key reuses what is
there (ECR and Artifact Registry, immutable in infra/, refuse any second push of a tag, even of the
same bytes), another build key is refused and the registry keeps serving the first image.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers import buildah, publish, registry, services
from containers.errors import ContainerError
from containers.version import Version
from tests.containers.tiny_images import build_tiny

pytestmark = pytest.mark.integration

VERSION = Version("0.1.0", "abc1234")


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("buildah") is None or shutil.which("docker-registry") is None:
        pytest.skip("needs root, buildah and docker-registry (apt-get install -y buildah docker-registry)")
    with services.oci_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Any]:
    made: list[str] = []

    def make(key: str, content: str) -> dict[str, Any]:
        entry, image_id = build_tiny(tmp_path, "tiny", VERSION.tag, key, content)
        made.append(image_id)
        return entry

    yield make
    for image_id in made:
        buildah.run(["rmi", "--force", image_id], check=False)


def _push(entry: dict[str, Any], repository: str) -> None:
    publish.push(entry, repository, VERSION, builder="buildah", client=None)


def test_a_registry_tag_is_reused_with_the_same_key_and_never_moved(reg: str, tiny: Any) -> None:
    repository = f"{reg}/tags-{uuid.uuid4().hex[:8]}"
    first = tiny("a" * 64, "first build")
    _push(first, repository)
    assert first["pushed"] and not first.get("reused_registry_tag")

    # Other inputs under the same tag: refused, the registry still serves the first image.
    other = tiny("b" * 64, "other inputs")
    with pytest.raises(ContainerError, match="built from other inputs"):
        _push(other, repository)
    assert registry.manifest_digest(f"{repository}:{VERSION.tag}") == first["digest"]
    assert not other.get("pushed")

    # The same inputs built again (other bytes, as a rebuild on a fresh CI runner): not pushed
    # again, the record names what the registry holds, confirmed by a pull.
    again = tiny("a" * 64, "same inputs, rebuilt")
    _push(again, repository)
    assert again["reused_registry_tag"] and again["pull_verified"]
    assert again["digest"] == first["digest"] and again["reference"] == first["reference"]
    assert registry.manifest_digest(f"{repository}:{VERSION.tag}") == first["digest"]
