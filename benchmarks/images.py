"""Image build cost: base images (cached or cold), build time and size of each image, smoke runs.

    python -m benchmarks.images            # warm: the local bases come from buildah's cache
    python -m benchmarks.images --cold     # rebuild the local bases first (debootstrap), ~5 min more

Writes reports/bench/images.json: the storage driver, per base `seconds` and `built` (False = cache
hit), per image `build_seconds` and `size_bytes` (from the build record), and the smoke runs'
timings (training: `--help` and the smoke preset inside the image; serving: seconds to ready).
The images are built under a throw-away name and removed afterwards. Needs root and buildah.
One run on 2 shared cores: noisy.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from containers import build, buildah, localbase, smoke

OUT = Path("reports/bench/images.json")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.images")
    parser.add_argument("--cold", action="store_true", help="rebuild the local base images first")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": platform.machine(), "storage_driver": buildah.storage_driver()}
    result["bases"] = {}
    for kind in localbase.KINDS:
        base = localbase.ensure(kind, rebuild=args.cold)
        result["bases"][kind] = {"ref": base.ref, "built": base.built, "seconds": round(base.seconds, 1)}
        result["bases"][kind]["size_bytes"] = base.size_bytes
    repository = f"localhost/eu-ml-platform-bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "record.json"
        start = time.monotonic()
        if build.main(["--base", "local", "--repository", repository, "--record", str(record)]) != 0:
            return 1
        result["build_both_seconds"] = round(time.monotonic() - start, 1)
        images = json.loads(record.read_text())["images"]
    try:
        result["images"] = {
            name: {k: entry[k] for k in ("version", "build_seconds", "size_bytes", "digest")}
            for name, entry in images.items()
        }
        start = time.monotonic()
        result["images"]["training"]["smoke"] = smoke.smoke_training(images["training"]["tags"][0])
        result["images"]["training"]["smoke"]["total_seconds"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        result["images"]["serving"]["smoke"] = smoke.smoke_serving(images["serving"]["tags"][0])
        result["images"]["serving"]["smoke"]["total_seconds"] = round(time.monotonic() - start, 1)
    finally:
        for entry in images.values():
            subprocess.run(
                [*buildah._base(), "rmi", "--force", entry["tags"][0]], capture_output=True, check=False
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
