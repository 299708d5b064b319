"""The demo's embedded default bucket: moto's S3 server over real HTTP, in its own process.

Clients (boto3, s3fs inside the training process) reach it exactly as they would reach
S3: through AWS_ENDPOINT_URL_S3 and (dummy) credentials. Stopping it deletes everything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from localservers import http_ok, start_on_free_port, stop_group

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

    def start(self, timeout_s: float = 60.0) -> MotoS3:
        """Start moto on a free port; a port taken between the pick and the bind (moto exits) gets a new pick."""
        self.proc, self.port = start_on_free_port(
            lambda port: [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            self.log, "moto server", http_ok("/moto-api/"), timeout_s=timeout_s, grace_s=10,
        )  # fmt: skip
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc, grace_s=10)
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
