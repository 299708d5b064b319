"""Object storage that refuses the run: no credentials, a missing checkpoint bucket, access denied. Each is exit 2
naming the URI and the fix before the data is read or a step trained. Before: NoCredentialsError escaped as a
traceback (exit 1) at the first listing or data read, and a missing bucket trained until the first checkpoint save
("The specified bucket does not exist", exit 1), losing every step before it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from training import retry
from training.cli import main
from training.errors import EXIT_USAGE, StorageAccessDenied

SMOKE = ["train", "--preset", "smoke", "export=false", "baselines=false"]


@pytest.fixture(autouse=True)
def fresh_s3() -> Iterator[None]:
    """s3fs keeps one filesystem (and the credentials it resolved) per set of arguments: none may leak across."""
    import fsspec

    fsspec.get_filesystem_class("s3").clear_instance_cache()
    yield
    fsspec.get_filesystem_class("s3").clear_instance_cache()


def _without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    # No instance identity to look for on this machine (botocore would wait for the metadata endpoint).
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("flags", "uri"),
    [(["--checkpoint-uri", "s3://checkpoints/run"], "s3://checkpoints/run"), (["--data", "s3://raw/d.csv"], "s3://raw/d.csv")],
)  # fmt: skip
def test_no_credentials_is_exit_2_naming_what_to_set(
    tmp_path: Path,
    s3_env: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    flags: list[str],
    uri: str,
) -> None:
    _without_credentials(monkeypatch, tmp_path)
    assert main([*SMOKE, "--output", str(tmp_path / "run"), *flags]) == EXIT_USAGE
    err = capfd.readouterr().err
    assert f"object storage {uri}" in err and "no usable credentials (NoCredentialsError" in err, err
    assert "AWS_ACCESS_KEY_ID" in err and "workload identity" in err
    assert "Traceback" not in err and " data: " not in err  # refused before the data was read


@pytest.mark.integration
def test_a_missing_checkpoint_bucket_is_refused_before_training(
    tmp_path: Path, s3_env: str, capfd: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "run"
    assert (
        main([*SMOKE, "--output", str(output), "--checkpoint-uri", "s3://no-such-bucket/run"]) == EXIT_USAGE
    )
    err = capfd.readouterr().err
    assert "object storage s3://no-such-bucket/run" in err and "the bucket does not exist" in err, err
    assert "--checkpoint-uri" in err and "TRAINING_CHECKPOINT_URI" in err
    assert " data: " not in err and "step 5 " not in err  # nothing was read or trained
    assert not (output / "metrics.json").exists()


@pytest.mark.integration
def test_the_write_check_leaves_nothing_in_the_bucket(s3_env: str) -> None:
    import boto3

    from training import checkpoint as ckpt

    s3 = boto3.client("s3", endpoint_url=s3_env)
    s3.create_bucket(Bucket="write-check", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    ckpt.Store("s3://write-check/run").check_writable()
    assert s3.list_objects_v2(Bucket="write-check").get("KeyCount") == 0


def test_refusals_are_exit_2_and_other_errors_keep_their_class() -> None:
    """A read-only identity (s3fs maps AccessDenied to PermissionError) and Azure's authentication error are
    StorageAccessDenied; a missing object stays FileNotFoundError, which callers read as "absent"."""
    from azure.core.exceptions import ClientAuthenticationError

    def raise_(exc: BaseException) -> None:
        raise exc

    for refused in (
        PermissionError("Access Denied"),
        ClientAuthenticationError("Server failed to authenticate"),
    ):
        with pytest.raises(StorageAccessDenied) as info:
            retry.call("s3://bucket/run", "write step-000000010/state.pt", raise_, refused)
        assert info.value.exit_code == EXIT_USAGE
        assert "s3://bucket/run: write step-000000010/state.pt failed" in str(info.value)
    with pytest.raises(FileNotFoundError):
        retry.call("s3://bucket/run", "read", raise_, FileNotFoundError("s3://bucket/run/x"))


class S3Access:
    """Revokes and restores this test's access to the shared S3 server, as when credentials expire or are revoked
    mid-run: moto's own /moto-api/reset-auth makes it check each request's key against its IAM, where the test
    key is unknown (403 InvalidAccessKeyId)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def _reset_auth(self, free_requests: bytes) -> None:
        import urllib.request

        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=free_requests,
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200

    def revoke(self) -> None:
        self._reset_auth(b"0")

    def restore(self) -> None:
        self._reset_auth(b"inf")


@pytest.fixture
def s3_access(s3_env: str) -> Iterator[S3Access]:
    access = S3Access(s3_env)
    yield access
    access.restore()  # the server is shared with the session's other tests


@pytest.mark.integration
def test_a_refusal_mid_run_keeps_the_unsaved_steps_locally_and_the_rerun_resumes_them(
    tmp_path: Path, s3_env: str, s3_access: S3Access, capfd: pytest.CaptureFixture[str]
) -> None:
    """Access revoked after the start's write check: the save at step 10 is refused (exit 2). The steps since step
    5's checkpoint were lost; only an outage (exit 69) kept them in checkpoints-rescue/."""
    import boto3
    import fsspec

    from training import checkpoint as ckpt
    from training import presets, state
    from training.config import apply_overrides
    from training.loop import Hooks
    from training.trainer import run

    s3 = boto3.client("s3", endpoint_url=s3_env)
    s3.create_bucket(Bucket="revoked", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    output = tmp_path / "run"
    flags = ["max_steps=20", "eval_every_steps=10", "checkpoint.every_steps=5", "data.max_test_rows=100"]
    config = apply_overrides(presets.get("smoke"), [*SMOKE[3:], *flags, "checkpoint.uri=s3://revoked/run"])

    def revoke_at_the_first_validation(step: int, scores: dict[str, float]) -> bool:
        assert step == 10  # step 5's checkpoint and best-10 are in the bucket; step 10's save is next
        s3_access.revoke()
        return False

    with pytest.raises(StorageAccessDenied) as info:
        run(config, output, Hooks(on_evaluate=revoke_at_the_first_validation))
    rescue = output / state.RESCUE_DIR
    kept = state.latest_resumable(ckpt.Store(str(rescue)))
    assert kept is not None and kept.step == 10, sorted(p.name for p in rescue.glob("*"))
    message = str(info.value)
    assert info.value.exit_code == EXIT_USAGE
    assert "object storage s3://revoked/run: write step-000000010/" in message and "access denied" in message
    assert f"kept on local disk at {rescue}/step-000000010" in message and "same --output" in message, message

    s3_access.restore()
    in_bucket = {o["Key"] for o in s3.list_objects_v2(Bucket="revoked", Prefix="run/step-")["Contents"]}
    assert "run/step-000000005/MANIFEST.json" in in_bucket
    assert not any("step-000000010" in key for key in in_bucket)
    fsspec.get_filesystem_class("s3").clear_instance_cache()
    capfd.readouterr()
    again = [*SMOKE, *flags, "--output", str(output), "--checkpoint-uri", "s3://revoked/run"]
    assert main(again) == 0
    err = capfd.readouterr().err
    assert "uploading step-000000010, kept on local disk" in err, err
    assert "resumed from s3://revoked/run/step-000000010" in err, err
    assert state.latest_resumable(ckpt.Store(str(rescue))) is None
    assert json.loads((output / "metrics.json").read_text())["steps"] == 20
