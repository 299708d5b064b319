"""The serving smoke runs Triton as the cluster's pod does (infra/k8s/serving.py): read-only root, fresh
/tmp and /dev/shm, the image's non-root user, no capabilities, no privilege escalation.

With a writable root, an image that wrote into it (a cache, a download, HOME) passed the smoke and then
crash-looped in the pod; with the image's own /tmp, the python backend's mkdtemp failed in CI where the pod's
/tmp emptyDir never would. The integration test starts a shell in the local serving base (cached in buildah's
storage by the image builds; built once if it is not) through the smoke's own runtime and reads what it can do.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from containers import buildah, smoke
from containers.errors import ContainerError

PROBE = """
id -u
touch /probe-root 2>&1
touch /tmp/probe && echo tmp-writable
touch /dev/shm/smoke-pod-runtime-probe && echo shm-writable
echo "tmp-mode $(stat -c %a /tmp)"
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status
grep -E ' (/|/tmp|/dev/shm) ' /proc/self/mountinfo
"""


def test_root_writes_names_the_paths_from_python_sh_and_coreutils() -> None:
    output = "\n".join(
        [
            "I1207 model_lifecycle.cc:472] loading: classifier:1",
            "OSError: [Errno 30] Read-only file system: '/home/triton-model/.cache/tok.json'",
            "/usr/bin/sh: 1: cannot create /var/cache/sentiment/warm: Read-only file system",
            "touch: cannot touch '/opt/x': Read-only file system",
            "mkdir: cannot create directory '/opt/x': Read-only file system",
            "E1207 something else: read-only file system",
            "OSError: [Errno 13] Permission denied: '/models/x'",
        ]
    )
    assert smoke.root_writes(output) == [
        "/home/triton-model/.cache/tok.json",
        "/var/cache/sentiment/warm",
        "/opt/x",
        "E1207 something else: read-only file system",
    ]
    assert smoke.root_writes("W pinned_memory_manager.cc:273] Unable to allocate pinned memory") == []


@pytest.mark.parametrize(
    ("user", "expected"), [("10002:10002", "10002:10002"), ("10002", "10002:10002"), ("1:2", "1:2")]
)
def test_the_pod_user_is_the_images_numeric_user(user: str, expected: str) -> None:
    assert smoke.pod_user({"User": user}) == expected


@pytest.mark.parametrize("user", [None, "", "0", "0:0", "root", "triton-model:triton-model", "10002:group"])
def test_a_root_or_named_user_is_refused_with_the_fix(user: str | None) -> None:
    with pytest.raises(ContainerError, match="numeric non-root user .*USER <uid>:<gid>"):
        smoke.pod_user({"User": user})


def _mounts(lines: list[str]) -> dict[str, tuple[set[str], str]]:
    """{mount point: (per-mount options, filesystem type)} of /proc/self/mountinfo lines; the last one wins."""
    found = {}
    for line in lines:
        fields, _, tail = line.partition(" - ")
        parts = fields.split()
        found[parts[4]] = (set(parts[5].split(",")), tail.split()[0])
    return found


@pytest.mark.integration
def test_the_smoke_runtime_root_is_read_only_and_tmp_and_shm_are_fresh_and_writable() -> None:
    from containers import localbase

    tools = ("buildah", "debootstrap", "unshare", "setpriv", "ip")
    if os.geteuid() != 0 or any(shutil.which(t) is None for t in tools):
        pytest.skip(f"the smoke's runtime needs root and {', '.join(tools)}")
    ref = localbase.ensure("serving").ref
    with smoke.WorkingContainer(ref) as ctr:
        root = ctr.mount()
        try:
            proc = smoke.start_as_pod(ctr, root, ["sh", "-c", PROBE], user="10002:10002")
            try:
                out, _ = proc.communicate(timeout=120)
            finally:
                smoke._stop(proc)
            lines = out.splitlines()
            assert lines[0] == "10002", out
            assert "touch: cannot touch '/probe-root': Read-only file system" in lines, out
            assert smoke.root_writes(out) == ["/probe-root"]
            assert {"tmp-writable", "shm-writable", "tmp-mode 1777"} <= set(lines), out
            status = dict(line.split(":\t") for line in lines if line.startswith(("CapEff", "NoNewPrivs")))
            assert status == {"CapEff": "0000000000000000", "NoNewPrivs": "1"}, out
            mounts = _mounts([line for line in lines if " - " in line])
            assert "ro" in mounts["/"][0], out
            assert mounts["/tmp"][1] == mounts["/dev/shm"][1] == "tmpfs", out
            # Both were the namespace's own: nothing of them reached the container's root or the host.
            assert not (root / "tmp" / "probe").exists()
            assert not (root / "probe-root").exists()
        finally:
            buildah.run(["unmount", ctr.id], check=False)
    assert not Path("/dev/shm/smoke-pod-runtime-probe").exists()
