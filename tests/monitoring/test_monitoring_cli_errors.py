"""The monitoring CLIs on an object store that is down or refuses them, and on outputs they cannot write.

Found by running `python -m monitoring drift` against a real S3 endpoint (moto) that then went away, or without
credentials: botocore's EndpointConnectionError and NoCredentialsError are no OSError, so reading --current or
uploading the report to an s3:// --out ended in a traceback and exit 1, which `--fail-on-drift` documents as
"drift detected". A local --out that is a file, or under one, did the same once the window had been judged;
`evaluate` and `reference` only found out after minutes of work. `--window 99999999999d`, `--rows 0` and
`budget --eur-per-unit nan` (NaN passed `<= 0` and became the pushed limit) were tracebacks or bad gauges too.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from synthetic_records import record, write

from tests.emulators import MotoServer

BUCKET = "records"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monitoring", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})  # fmt: skip


def refused(done: subprocess.CompletedProcess, *expected: str) -> None:
    """Exit 2 with one line naming what to fix: never a traceback, never exit 1 (= drift detected)."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("windows")
    return (write(folder / "reference.jsonl", [record(i, rng) for i in range(200)]),
            write(folder / "current.jsonl", [record(i, rng) for i in range(60)]))  # fmt: skip


@pytest.fixture
def s3() -> Iterator[tuple[Callable[[], None], dict[str, str]]]:
    """A real S3 endpoint holding a records prefix, and its stop: the test stops it to stage an outage."""
    import boto3

    server = MotoServer()
    env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ENDPOINT_URL_S3": server.endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-south-2",
           "AWS_MAX_ATTEMPTS": "1"}  # fmt: skip  # botocore's retries only make the outage slower to see
    client = boto3.client("s3", endpoint_url=server.endpoint, region_name="eu-south-2",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    rng = random.Random(1)
    body = "".join(json.dumps(record(i, rng)) + "\n" for i in range(60))
    client.put_object(Bucket=BUCKET, Key="live/date=2026-12-03/part-a.jsonl", Body=body.encode())
    stopped: list[bool] = []

    def stop() -> None:
        if not stopped:
            stopped.append(True)
            server.stop()

    try:
        yield stop, env
    finally:
        stop()


@pytest.mark.integration  # a real S3 endpoint; Evidently judges one window (~10 s on 2 cores)
def test_an_object_store_that_is_down_or_refuses_is_exit_2_naming_the_url(
    s3: tuple[Callable[[], None], dict[str, str]], windows: tuple[Path, Path], tmp_path: Path
) -> None:
    stop, env = s3
    ref, cur = windows
    live = f"s3://{BUCKET}/live/"
    nowhere = str(tmp_path / "none")  # no key pair, no credentials file, no instance metadata to ask
    no_credentials = {**env, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": nowhere,
                      "AWS_CONFIG_FILE": nowhere, "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    refused(run("drift", "--reference", str(ref), "--current", live, "--out", str(tmp_path / "a"),
                "--fail-on-drift", env=no_credentials),
            f"could not read {live}", "NoCredentialsError")  # fmt: skip
    stop()  # the outage: nothing answers on the endpoint's port any more
    refused(run("drift", "--reference", str(ref), "--current", live, "--out", str(tmp_path / "b"), env=env),
            f"could not read {live}", "EndpointConnectionError")  # fmt: skip
    refused(run("drift", "--reference", live, "--current", str(cur), "--out", str(tmp_path / "c"), env=env),
            f"could not read {live}")  # fmt: skip
    out = f"s3://{BUCKET}/drift/"
    upload = run(
        "drift", "--reference", str(ref), "--current", str(cur), "--out", out, "--fail-on-drift", env=env
    )
    refused(upload, f"could not write the report to {out}", "EndpointConnectionError", "nothing was uploaded")


def test_an_out_folder_that_cannot_be_made_is_exit_2_before_any_work(
    windows: tuple[Path, Path], tmp_path: Path
) -> None:
    ref, cur = windows
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    for out in (blocker, blocker / "report"):
        refused(run("drift", "--reference", str(ref), "--current", str(cur), "--out", str(out)),
                f"--out {out}: cannot be used as the output folder")  # fmt: skip
    # evaluate checks it before sending anything: the endpoint (a closed port) is never asked.
    refused(run("evaluate", "--url", "127.0.0.1:9", "--manifest", "m.json", "--bundle", "b",
                "--out", str(blocker / "q")), f"--out {blocker / 'q'}: cannot be used")  # fmt: skip
    refused(run("texts", "--shifted", "--rows", "3", "--out", str(blocker / "t.txt")), "--out's folder")
    refused(run("texts", "--shifted", "--rows", "3", "--out", str(tmp_path)), f"--out {tmp_path} is a folder")
    refused(run("reference", "--manifest", "m.json", "--bundle", "b", "--out", str(tmp_path)), "is a folder")
    refused(run("budget", "--cloud", "aws", "--budget", "b", "--stack", "dev", "--out", str(blocker)),
            f"--out {blocker}: cannot be used")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("texts", "--shifted", "--rows", "0"), "argument --rows: '0' is not a positive whole number"),
        (("texts", "--shifted", "--rows", "-5"), "argument --rows: '-5' is not a positive whole number"),
        (("evaluate", "--url", "h:1", "--manifest", "m", "--bundle", "b", "--rows", "0"), "argument --rows"),
        (("budget", "--cloud", "aws", "--budget", "b", "--stack", "dev", "--eur-per-unit", "nan"),
         "--eur-per-unit nan: give EUR per unit"),
        (("budget", "--cloud", "aws", "--budget", "b", "--stack", "dev", "--eur-per-unit", "inf"),
         "--eur-per-unit inf: give EUR per unit"),
    ],
    ids=["rows-0", "rows-negative", "evaluate-rows-0", "eur-per-unit-nan", "eur-per-unit-inf"],
)  # fmt: skip
def test_a_bad_number_is_exit_2_naming_the_flag(args: tuple[str, ...], expected: str, tmp_path: Path) -> None:
    refused(run(*args, *(("--out", str(tmp_path / "x")) if "--out" not in args and args[0] != "budget" else ())),
            expected)  # fmt: skip


def test_a_window_reaching_before_pandas_time_is_exit_2(windows: tuple[Path, Path], tmp_path: Path) -> None:
    ref, cur = windows
    refused(run("drift", "--reference", str(ref), "--current", str(cur), "--out", str(tmp_path),
                "--window", "99999999999d"), "--window '99999999999d' reaches before the year 1677")  # fmt: skip
