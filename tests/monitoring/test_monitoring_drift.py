"""The drift job: Evidently on the training reference vs windows of records, its CLI, JSON and exit codes.

Windows are made the way serving makes records (monitoring.reference.records_for_texts: the bundle's
tokenizer and ONNX model, the same describe()). The reference is the whole validation split (held out from fitting); clean windows are drawn from the test split with
fixed seeds; the shifted window is another domain (Python documentation sentences).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitoring import drift, reference, samples
from monitoring.records import RECORD_FIELDS

WINDOW = 300
# The drift CLI runs as a subprocess and every window goes through ONNX Runtime: not a unit test.
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reference_file(manifest: Path, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "reference.jsonl"
    reference.write_jsonl(reference.build(manifest, tiny_bundle, rows=2000), path)
    return path


def window(texts: list[str], bundle: Path, path: Path) -> Path:
    reference.write_jsonl(reference.records_for_texts(texts, bundle), path)
    return path


def run_drift(
    ref: Path | str, cur: Path | str, out: Path | str, *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "monitoring", "drift", "--reference", str(ref), "--current", str(cur),
         "--out", str(out), *extra],
        capture_output=True, text=True, timeout=300, cwd=cwd,
    )  # fmt: skip


def test_reference_is_the_held_out_validation_split_described_like_serving(reference_file: Path) -> None:
    rows = [json.loads(line) for line in reference_file.read_text().splitlines()]
    assert len(rows) == 2000 and all(tuple(r) == RECORD_FIELDS for r in rows)
    assert all("text" not in r for r in rows) and {r["prediction"] for r in rows} <= {"negative", "positive"}


@pytest.mark.parametrize("seed", range(5))
def test_no_false_alarm_on_clean_windows_of_the_test_split(
    seed: int, manifest: Path, tiny_bundle: Path, reference_frame
) -> None:
    import pandas as pd

    current = pd.DataFrame(
        reference.records_for_texts(samples.clean_texts(manifest, WINDOW, seed), tiny_bundle)
    )
    report = drift.compute(reference_frame, current).report
    assert report["drift_detected"] is False, report["features"]
    assert report["score"] < report["threshold"]


@pytest.fixture(scope="module")
def reference_frame(reference_file: Path):  # noqa: ANN201 - pandas DataFrame
    from monitoring import windows

    return windows.load(str(reference_file))


def test_shifted_window_is_detected_and_reported(
    tiny_bundle: Path, reference_file: Path, tmp_path: Path
) -> None:
    cur = window(samples.shifted_texts(WINDOW, seed=0), tiny_bundle, tmp_path / "shifted.jsonl")
    done = run_drift(reference_file, cur, tmp_path / "out", "--fail-on-drift")
    assert done.returncode == 1 and "drift DETECTED" in done.stdout, done.stdout + done.stderr
    report = json.loads((tmp_path / "out" / "drift.json").read_text())
    assert set(report) == {"drift_detected", "score", "threshold", "features", "reference", "current"}
    assert (
        report["drift_detected"] is True and report["score"] >= report["threshold"] == drift.DEFAULT_THRESHOLD
    )
    assert set(report["features"]) == set(drift.FEATURES)
    assert report["features"]["embedding"]["drifted"] and report["features"]["n_tokens"]["drifted"]
    assert report["reference"]["rows"] == 2000 and report["current"]["rows"] == WINDOW
    html = (tmp_path / "out" / "drift.html").read_text()
    assert "<html" in html.lower() and "n_tokens" in html
    prom = (tmp_path / "out" / "metrics.prom").read_text()
    assert 'ml_drift_detected{model="sentiment"} 1.0' in prom and "ml_drift_score{" in prom


def test_reference_from_a_manifest_and_a_partitioned_window(
    manifest: Path, tiny_bundle: Path, tmp_path: Path
) -> None:
    part = tmp_path / "records" / "date=2026-12-03"
    part.mkdir(parents=True)
    window(samples.shifted_texts(100, seed=1), tiny_bundle, part / "part-a.jsonl")
    done = run_drift(manifest, tmp_path / "records", tmp_path / "out", "--bundle", str(tiny_bundle))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "drift.json").read_text())["drift_detected"] is True


def test_a_manifest_beside_its_export_needs_no_bundle(
    manifest: Path, tiny_bundle: Path, tmp_path: Path
) -> None:
    """`training train --output DIR` writes DIR/manifest.json beside DIR/export/: the README's `pipeline run
    --reference runs/demo/train/manifest.json` passes no --bundle, and its drift step must not fail on that."""
    import shutil

    run = tmp_path / "train"
    shutil.copytree(tiny_bundle, run / "export")
    shutil.copy(manifest, run / "manifest.json")
    part = tmp_path / "records"
    part.mkdir()
    window(samples.shifted_texts(100, seed=1), tiny_bundle, part / "part-a.jsonl")
    done = run_drift(run / "manifest.json", part, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert str(run / "export") in done.stderr  # which bundle it took is said
    assert json.loads((tmp_path / "out" / "drift.json").read_text())["drift_detected"] is True


def test_bad_input_is_a_clear_error_with_exit_2(reference_file: Path, manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    missing = run_drift(reference_file, tmp_path / "nope", out)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run_drift(reference_file, empty, out).returncode == 2
    future = run_drift(reference_file, reference_file, out, "--since", "2999-01-01")
    assert future.returncode == 2 and "empty window" in future.stderr
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"ts": "2026-12-03T00:00:00", "label": "x"}) + "\n")
    schema = run_drift(reference_file, other, out)
    assert schema.returncode == 2 and "lack" in schema.stderr and "n_tokens" in schema.stderr
    no_bundle = run_drift(manifest, reference_file, out)
    assert no_bundle.returncode == 2 and "--bundle" in no_bundle.stderr
    remote = run_drift(
        "s3://bucket/run/manifest.json", reference_file, out
    )  # refused before anything is read
    assert remote.returncode == 2 and "only for a local path" in remote.stderr, remote.stderr


def test_a_bucket_prefix_as_out_gets_the_report_and_nothing_is_written_locally(
    s3_env: str, tiny_bundle: Path, reference_file: Path, tmp_path: Path
) -> None:
    """What the scheduled job does (infra passes its bucket's drift prefix), against a real S3 endpoint."""
    import boto3

    boto3.client("s3", region_name="eu-south-2").create_bucket(
        Bucket="drift-reports", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    cur = window(samples.shifted_texts(WINDOW, seed=0), tiny_bundle, tmp_path / "shifted.jsonl")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = run_drift(reference_file, cur, "s3://drift-reports/drift/", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s3://drift-reports/drift/drift.html" in done.stdout
    assert list(cwd.iterdir()) == []  # was: a local folder named `s3:` under the working directory
    s3 = boto3.client("s3", region_name="eu-south-2")
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="drift-reports")["Contents"])
    assert keys == ["drift/drift.html", "drift/drift.json", "drift/metrics.prom"]
    report = json.loads(s3.get_object(Bucket="drift-reports", Key="drift/drift.json")["Body"].read())
    assert report["drift_detected"] is True
    missing = run_drift(reference_file, cur, "s3://no-such-bucket/drift/", cwd=cwd)
    assert (
        missing.returncode == 2
        and "could not write the report to s3://no-such-bucket/drift/" in missing.stderr
    )


def test_a_bundle_without_a_version_gives_null_not_the_string_none(tiny_bundle: Path, tmp_path: Path) -> None:
    """`export` without --model-version writes "model_version": null; the reference records said "None"."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["model_version"] = None
    (bundle / "metadata.json").write_text(json.dumps(meta))
    (record,) = reference.records_for_texts(["a fine film"], bundle)
    assert record["model_version"] is None and record["model"] == meta["model_name"]


def test_a_champion_trained_before_the_hash_split_gets_its_own_reference(
    manifest: Path, tmp_path: Path
) -> None:
    """A format-1 manifest (no `split`: the position-based shuffle of training before data_split.py) rebuilds
    with that shuffle, not today's default hash split, which held other rows and read as "the data changed"."""
    from training.config import DataConfig
    from training.data import load

    old = load(DataConfig(split="shuffle")).manifest
    assert "split" not in old and old["format_version"] == 1  # what earlier training wrote
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(old))
    texts, _, _ = reference.split_texts(path, "validation")
    assert len(texts) == old["splits"]["validation"]["rows"]
    # A split method this monitoring does not know: a newer training wrote the manifest.
    path.write_text(json.dumps({**json.loads(manifest.read_text()), "split": "stratified"}))
    with pytest.raises(reference.InputError, match="newer training"):
        reference.split_texts(path, "validation")
