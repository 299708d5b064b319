"""The demo's S3 (a real moto server) takes its port when it starts, and a port taken since the pick is not fatal.

The demo builds the bucket object at its start and starts moto minutes later, in the train stage: a port picked
up front could be taken by then, and moto exited on the bind ("moto server exited 1"), failing the demo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import demo.bucket as bucket
import localservers
from localservers import free_port


def test_a_port_taken_after_the_pick_gets_a_new_one(tmp_path: Path, taken: int) -> None:
    s3 = bucket.MotoS3(tmp_path / "moto.log")
    try:
        s3.start(timeout_s=30)
        assert s3.port != taken
        s3.create_bucket("probe")
        assert s3.list("probe") == []
    finally:
        s3.stop()


def test_the_port_is_picked_when_moto_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    picked: list[int] = []

    def pick() -> int:
        picked.append(free_port())
        return picked[-1]

    monkeypatch.setattr(localservers, "free_port", pick)
    s3 = bucket.MotoS3(tmp_path / "moto.log")
    assert picked == []
    try:
        s3.start(timeout_s=30)
        assert picked == [s3.port] and s3.endpoint.endswith(f":{s3.port}")
    finally:
        s3.stop()
