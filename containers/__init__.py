"""Container images of the platform: the training image and the Triton serving image.

Modules: `version` (the tag scheme), `build` (`python -m containers.build`), `smoke` (run built
images with buildah), `lint` (`python -m containers.lint`), `localbase` (base images made locally
with debootstrap, for machines that cannot pull NVIDIA's), `requirements` (the pinned package
lists the Dockerfiles install), `wheelhouse` (those wheels, fetched by the host), `docs` (the
environment table of README.md), `buildah` (the thin wrapper around the buildah CLI).
"""
