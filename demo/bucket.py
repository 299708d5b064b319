"""The demo's embedded default bucket: moto's S3 server over real HTTP, in its own process.

Clients (boto3, s3fs inside the training process) reach it exactly as they would reach
S3: through AWS_ENDPOINT_URL_S3 and (dummy) credentials. Stopping it deletes everything.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from demo.stages import kill_group
from serving.server import free_port

REGION = "eu-south-2"


class MotoS3:
    def __init__(self, log: Path) -> None:
        # The port is picked when the server starts, not now: the demo builds this object minutes before the
        # train stage starts moto, time enough for another process to take a port picked early.
        self.port = 0
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs to talk to this bucket as if it were S3."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "demo",
            "AWS_SECRET_ACCESS_KEY": "demo",
            "AWS_DEFAULT_REGION": REGION,
        }

    def start(self, timeout_s: float = 60.0, tries: int = 3) -> MotoS3:
        """Start moto on a free port; a port taken between the pick and the bind (moto exits) gets a new pick."""
        for attempt in range(1, tries + 1):
            self.port = free_port()
            if self._start_on_port(timeout_s):
                return self
            if attempt == tries:
                raise RuntimeError(
                    f"moto server exited {self.proc.returncode if self.proc else '?'}: see {self.log}"
                )
        raise AssertionError("unreachable")

    def _start_on_port(self, timeout_s: float) -> bool:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                # A stranger on the port answers 404 here (HTTPError, an OSError), and our moto exits on the bind.
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    if self.proc.poll() is None:
                        return True
            except OSError:
                time.sleep(0.3)
        kill_group(self.proc)
        raise RuntimeError(f"moto server not answering on {self.endpoint} after {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc)
        self.proc = None

    def client(self):  # noqa: ANN201 - boto3 types are not installed
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="demo",
            aws_secret_access_key="demo",
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})

    def upload(self, path: Path, bucket: str, key: str) -> str:
        self.client().upload_file(str(path), bucket, key)
        return f"s3://{bucket}/{key}"

    def list(self, bucket: str, prefix: str = "") -> list[tuple[str, int]]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [(o["Key"], int(o["Size"])) for page in pages for o in page.get("Contents", [])]
