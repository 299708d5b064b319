"""Tiny images for the registry tests: one small layer built with buildah from scratch (seconds, no base to
pull), labelled with a build key of the test's choosing, under a fresh localhost/ tag."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from containers import buildah
from containers.provenance import BUILD_KEY_LABEL


def build_tiny(workdir: Path, name: str, tag: str, key: str, content: str) -> tuple[dict[str, Any], str]:
    """The image record publish.push takes (`build_key` `key`, one file holding `content`) and the image's id:
    remove it by id (`buildah rmi --force`), so the names a pull added go with it."""
    ref = f"localhost/eu-ml-platform-test-{uuid.uuid4().hex[:8]}/{name}:{tag}"
    (workdir / "file").write_text(content)
    ctr = buildah.run(["from", "scratch"]).strip()
    try:
        buildah.run(["copy", ctr, str(workdir / "file"), "/file"])
        buildah.run(["config", "--label", f"{BUILD_KEY_LABEL}={key}", ctr])
        buildah.run(["commit", "--format", "docker", ctr, ref])
    finally:
        buildah.run(["rm", ctr], check=False)
    entry = {"version": tag, "tags": [ref], "digest": buildah.image_digest(ref), "build_key": key}
    return entry, buildah.image_id(ref)
