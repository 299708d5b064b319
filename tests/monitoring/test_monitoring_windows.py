"""Windows of inference records: times compare as instants (any offset), bad bounds are exit-2 errors, and a
window reads only the date= partitions it can hold (the scheduled job's --window)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from monitoring import windows
from monitoring.errors import InputError


def record(ts: str) -> dict:
    return {"ts": ts, **{c: 0.5 if c != "prediction" else "positive" for c in windows.REQUIRED}}


def write(folder: Path, day: str, stamps: list[str]) -> None:
    part = folder / f"date={day}"
    part.mkdir(parents=True, exist_ok=True)
    (part / "part-a.jsonl").write_text("".join(json.dumps(record(t)) + "\n" for t in stamps))


@pytest.fixture
def records(tmp_path: Path) -> Path:
    # 10:00:00.123 .. 10:04:00.123 UTC, as serving writes them (offset +00:00, milliseconds).
    write(tmp_path, "2026-12-03", [f"2026-12-03T10:0{m}:00.123+00:00" for m in range(5)])
    return tmp_path


@pytest.mark.parametrize(
    ("since", "until", "rows"),
    [
        ("2026-12-03T10:00:00Z", None, 5),  # was 4: '.123+00:00' < 'Z' as strings
        ("2026-12-03T11:00:00+01:00", None, 5),  # 10:00 UTC; was 0 (an empty window)
        ("2026-12-03T10:00:00", None, 5),  # no offset: UTC
        (None, "2026-12-03T10:00:00Z", 0),  # was 1: kept a record after the end
        ("2026-12-03T10:01:00Z", "2026-12-03T11:03:00+01:00", 2),
    ],
)
def test_bounds_compare_as_instants_in_utc(
    records: Path, since: str | None, until: str | None, rows: int
) -> None:
    if rows == 0:
        with pytest.raises(InputError, match="empty window"):
            windows.load(str(records), since=since, until=until)
    else:
        assert len(windows.load(str(records), since=since, until=until)) == rows


@pytest.mark.parametrize("bad", ["12/03/2026", "yesterday", "2026-13-45T00:00:00Z"])
def test_a_bound_that_is_not_a_time_is_an_error_not_every_record(records: Path, bad: str) -> None:
    with pytest.raises(InputError, match="--since .* is not a time: use ISO 8601"):
        windows.load(str(records), since=bad)


def test_a_window_reads_only_the_partitions_it_can_hold(tmp_path: Path) -> None:
    write(tmp_path, "2026-12-04", ["2026-12-04T23:30:00.000+00:00"])
    write(tmp_path, "2026-12-05", ["2026-12-05T02:00:00.000+00:00"])
    old = tmp_path / "date=2026-11-01"
    old.mkdir()
    (old / "part-a.jsonl").write_text("not json: read only if the old partition is listed\n")
    since = windows.window_start("24h", pd.Timestamp("2026-12-05T03:00:00Z"))
    assert since == "2026-12-04T03:00:00+00:00"
    assert len(windows.load(str(tmp_path), since=since)) == 2
    with pytest.raises(InputError, match="not JSON"):  # without a window every partition is read
        windows.load(str(tmp_path))


@pytest.mark.parametrize("bad", ["24", "0h", "1w", "-3h"])
def test_a_bad_window_is_an_error(bad: str) -> None:
    with pytest.raises(InputError, match="--window"):
        windows.window_start(bad)


def test_cli_refuses_window_with_since_and_bad_times_with_exit_2(records: Path, tmp_path: Path) -> None:
    def drift(*extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "monitoring", "drift", "--reference", str(records), "--current",
               str(records), "--out", str(tmp_path / "out"), *extra]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    both = drift("--window", "24h", "--since", "2026-12-03T10:00:00Z")
    assert both.returncode == 2 and "not both" in both.stderr
    bad = drift("--until", "12/03/2026")
    assert bad.returncode == 2 and "--until '12/03/2026' is not a time" in bad.stderr


@pytest.mark.integration
def test_a_window_lists_only_its_partitions_in_a_real_bucket(s3_env: str) -> None:
    """A year of nightly partitions: the window's listing must not walk every key of the prefix (one request per
    1,000 keys, growing with retention). moto's S3 server is the bucket; botocore's own events see each listing."""
    import boto3
    import fsspec

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="window-listing", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"})
    days = {"2026-11-01": "2026-11-01T10:00:00.000+00:00", "2026-12-04": "2026-12-04T23:30:00.000+00:00",
            "2026-12-05": "2026-12-05T02:00:00.000+00:00", "2026-12-07": "2026-12-07T01:00:00.000+00:00"}  # fmt: skip
    for day, ts in days.items():
        s3.put_object(Bucket="window-listing", Key=f"records/date={day}/part-a.jsonl",
                      Body=(json.dumps(record(ts)) + "\n").encode())  # fmt: skip
    fs, _ = fsspec.core.url_to_fs("s3://window-listing/records")
    fs.invalidate_cache()
    fs.connect()
    listed: list[str] = []

    def seen(parsed: dict, **_: object) -> None:
        listed.extend(o["Key"] for o in parsed.get("Contents", []))

    fs.s3.meta.events.register("after-call.s3.ListObjectsV2", seen)
    try:
        frame = windows.load(
            "s3://window-listing/records", since="2026-12-04T03:00:00Z", until="2026-12-06T00:00:00Z"
        )
    finally:
        fs.s3.meta.events.unregister("after-call.s3.ListObjectsV2", seen)
    assert sorted(frame["ts"]) == [days["2026-12-04"], days["2026-12-05"]]
    assert listed, "the window's partitions were listed"
    assert not [k for k in listed if "2026-11-01" in k or "2026-12-07" in k], listed
