"""A promotion publishes the promoted run's drift reference where the environment's drift job reads it
(`--drift-reference`, promotion/drift_reference.py).

The drift job refuses (exit 2) a window of another model than its reference's; nothing rebuilt the stack's
`reference/` prefix on a promotion, so after each one the scheduled job failed until someone rebuilt it by hand.

Real: the runs are a real ONNX bundle in the export contract (the rescore tests' bag-of-words model and CSV data,
split by training.data, whose manifests monitoring.reference reloads and checks), promoted by the CLI into a local
store and a sqlite MLflow registry; the reference is monitoring's own build, judged by `python -m monitoring drift`'s
entry point; the bucket is moto's S3 server.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from promotion_fixtures import (
    RecordingDeployer,
    build_record,
    evidence_of,
    loadtest,
    metrics,
    policy_report,
    write_json,
)

from promotion import promote as ops
from promotion.__main__ import main
from promotion.config import load_config
from promotion.registry import Registry
from promotion.store import ModelStore
from tests.pipeline.test_pipeline_champion_rescore import world  # noqa: F401 - a fixture

pytestmark = pytest.mark.integration
BUNDLE_LABEL = "eu.ml-platform.bundle.metadata-sha256"


def run_of(folder: Path, world: dict[str, Any], version: str, *, accuracy: float = 0.88) -> Path:  # noqa: F811
    """A training run on data B as `training train --output` leaves it: manifest, metrics, cost, export/ (the real
    bundle, exported as model version `version`)."""
    b = world["b"]
    shutil.copytree(world["bundle"], folder / "export")
    meta = json.loads((folder / "export" / "metadata.json").read_text())
    meta.update(model_version=version, dataset_manifest_sha256=b.manifest["sha256"])
    write_json(folder / "export" / "metadata.json", meta)
    write_json(folder / "manifest.json", b.manifest)
    write_json(folder / "metrics.json", metrics(accuracy) | {"dataset_manifest_sha256": b.manifest["sha256"]})
    write_json(folder / "cost.json", {"instance_type": "local-cpu", "hours": 0.01, "usd": 0.0})
    return folder


def served_records(run: Path, world: dict[str, Any]) -> list[dict[str, Any]]:  # noqa: F811
    """What serving writes for this run's model: its bundle on data B's test texts."""
    from monitoring.reference import records_for_texts

    return records_for_texts(world["b"].test.texts, run / "export")


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def inputs(tmp_path: Path, registry: Registry) -> dict[str, str]:
    return {
        "loadtest": str(write_json(tmp_path / "loadtest.json", loadtest())),
        "policy": str(write_json(tmp_path / "policy" / "dev.json", policy_report("dev"))),
        "registry": registry.uri,
        "store": str(tmp_path / "store"),
    }


def promote(inputs: dict[str, str], run: Path, model: str, *extra: str) -> int:
    return main([
        "promote", "--env", "dev", "--candidate", str(run), "--loadtest", inputs["loadtest"],
        "--policy-report", inputs["policy"], "--local-run", "--no-images", "--store", inputs["store"],
        "--model-name", model, "--registry-uri", inputs["registry"], *extra,
    ])  # fmt: skip


def versions(path: Path) -> set[Any]:
    return {json.loads(line)["model_version"] for line in path.read_text().splitlines()}


def attachment(record_uri: str) -> dict[str, Any] | None:
    """The note a written reference leaves beside its record (drift_reference.ATTACHMENT), or None."""
    path = Path(record_uri.removesuffix(".json") + ".drift-reference.json")
    return json.loads(path.read_text()) if path.exists() else None


def record_of(store: str, model: str, record_id: str) -> str:
    return str(Path(store) / model / "records" / f"{record_id}.json")


def drift_rc(reference: str, current: Path, out: Path) -> int:
    from monitoring.cli import main as monitoring_main

    return monitoring_main(["drift", "--reference", reference, "--current", str(current), "--out", str(out)])


def test_promote_writes_the_promoted_runs_reference_that_the_drift_job_accepts(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    inputs: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    old, new = run_of(tmp_path / "run6", world, "6"), run_of(tmp_path / "run7", world, "7")
    prefix = tmp_path / "models" / "reference"
    from monitoring.reference import build

    write_records(
        prefix / "reference.jsonl", build(old / "manifest.json", old / "export")
    )  # the last promotion's
    window = write_records(tmp_path / "inference" / "part.jsonl", served_records(new, world))
    # What the scheduled job met after a promotion: the new model's records against the old reference.
    assert drift_rc(f"{prefix}/", window, tmp_path / "drift-before") == 2
    assert "model_version=7" in capsys.readouterr().err

    assert promote(inputs, new, "m-ref", "--drift-reference", f"{prefix}/") == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    written = prefix / "reference.jsonl"
    assert versions(written) == {"7"} and [p.name for p in prefix.iterdir()] == ["reference.jsonl"]
    assert f"drift reference: {written} (" in out and "model_version=7" in out
    # Said beside the record, which is written before the reference (records are never rewritten).
    record_uri = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("record: "))
    assert "drift_reference" not in json.loads(Path(record_uri).read_text())
    named = attachment(record_uri)
    assert named["uri"] == str(written) and named["model_version"] == "7" and named["by"] == "promote"
    assert (
        named["rows"]
        == len(written.read_text().splitlines())
        == world["b"].manifest["splits"]["validation"]["rows"]
    )
    assert drift_rc(f"{prefix}/", window, tmp_path / "drift-after") == 0, capsys.readouterr().err


def test_a_refused_or_failed_promotion_leaves_the_previous_reference(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    inputs: dict[str, str],
    registry: Registry,
) -> None:
    reference = tmp_path / "reference.jsonl"
    reference.write_bytes(b'{"model": "bag-of-words", "model_version": "6"}\n')
    before = reference.read_bytes()
    weak = run_of(tmp_path / "weak", world, "8", accuracy=0.50)  # loses to the TF-IDF baseline
    assert promote(inputs, weak, "m-refused", "--drift-reference", str(reference)) == 1
    assert reference.read_bytes() == before

    # A deployable promotion whose smoke check fails is rolled back: the reference stays too.
    deployable = run_of(tmp_path / "deployable", world, "9")
    built = build_record()
    built["images"]["serving"]["dataset_manifest_sha256"] = world["b"].manifest["sha256"]
    built["images"]["serving"]["labels"][BUNDLE_LABEL] = hashlib.sha256(
        (deployable / "export" / "metadata.json").read_bytes()
    ).hexdigest()
    files = {"candidate": deployable, "loadtest": Path(inputs["loadtest"]), "policy_report": Path(inputs["policy"]),
             "build_record": write_json(tmp_path / "build-record.json", built)}  # fmt: skip
    outcome = ops.promote(
        evidence_of(files), load_config(), "dev", store=ModelStore(inputs["store"], "m-failed"), registry=registry,
        deployer=RecordingDeployer(fail="smoke"), drift_reference_to=str(reference),
    )  # fmt: skip
    assert outcome.record["decision"] == "deploy_failed", outcome.record["reasons"]
    assert "drift_reference" not in outcome.record
    assert reference.read_bytes() == before


def test_a_reference_that_cannot_be_written_keeps_the_promotion_and_names_the_command(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    inputs: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "refs"
    blocker.write_text("a file where the folder should be")
    location = f"{blocker}/dev/"
    assert (
        promote(inputs, run_of(tmp_path / "run7", world, "7"), "m-unwritable", "--drift-reference", location)
        == 2
    )
    err = capsys.readouterr().err
    assert "dev was promoted (record " in err and "Nothing was undone" in err
    # Its record, never rewritten, does not claim a reference that was never written; nothing beside it does either.
    record_uri = record_of(
        inputs["store"], "m-unwritable", err.split("dev was promoted (record ", 1)[1].split(")")[0]
    )
    assert (
        "drift_reference" not in json.loads(Path(record_uri).read_text()) and attachment(record_uri) is None
    )
    assert main(["history", "--env", "dev", "--store", inputs["store"], "--model-name", "m-unwritable"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "dev serves: 1"
    command = shlex.split(err.rsplit("write the reference: ", 1)[1].strip())
    assert command[:4] == ["python", "-m", "promotion", "reference"]

    blocker.unlink()
    assert main(command[3:]) == 0, capsys.readouterr().err
    assert versions(blocker / "dev" / "reference.jsonl") == {"7"}
    assert (attachment(record_uri) or {}).get("by") == "reference"


def test_rollback_restores_the_reference_of_the_version_it_goes_back_to(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    inputs: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    written = tmp_path / "reference" / "reference.jsonl"
    flag = ["--drift-reference", str(written.parent)]
    run7 = run_of(tmp_path / "run7", world, "7")
    assert promote(inputs, run7, "m-rollback", *flag) == 0
    # Ctrl-C once the alias moved: held until the promotion is whole, the reference included (it was delivered
    # before the reference was written, and nothing said so).
    set_alias = Registry.set_alias
    # Ctrl-C as a terminal delivers it: Python's own handler (a test earlier in the suite may leave another one).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))

    def interrupted_after(self: Registry, *args: Any) -> None:
        set_alias(self, *args)
        signal.raise_signal(signal.SIGINT)

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(Registry, "set_alias", interrupted_after)
        promote(inputs, run_of(tmp_path / "run8", world, "8"), "m-rollback", *flag)
    assert versions(written) == {"8"}
    common = ["--env", "dev", "--store", inputs["store"], "--model-name", "m-rollback"]
    assert main(["rollback", *common, "--registry-uri", inputs["registry"], "--reason", "p99", *flag]) == 0
    assert versions(written) == {"7"}
    out = capsys.readouterr().out
    record_uri = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("record: ")][-1]
    assert (attachment(record_uri) or {}).get("model_version") == "7"

    # A rollback held by Ctrl-C the same way writes its reference before the interruption ends it.
    assert promote(inputs, run_of(tmp_path / "run9", world, "9"), "m-rollback", *flag) == 0
    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(Registry, "set_alias", interrupted_after)
        main(["rollback", *common, "--registry-uri", inputs["registry"], "--reason", "p99", *flag])
    assert versions(written) == {"7"}

    # run7's folder re-exported as another version since: its reference would be written in version 7's name.
    meta = json.loads((run7 / "export" / "metadata.json").read_text())
    write_json(run7 / "export" / "metadata.json", meta | {"model_version": "9"})
    assert main(["reference", *common, *flag]) == 2
    err = capsys.readouterr().err
    assert f"{run7 / 'export' / 'metadata.json'} sha256" in err and "Restore that run" in err, err
    assert versions(written) == {"7"}


def test_a_reference_that_cannot_be_built_says_what_promotion_can_do(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
) -> None:
    import csv

    from promotion import drift_reference
    from promotion.errors import PromotionError

    # The run's data changed since training (its labels): monitoring advises `--data-encoding`, a flag promotion
    # does not have.
    run = run_of(tmp_path / "run", world, "7")
    source = Path(world["b"].manifest["source"]["uri"].removeprefix("file://"))
    rows = list(csv.reader(source.open(encoding="utf-8")))
    flipped = {"negative": "positive", "positive": "negative"}
    changed = tmp_path / "changed.csv"
    with changed.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([rows[0], *([t, flipped.get(y, y)] for t, y in rows[1:])])
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["source"]["uri"] = str(changed)
    write_json(run / "manifest.json", manifest)
    with pytest.raises(PromotionError) as refused:
        drift_reference.prepare(str(tmp_path / "ref"), candidate=str(run), bundle=str(run / "export"))
    message = str(refused.value)
    assert "pass --data-encoding" not in message, message
    assert "python -m monitoring reference --manifest" in message and "--data-encoding ENCODING" in message


@pytest.mark.usefixtures("s3_env")
def test_the_reference_goes_to_the_stacks_bucket_prefix(
    tmp_path: Path,
    world: dict[str, Any],  # noqa: F811 - the fixture imported above
    inputs: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import boto3

    boto3.client("s3").create_bucket(
        Bucket="models-ref", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    rc = promote(
        inputs,
        run_of(tmp_path / "run7", world, "7"),
        "m-s3",
        "--drift-reference",
        "s3://models-ref/reference/",
    )
    assert rc == 0, capsys.readouterr().err
    body = boto3.client("s3").get_object(Bucket="models-ref", Key="reference/reference.jsonl")["Body"].read()
    assert {json.loads(line)["model_version"] for line in body.decode().splitlines()} == {"7"}
