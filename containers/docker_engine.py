"""The Docker path: build, push and smoke-run through the `docker` SDK's public API only.

The engine's classic builder (what `docker build` uses without BuildKit; buildx is not on every
machine) builds the Dockerfiles unchanged. A push returns the digest the registry stored: an image
that was never pushed has no repository digest, so the record keeps the local image id until then.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from containers import buildah
from containers.errors import ContainerError
from containers.version import REPO_ROOT

SERVING_READY_S = 300.0


def connect() -> Any | None:
    """A connected client (DOCKER_HOST or the default socket), or None when no engine answers."""
    try:
        import docker

        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except Exception:
        return None


def image_exists(client: Any, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def build(
    client: Any, *, dockerfile: Path, tag: str, args: dict[str, str], labels: dict[str, str], offline: bool
) -> str:
    """Build `dockerfile` with the repository root as context (filtered by .dockerignore, which the
    SDK applies); returns the image id. Offline builds (local bases, wheels in the context) run
    with no network at all, so nothing can be fetched behind the lock's back."""
    import docker.errors

    try:
        image, _logs = client.images.build(
            path=str(REPO_ROOT),
            dockerfile=str(dockerfile.relative_to(REPO_ROOT)),
            tag=tag,
            buildargs=args,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none" if offline else None,
        )
    except docker.errors.BuildError as err:
        tail = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in err.build_log)
        raise ContainerError(f"docker build of {tag} failed: {err.msg}\n{tail[-3000:]}") from err
    return str(image.id)


def image_facts(client: Any, ref: str) -> dict[str, Any]:
    """id, size, labels and the repository digest if the image was ever pushed or pulled."""
    image = client.images.get(ref)
    repo_digests = list(image.attrs.get("RepoDigests") or [])
    return {
        "image_id": str(image.id),
        "size_bytes": int(image.attrs.get("Size", 0)),
        "labels": dict(image.labels or {}),
        "repo_digests": repo_digests,
    }


def push(client: Any, local_ref: str, repository: str, tag: str) -> str:
    """Tag `local_ref` as `repository:tag`, push it, return the digest the registry answered."""
    client.images.get(local_ref).tag(repository, tag=tag)
    digest = ""
    for line in client.images.push(repository, tag=tag, stream=True, decode=True):
        if "error" in line:
            raise ContainerError(f"push of {repository}:{tag} failed: {line['error']}")
        digest = (line.get("aux") or {}).get("Digest", digest)
    if not digest.startswith("sha256:"):
        raise ContainerError(f"the registry returned no digest for {repository}:{tag}")
    return digest


def pull_digest(client: Any, reference: str) -> str:
    """Pull `<repo>@sha256:...` from the registry and return the digest the engine now records."""
    repository, _, digest = reference.partition("@")
    image = client.images.pull(reference)
    for repo_digest in image.attrs.get("RepoDigests") or []:
        if repo_digest.partition("@")[0] == repository:
            return str(repo_digest.partition("@")[2])
    raise ContainerError(f"pulled {reference} but the engine records no digest for {repository}")


def load_from_buildah(client: Any, ref: str) -> str:
    """Copy an image from buildah's storage into the engine (local bases are made with buildah:
    nothing is pulled from a registry); return its image id, the same in both stores.

    An image id is the digest of the image config, so equal ids mean the engine builds on exactly
    the bytes buildah holds (and whose manifest digest the record names); a tag in the engine that
    names other bytes (a base rebuilt under the same cache key) is replaced, never built on."""
    want = buildah.image_id(ref)
    want = want if want.startswith("sha256:") else f"sha256:{want}"
    if image_exists(client, ref) and client.images.get(ref).id == want:
        return want
    with tempfile.TemporaryDirectory(prefix="buildah-to-docker-", dir="/var/tmp") as tmp:
        archive = Path(tmp) / "image.tar"
        buildah.run(["push", ref, f"docker-archive:{archive}:{ref}"])
        with archive.open("rb") as fh:
            client.images.load(fh)
    got = client.images.get(ref).id if image_exists(client, ref) else None
    if got != want:
        raise ContainerError(f"loading {ref} into the Docker engine gave image {got}, buildah holds {want}")
    return want


