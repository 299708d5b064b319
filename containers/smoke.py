"""Smoke-run built images with `buildah run` (no Docker engine needed): what CI does after a build.

    python -m containers.smoke                     # the images of reports/images/build-record.json

- training: the image's ENTRYPOINT with `--help`, then `train --preset smoke --output /tmp/out`
  (a real, tiny training run inside the image, as its non-root user); metrics.json must appear.
  Then `python -m monitoring drift` on synthesised records, run as the drift CronJob's pod runs this
  image (read-only root, /tmp the only writable place): drift.json and drift.html must appear.
- serving: every config.pbtxt under /models parses as a Triton ModelConfig and the `sentiment`
  ensemble is there; when the image carries `tritonserver`, its exact CMD is started the way the
  cluster's pod runs it (`start_as_pod`: read-only root, fresh /tmp and /dev/shm, the image's
  non-root USER, no capabilities, no privilege escalation) in a private network namespace (so the
  fixed ports 8000-8002 clash with nothing), the image's own HEALTHCHECK must pass, and one real
  inference through the ensemble must return a label. A write to the root fails the smoke, naming
  the path.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containers import buildah
from containers.errors import ContainerError

# The serving pod's filesystem and privileges (infra/k8s/serving.py): readOnlyRootFilesystem, an emptyDir on /tmp
# (sizeLimit 1Gi) and a memory emptyDir on /dev/shm (512Mi), capabilities drop ALL, allowPrivilegeEscalation false
# (no_new_privs), runAsNonRoot as the image's own USER (tests/infra/test_infra_image_users.py holds the pod to it).
# A writable root let an image that writes a cache, a download or HOME into its root pass here and crash-loop in
# the pod; the image's own /tmp made the smoke depend on what the image (or the host's disk) left there.
POD_TMP_SIZE = "1g"
POD_SHM_SIZE = "512m"
_EROFS_AFTER = re.compile(r"read-only file system:?\s*['\"]?(/[^'\"\s]+)", re.IGNORECASE)
_EROFS_BEFORE = re.compile(r"['\"]?(/[^'\"\s:]+)['\"]?:\s*read-only file system", re.IGNORECASE)

# One request through the ensemble over plain HTTP (the image has no tritonclient): TEXT is
# [batch, 1] BYTES; an HTTP error prints Triton's own message.
INFER_SCRIPT = """
import json, sys, urllib.error, urllib.request as u
body = {"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1, 1], "data": ["what a lovely day"]}]}
req = u.Request("http://127.0.0.1:8000/v2/models/sentiment/infer", data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"})
try:
    print(u.urlopen(req, timeout=30).read().decode())
except urllib.error.HTTPError as err:
    sys.exit(f"HTTP {err.code}: {err.read().decode()}")
"""


class WorkingContainer:
    """A buildah working container of an image, removed on exit."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.config = buildah.image_config(ref)
        self.id = buildah.run(["from", "--pull=never", ref]).strip()

    def command(self, argv: Sequence[str], *, options: Sequence[str] = ()) -> list[str]:
        return [*buildah._base(), "run", "--isolation", buildah.ISOLATION, *options, self.id, "--", *argv]

    def run(
        self, argv: Sequence[str], *, timeout: float = 300, netns_of: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = self.command(argv)
        if netns_of is not None:
            cmd = ["nsenter", f"--net=/proc/{netns_of}/ns/net", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)

    def read(self, path: str) -> str:
        proc = self.run(["cat", path], timeout=60)
        if proc.returncode != 0:
            raise ContainerError(f"{path} is not in {self.ref}: {proc.stderr.strip()}")
        return proc.stdout

    def mount(self) -> Path:
        return Path(buildah.run(["mount", self.id]).strip())

    def close(self) -> None:
        subprocess.run([*buildah._base(), "rm", self.id], capture_output=True, check=False)

    def __enter__(self) -> WorkingContainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise ContainerError(f"{what} exited {proc.returncode}:\n{tail}")


def smoke_training(ref: str, *, timeout: float = 600) -> dict[str, Any]:
    result: dict[str, Any] = {"image": ref}
    with WorkingContainer(ref) as ctr:
        entrypoint = list(ctr.config.get("Entrypoint") or [])
        if entrypoint != ["python", "-m", "training"]:
            raise ContainerError(f"ENTRYPOINT is {entrypoint}, expected python -m training")
        start = time.monotonic()
        proc = ctr.run([*entrypoint, "--help"], timeout=120)
        _check(proc, "python -m training --help")
        result["help_seconds"] = round(time.monotonic() - start, 1)
        uid = ctr.run(["id", "-u"], timeout=60).stdout.strip()
        if uid in ("", "0"):
            raise ContainerError(f"the training image runs as uid {uid or '?'}: it must not be root")
        result["uid"] = int(uid)
        start = time.monotonic()
        proc = ctr.run([*entrypoint, "train", "--preset", "smoke", "--output", "/tmp/out"], timeout=timeout)
        _check(proc, "python -m training train --preset smoke")
        result["smoke_train_seconds"] = round(time.monotonic() - start, 1)
        metrics = json.loads(ctr.read("/tmp/out/metrics.json"))
        result["test_accuracy"] = metrics["test"]["accuracy"]
        result["steps"] = metrics["steps"]
        root = ctr.mount()
        try:
            result["drift_job"] = _drift_job(ctr, root)
        finally:
            buildah.run(["unmount", ctr.id], check=False)
    return result


# The drift CronJob runs this image (`python -m monitoring drift`) as the push jobs' pod does
# (infra/k8s/push_job.py): read-only root, /tmp an emptyDir. Records synthesised in /tmp, as the records writer
# would write them; the report goes to /tmp too.
DRIFT_JOB_SCRIPT = """
python -c '
import json, random
from monitoring.records import EMBEDDING
rng = random.Random(0)
for name in ("reference", "current"):
    with open(f"/tmp/{name}.jsonl", "w") as f:
        for i in range(300):
            row = {"ts": f"2026-12-03T10:{i // 60:02d}:{i % 60:02d}Z", "model": "sentiment", "model_version": "1",
                   "prediction": rng.choice(["negative", "positive"]), "probability": rng.random(),
                   "latency_ms": 3.0, "n_tokens": rng.randint(3, 40), "truncated": 0, "unk_share": 0.0,
                   **{e: rng.gauss(0, 1) for e in EMBEDDING}}
            f.write(json.dumps(row) + "\\n")
' && python -m monitoring drift --reference /tmp/reference.jsonl --current /tmp/current.jsonl --out /tmp/drift \
  && test -s /tmp/drift/drift.json && test -s /tmp/drift/drift.html && echo DRIFT-JOB-OK
"""


def _drift_job(ctr: WorkingContainer, root: Path) -> dict[str, Any]:
    start = time.monotonic()
    job = start_as_pod(ctr, root, ["sh", "-c", DRIFT_JOB_SCRIPT])
    try:
        out, _ = job.communicate(timeout=600)
    finally:
        _stop(job)
    if "DRIFT-JOB-OK" not in out:
        raise run_failure(
            "python -m monitoring drift as the drift CronJob runs it (read-only root, infra/k8s/push_job.py)",
            out,
        )
    return {"seconds": round(time.monotonic() - start, 1), "read_only_root": True}


def parse_model_configs(models_dir: Path) -> dict[str, Any]:
    """{model name: ModelConfig message} for every config.pbtxt; raises on any that does not parse."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    configs: dict[str, Any] = {}
    for path in sorted(models_dir.glob("*/config.pbtxt")):
        message = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
        configs[message.name or path.parent.name] = message
    return configs


def _healthcheck_argv(config: dict[str, Any]) -> list[str]:
    test = list((config.get("Healthcheck") or {}).get("Test") or [])
    if not test or test[0] not in ("CMD", "CMD-SHELL"):
        raise ContainerError(f"the serving image has no HEALTHCHECK command (got {test})")
    return test[1:] if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]


def pod_user(config: dict[str, Any]) -> str:
    """The image's USER as `uid:gid`: the pod runs it as that user, which runAsNonRoot needs numeric, not root."""
    user = str(config.get("User") or "")
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or int(uid) == 0 or not (gid or uid).isdigit():
        raise ContainerError(
            f"the image's USER is {user or 'unset (root)'}: the pod runs it as a numeric non-root user "
            "(runAsNonRoot); give its Dockerfile a `USER <uid>:<gid>` line"
        )
    return f"{uid}:{gid or uid}"


def start_as_pod(
    ctr: WorkingContainer, root: Path, argv: Sequence[str], *, user: str | None = None
) -> subprocess.Popen[str]:
    """Start ARGV in the container the way the serving pod runs it, in private network and mount namespaces.

    ROOT is the container's root (`ctr.mount()`), mounted until the process is stopped (`_stop`). In the
    namespace it is a read-only bind mount (as runc makes readOnlyRootFilesystem) with a fresh tmpfs on /tmp and
    on /dev/shm, all gone with the namespace; the process runs as USER (default: the image's), with no
    capabilities and no_new_privs. The exit status is not the command's: after the command ends, buildah 1.28
    fails to remove /run/.containerenv from the read-only root and exits 2 (a Go panic); read the output.
    """
    tmp = root / "tmp"
    if not os.path.lexists(tmp):
        tmp.mkdir(mode=0o1777)  # a runtime creates a missing mount point
    if not stat.S_ISDIR(tmp.lstat().st_mode):
        raise ContainerError("the image's /tmp is not a directory: the pod mounts an emptyDir there")
    user = user or pod_user(ctr.config)
    # buildah bind-mounts /etc/hosts, /etc/resolv.conf... and /run/.containerenv over files in the root, which it
    # creates when they are missing; with the root read-only it cannot. A runtime makes its mount points before it
    # makes the root read-only: one run while it is writable leaves them, except /run/.containerenv, which buildah
    # removes after every run (put back empty; buildah's copier resolves the path inside the root).
    _check(ctr.run(["true"], timeout=60), "a first run in the container")
    with tempfile.TemporaryDirectory(prefix="smoke-") as scratch:
        empty = Path(scratch) / "containerenv"
        empty.touch()
        buildah.run(["copy", "--quiet", ctr.id, str(empty), "/run/.containerenv"])
    r = shlex.quote(str(root))
    run = ctr.command(argv, options=["--user", user, "--cap-drop", "ALL"])
    script = " && ".join(
        [
            "ip link set lo up",
            f"mount -t tmpfs -o size={POD_SHM_SIZE},mode=1777 shm /dev/shm",
            f"mount --bind {r} {r}",
            f"mount -o remount,bind,ro {r}",
            f"mount -t tmpfs -o size={POD_TMP_SIZE},mode=1777 tmp {r}/tmp",
            f"exec setpriv --no-new-privs {shlex.join(run)}",
        ]
    )
    return subprocess.Popen(
        ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def root_writes(output: str) -> list[str]:
    """The paths OUTPUT says a write was refused at because the root is read-only (Python's OSError, sh, coreutils)."""
    found: list[str] = []
    for line in output.splitlines():
        if "read-only file system" not in line.lower():
            continue
        paths = _EROFS_AFTER.findall(line) + _EROFS_BEFORE.findall(line)
        found += [p for p in (paths or [line.strip()]) if p not in found]
    return found


def run_failure(what: str, output: str) -> ContainerError:
    # buildah 1.28's panic (see start_as_pod) comes after the server's own last lines: keep those.
    output = output.split("\npanic: runtime error", 1)[0]
    writes = root_writes(output)
    if writes:
        what += (
            f": the image writes to its root filesystem, which the pod mounts read-only (readOnlyRootFilesystem, "
            f"infra/k8s/serving.py): {', '.join(writes)}. Write under /tmp (an emptyDir in the pod) or /dev/shm "
            "instead, or create the file when the image is built"
        )
    return ContainerError(f"{what}:\n{output[-3000:]}")


def smoke_serving(ref: str, *, ready_timeout: float = 180) -> dict[str, Any]:
    result: dict[str, Any] = {"image": ref}
    with WorkingContainer(ref) as ctr:
        root = ctr.mount()
        try:
            _smoke_serving(ctr, root, result, ready_timeout)
        finally:
            buildah.run(["unmount", ctr.id], check=False)
    return result


def _smoke_serving(ctr: WorkingContainer, root: Path, result: dict[str, Any], ready_timeout: float) -> None:
    configs = parse_model_configs(root / "models")
    # The endpoint clients call (an ensemble or a python model driving the classifier: the
    # serving package decides the topology) and the classifier it runs.
    if not {"sentiment", "classifier"} <= configs.keys():
        raise ContainerError(f"/models lacks the sentiment endpoint or its classifier: {sorted(configs)}")
    result["models"] = sorted(configs)
    has_server = ctr.run(["sh", "-c", "command -v tritonserver"], timeout=60).returncode == 0
    result["tritonserver"] = has_server
    if not has_server:
        return
    cmd = list(ctr.config.get("Entrypoint") or []) + list(ctr.config.get("Cmd") or [])
    health = _healthcheck_argv(ctr.config)
    # A private network namespace with only loopback: the image's fixed ports clash with nothing on the host, and
    # the HEALTHCHECK runs exactly as written (in that network namespace; the pod's probes come from outside it
    # too). The private /dev/shm (start_as_pod) also keeps the python backend's regions off the host's: the stop
    # below ends the stubs with Triton, before Triton removes them (1 MiB each, left in the host's /dev/shm on
    # every smoke until reboot otherwise).
    server = start_as_pod(ctr, root, cmd)
    # The probes run in a working container of their own: every `buildah run` of a container removes its
    # /run/.containerenv when it ends, so a probe of the server's own container, ending while the server's run was
    # still setting up, took the mount point from under it (a flaky "creating mountpoint .../run/.containerenv:
    # read-only file system").
    try:
        with WorkingContainer(ctr.ref) as probe:
            _probe(probe, server, health, result, ready_timeout)
    finally:
        _stop(server)


def _probe(
    probe: WorkingContainer,
    server: subprocess.Popen[str],
    health: list[str],
    result: dict[str, Any],
    ready_timeout: float,
) -> None:
    start = time.monotonic()
    while True:
        if server.poll() is not None:
            out = server.stdout.read() if server.stdout else ""
            raise run_failure("tritonserver exited before ready", out)
        if probe.run(health, timeout=60, netns_of=server.pid).returncode == 0:
            break
        if time.monotonic() - start > ready_timeout:
            raise ContainerError(f"the HEALTHCHECK did not pass within {ready_timeout:.0f} s")
        time.sleep(2)
    result["ready_seconds"] = round(time.monotonic() - start, 1)
    proc = probe.run(["python3", "-c", INFER_SCRIPT], timeout=60, netns_of=server.pid)
    if proc.returncode != 0:
        raise run_failure(
            f"inference through the sentiment ensemble exited {proc.returncode}", proc.stdout + proc.stderr
        )
    outputs = {o["name"]: o for o in json.loads(proc.stdout)["outputs"]}
    result["label"] = outputs["LABEL"]["data"][0]
    result["probabilities"] = outputs["PROBABILITIES"]["data"]


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the session this module started (buildah, the chroot, tritonserver), then SIGKILL."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m containers.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, default=Path("reports/images/build-record.json"))
    parser.add_argument("--only", choices=("training", "serving"))
    args = parser.parse_args(argv)
    images = json.loads(args.record.read_text())["images"]
    try:
        for image, entry in images.items():
            if args.only and image != args.only:
                continue
            check = smoke_training if image == "training" else smoke_serving
            print(json.dumps(check(entry["tags"][0]), indent=2))
    except ContainerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
