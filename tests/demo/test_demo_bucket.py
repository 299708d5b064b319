"""The demo's S3 (a real moto server) takes its port when it starts, and a port taken since the pick is not fatal.

The demo builds the bucket object at its start and starts moto minutes later, in the train stage: a port picked
up front could be taken by then, and moto exited on the bind ("moto server exited 1"), failing the demo.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import demo.bucket as bucket
from serving.server import free_port


def test_a_port_taken_after_the_pick_gets_a_new_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # a stranger that never answers
    picks = iter([taken.getsockname()[1]])
    monkeypatch.setattr(bucket, "free_port", lambda: next(picks, None) or free_port())
    s3 = bucket.MotoS3(tmp_path / "moto.log")
    try:
        s3.start(timeout_s=30)
        assert s3.port != taken.getsockname()[1]
        s3.create_bucket("probe")
        assert s3.list("probe") == []
    finally:
        s3.stop()
        taken.close()


def test_the_port_is_picked_when_moto_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    picked: list[int] = []

    def pick() -> int:
        picked.append(free_port())
        return picked[-1]

    monkeypatch.setattr(bucket, "free_port", pick)
    s3 = bucket.MotoS3(tmp_path / "moto.log")
    assert picked == []
    try:
        s3.start(timeout_s=30)
        assert picked == [s3.port] and s3.endpoint.endswith(f":{s3.port}")
    finally:
        s3.stop()