def run_python(client: Any, ref: str, script: str, *, user: str | None = None) -> str:
    """Run `python3 -c SCRIPT` in a throwaway container with no network; return its stdout."""
    import docker.errors

    try:
        out = client.containers.run(
            ref,
            ["-c", script],
            entrypoint=["python3"],
            network_mode="none",
            remove=True,
            user=user,
            stdout=True,
            stderr=False,
        )
    except docker.errors.ContainerError as err:
        raise ContainerError(f"python in {ref} failed: {err.stderr!r}") from err
    return out.decode() if isinstance(out, bytes) else str(out)


def smoke_training(client: Any, ref: str) -> dict[str, Any]:
    """The buildah path's checks with the engine: `--help` through the ENTRYPOINT, then a real smoke
    training run as the image's user (no network); metrics.json must say what it trained."""
    import docker.errors

    try:
        client.containers.run(ref, ["--help"], network_mode="none", remove=True)
        script = (
            "import json, os, subprocess, sys; "
            "r = subprocess.run([sys.executable, '-m', 'training', 'train', '--preset', 'smoke', "
            "'--output', '/tmp/out'], capture_output=True, text=True); "
            "sys.stderr.write(r.stderr[-2000:]); "
            "m = json.load(open('/tmp/out/metrics.json')) if r.returncode == 0 else {}; "
            "print(json.dumps({'rc': r.returncode, 'uid': os.getuid(), 'metrics': m}))"
        )
        out = client.containers.run(
            ref, ["-c", script], entrypoint=["python"], network_mode="none", remove=True
        )
    except docker.errors.ContainerError as err:
        raise ContainerError(f"training smoke run in {ref} failed: {err.stderr!r}") from err
    result = json.loads(out.decode().strip().splitlines()[-1])
    if result["rc"] != 0:
        raise ContainerError(f"training smoke run in {ref} exited {result['rc']}")
    if result["uid"] == 0:
        raise ContainerError(f"the training image {ref} runs as root")
    metrics = result["metrics"]
    return {"uid": result["uid"], "steps": metrics["steps"], "test_accuracy": metrics["test"]["accuracy"]}


def smoke_serving(client: Any, ref: str, *, timeout: float = SERVING_READY_S) -> dict[str, Any]:
    """Start the image's own CMD with no network (its fixed ports clash with nothing), wait until
    the engine reports the image's HEALTHCHECK healthy, then one inference through the ensemble.
    Run as the cluster's pod runs it (infra/k8s/serving.py): read-only root, /tmp and /dev/shm the
    only writable places, no capabilities, no privilege escalation (the buildah smoke does the same)."""
    from containers.smoke import INFER_SCRIPT, POD_SHM_SIZE, POD_TMP_SIZE, run_failure

    container = client.containers.run(
        ref,
        detach=True,
        network_mode="none",
        read_only=True,
        tmpfs={"/tmp": f"size={POD_TMP_SIZE},mode=1777"},
        shm_size=POD_SHM_SIZE,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
    )
    try:
        deadline = time.monotonic() + timeout
        status = "starting"
        while time.monotonic() < deadline:
            container.reload()
            if container.status == "exited":
                raise run_failure("tritonserver exited", container.logs().decode(errors="replace"))
            status = container.attrs["State"].get("Health", {}).get("Status", "none")
            if status == "healthy":
                break
            time.sleep(2)
        if status != "healthy":
            raise ContainerError(f"{ref}: HEALTHCHECK not healthy after {timeout:.0f} s ({status})")
        code, out = container.exec_run(["python3", "-c", INFER_SCRIPT])
        if code != 0:
            raise run_failure(f"inference in {ref} failed", out.decode(errors="replace"))
        answer = json.loads(out.decode())
        outputs = {o["name"]: o["data"] for o in answer["outputs"]}
        models = json.loads(
            container.exec_run(
                [
                    "python3",
                    "-c",
                    "import json, urllib.request as u; print(u.urlopen(u.Request("
                    "'http://127.0.0.1:8000/v2/repository/index', data=b'{}'), timeout=10).read().decode())",
                ]
            ).output.decode()
        )
        return {
            "healthy": True,
            "models": sorted(m["name"] for m in models),
            "label": outputs["LABEL"][0],
            "probabilities": outputs["PROBABILITIES"],
        }
    finally:
        container.remove(force=True)


def remove(client: Any, *refs: str) -> None:
    import docker.errors

    for ref in refs:
        with contextlib.suppress(docker.errors.ImageNotFound):  # already gone is what we want
            client.images.remove(ref, force=True)
