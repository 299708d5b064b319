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
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen | None = None

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

    def start(self, timeout_s: float = 60.0) -> MotoS3:
        out = self.log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited {self.proc.returncode}: see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except OSError:
                time.sleep(0.3)
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
