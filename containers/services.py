"""A private Docker engine and OCI registry on this machine, for tests and benchmarks.

Each gets its own folders, socket and a free port on 127.0.0.1, and is stopped by its own pid
(never by name: other jobs on the machine run the same binaries). The engine runs without
iptables or bridge (builds and containers run with `--network none`), on overlay2 where an
overlay mount works and on vfs elsewhere; that is what works in a sandbox as root.

    with services.docker_daemon(tmp) as host, services.oci_registry(tmp) as registry:
        client = docker.DockerClient(base_url=host)      # registry: "127.0.0.1:PORT"
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from containers.errors import ContainerError
from localservers import free_port, http_ok, start_on_free_port, stop_group

REGISTRY_CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


def unmet_docker() -> str | None:
    """Why a private engine cannot start here, or None."""
    if os.geteuid() != 0:
        return "dockerd needs root"
    for tool in ("dockerd", "docker-registry"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install -y docker.io docker-registry)"
    return None


def _wait(what: str, ready: object, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ContainerError(f"{what} exited {proc.returncode}: {log.read_text()[-2000:]}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise ContainerError(f"{what} did not answer within {timeout:.0f} s: {log.read_text()[-2000:]}")


def storage_driver() -> str:
    """overlay2 where the kernel lets us mount an overlay (layers shared: a build step costs a
    layer, not a copy of the image), else vfs, which works anywhere but copies the whole root
    filesystem for every build step and container (minutes per step for a 1 GB image)."""
    from containers import buildah

    return "overlay2" if buildah._overlay_mount_works() else "vfs"


@contextlib.contextmanager
def docker_daemon(workdir: Path, *, timeout: float = 60, driver: str | None = None) -> Iterator[str]:
    """Start dockerd with its own data root and socket; yield its `unix://` address."""
    workdir.mkdir(parents=True, exist_ok=True)
    # A short socket path: AF_UNIX paths are limited to 107 bytes, pytest tmp paths are long.
    run_dir = Path(f"/tmp/dockerd-{os.getpid()}-{free_port()}")
    run_dir.mkdir()
    sock = run_dir / "docker.sock"
    log = workdir / "dockerd.log"
    cmd = [
        "dockerd",
        "--iptables=false",
        "--ip6tables=false",
        "--bridge=none",
        f"--storage-driver={driver or storage_driver()}",
        f"--data-root={workdir / 'data'}",
        f"--exec-root={run_dir / 'exec'}",
        f"--pidfile={run_dir / 'dockerd.pid'}",
        f"--host=unix://{sock}",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        host = f"unix://{sock}"

        def ready() -> bool:
            if not sock.exists():
                return False
            probe = (
                subprocess.run(
                    ["docker", "-H", host, "version", "--format", "{{.Server.Version}}"],
                    capture_output=True,
                    check=False,
                )
                if shutil.which("docker")
                else None
            )
            return probe is None or probe.returncode == 0

        _wait("dockerd", ready, proc, log, timeout)
        yield host
    finally:
        stop_group(proc, grace_s=60)
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def oci_registry(workdir: Path, *, timeout: float = 30, htpasswd: Path | None = None) -> Iterator[str]:
    """Start distribution's registry on a free 127.0.0.1 port; yield `127.0.0.1:PORT`.

    `htpasswd`: a file of `user:bcrypt-hash` lines; the registry then answers 401 to anyone else."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "registry.yml"
    auth = f"auth:\n  htpasswd:\n    realm: eu-ml-platform-test\n    path: {htpasswd}\n" if htpasswd else ""

    def command(port: int) -> list[str]:
        config.write_text(REGISTRY_CONFIG.format(root=workdir / "storage", port=port) + auth)
        return ["docker-registry", "serve", str(config)]

    proc, port = start_on_free_port(
        command,
        workdir / "registry.log",
        "docker-registry",
        # With auth /v2/ answers 401 to the probe: that it listens is enough.
        http_ok("/v2/") if htpasswd is None else None,
        timeout_s=timeout,
        error=ContainerError,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_group(proc, grace_s=60)
