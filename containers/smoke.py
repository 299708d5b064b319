"""Smoke-run built images with `buildah run` (no Docker engine needed): what CI does after a build.

    python -m containers.smoke                     # the images of reports/images/build-record.json

- training: the image's ENTRYPOINT with `--help`, then `train --preset smoke --output /tmp/out`
  (a real, tiny training run inside the image, as its non-root user); metrics.json must appear.
- serving: every config.pbtxt under /models parses as a Triton ModelConfig and the `sentiment`
  ensemble is there; when the image carries `tritonserver`, its exact CMD is started in a private
  network namespace (so the fixed ports 8000-8002 clash with nothing), the image's own HEALTHCHECK
  must pass, and one real inference through the ensemble must return a label.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containers import buildah
from containers.errors import ContainerError

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

    def command(self, argv: Sequence[str]) -> list[str]:
        return [*buildah._base(), "run", "--isolation", buildah.ISOLATION, self.id, "--", *argv]

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
    return result


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


def smoke_serving(ref: str, *, ready_timeout: float = 180) -> dict[str, Any]:
    result: dict[str, Any] = {"image": ref}
    with WorkingContainer(ref) as ctr:
        root = ctr.mount()
        try:
            configs = parse_model_configs(root / "models")
        finally:
            buildah.run(["unmount", ctr.id])
        # The endpoint clients call (an ensemble or a python model driving the classifier: the
        # serving package decides the topology) and the classifier it runs.
        if not {"sentiment", "classifier"} <= configs.keys():
            raise ContainerError(f"/models lacks the sentiment endpoint or its classifier: {sorted(configs)}")
        result["models"] = sorted(configs)
        has_server = ctr.run(["sh", "-c", "command -v tritonserver"], timeout=60).returncode == 0
        result["tritonserver"] = has_server
        if not has_server:
            return result
        cmd = list(ctr.config.get("Entrypoint") or []) + list(ctr.config.get("Cmd") or [])
        # A private network namespace with only loopback: the image's fixed ports clash with
        # nothing on the host, and the HEALTHCHECK runs exactly as written. A private /dev/shm too (a mount
        # namespace, private propagation): the chroot uses the /dev/shm it finds, and the stop below ends the
        # python backend's stubs with Triton, before Triton removes their regions (1 MiB each, left in the host's
        # /dev/shm on every smoke until reboot); the tmpfs goes with the namespace.
        server_cmd = " ".join(_quote(a) for a in ctr.command(cmd))
        server = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"ip link set lo up && mount -t tmpfs -o size=256m shm /dev/shm && exec {server_cmd}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            start = time.monotonic()
            health = _healthcheck_argv(ctr.config)
            while True:
                if server.poll() is not None:
                    out = server.stdout.read() if server.stdout else ""
                    raise ContainerError(
                        f"tritonserver exited {server.returncode} before ready:\n{out[-3000:]}"
                    )
                if ctr.run(health, timeout=60, netns_of=server.pid).returncode == 0:
                    break
                if time.monotonic() - start > ready_timeout:
                    raise ContainerError(f"the HEALTHCHECK did not pass within {ready_timeout:.0f} s")
                time.sleep(2)
            result["ready_seconds"] = round(time.monotonic() - start, 1)
            proc = ctr.run(["python3", "-c", INFER_SCRIPT], timeout=60, netns_of=server.pid)
            _check(proc, "inference through the sentiment ensemble")
            outputs = {o["name"]: o for o in json.loads(proc.stdout)["outputs"]}
            result["label"] = outputs["LABEL"]["data"][0]
            result["probabilities"] = outputs["PROBABILITIES"]["data"]
        finally:
            _stop(server)
    return result


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


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
