"""The serving image's model repository: written into the build context by `serving build` (or copied from a
ready-made one), and the labels the image carries about it (model version, dataset and bundle hashes)."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from containers.version import REPO_ROOT

if TYPE_CHECKING:
    from serving.repository import Backend

# Inside the build context and let in by .dockerignore; the serving Dockerfile's MODEL_REPOSITORY.
MODEL_REPOSITORY_CONTEXT = "build/images/serving/model_repository"
# Left in a repository by `serving build`/`pin` and never part of the model: staged `.N.tmp` folders and
# `.name.tmp` files of a write (serving.manifest.STAGED, atomic_write) and the lock file, which holds the pid
# of the last writer. Neither copied into the image nor keyed: the same model gets the same build key.
TRANSIENT = ("__pycache__", ".*.tmp", ".repository.lock")


def prepare_model_repository(
    *, bundle: Path | None, model_repository: Path | None, model_version: int | None, backend: Backend
) -> dict[str, str]:
    """Write the repository into the build context; return the model labels for the build."""
    target = REPO_ROOT / MODEL_REPOSITORY_CONTEXT
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    from serving import repository
    from serving.manifest import LOCK, read_manifest

    if model_repository is not None:
        shutil.copytree(model_repository, target, ignore=shutil.ignore_patterns(*TRANSIENT))
    else:
        from serving.repository import BuildOptions

        if bundle is None:
            # No model given: a tiny random model through the real export path, so the image (and
            # `make images` on a fresh clone) can still be built and checked. It is labelled m0.
            from training.export import make_tiny_bundle

            print(
                "containers.build: no --bundle given: baking a tiny random model as version 0",
                file=sys.stderr,
            )
            bundle = make_tiny_bundle(REPO_ROOT / "build/images/serving/tiny-bundle")
            version = repository.build(bundle, target, options=BuildOptions(backend=backend))
            (target / LOCK).unlink(missing_ok=True)
            return _model_labels(target, version, override="0") | _bundle_label(bundle)
        version = repository.build(
            bundle, target, version=model_version, options=BuildOptions(backend=backend)
        )
        (target / LOCK).unlink(missing_ok=True)  # the pid of this build: nothing the image should carry
    manifest = read_manifest(target)
    served = manifest.get("pinned") or max(int(v) for v in manifest["versions"])
    return _model_labels(target, int(served)) | _bundle_label(bundle)


def model_inputs(*, bundle: Path | None, model_repository: Path | None, backend: str) -> str:
    """What the baked model is made from, for the build key: the bytes of --model-repository, or of --bundle
    with the classifier backend, or, for the tiny model, the backend alone (its code and seed are in the
    source revision).

    Not the repository `serving build` writes: it stamps the time it ran (repository.json) and leaves its
    lock file with its pid, so the same bundle keyed differently on every build, and a rebuild of the same
    commit was refused as "built from other inputs" (locally, and by the registry on a CI rerun)."""
    from containers.provenance import tree_digest

    if model_repository is not None:
        return "repository:" + tree_digest(model_repository, ignore=TRANSIENT)
    if bundle is not None:
        return f"bundle:{backend}:" + tree_digest(bundle)
    return f"tiny:{backend}"


def _bundle_label(bundle: Path | None) -> dict[str, str]:
    """sha256 of the bundle's metadata.json bytes: what promotion's `image-carries-bundle` gate
    compares with the candidate it judges (unknown for a ready-made --model-repository)."""
    meta = bundle / "metadata.json" if bundle else None
    sha = hashlib.sha256(meta.read_bytes()).hexdigest() if meta and meta.is_file() else "unknown"
    return {"bundle_metadata_sha256": sha}


def _model_labels(repo: Path, version: int, override: str | None = None) -> dict[str, str]:
    from serving.manifest import read_manifest

    entry = read_manifest(repo)["versions"][str(version)]
    return {
        "model_version": override or str(version),
        "dataset_manifest_sha256": str(entry.get("dataset_manifest_sha256") or "unknown"),
    }
