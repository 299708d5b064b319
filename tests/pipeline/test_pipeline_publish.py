"""On the cluster the candidate lives on the workflow's own volume, deleted with the workflow: the `images`
step publishes it to the store (a real S3 API: moto's server) before asking the registry, so CI can build its
serving image from there. Against a real OCI registry (distribution's), as test_pipeline_images.py.

Before this test the decision said "CI must build the serving image for this bundle" while the bundle only
existed on a volume about to be deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import images as resolver
from pipeline.cli import main
from tests.pipeline.test_pipeline_images import candidate, push, registry  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration


def test_the_images_step_publishes_the_candidate_where_ci_and_promotion_read_it(
    registry: str,  # noqa: F811 (the imported fixture)
    s3_env: str,
    tmp_path: Path,
) -> None:
    import boto3

    from promotion.evidence import load_evidence

    boto3.client("s3").create_bucket(
        Bucket="pipeline-store", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
    )
    work, sha = candidate(tmp_path)
    (work / "candidate" / "metrics.json").write_text(json.dumps({"test": {"accuracy": 0.9}}))
    (work / "candidate" / "model").mkdir()
    (work / "candidate" / "model" / "model.safetensors").write_bytes(b"weights stay on the volume")
    training = f"{registry}/mlp/training@" + push(registry, "mlp/training", {})
    serving = f"{registry}/mlp/serving@" + push(
        registry, "mlp/serving", {resolver.BUNDLE_LABEL: "0" * 64}, "9"
    )
    argv = ["step", "images", "--work", str(work), "--training-image", training, "--serving-image", serving]
    argv += ["--store", "s3://pipeline-store/models", "--model", "sentiment", "--local", "false"]
    assert main(argv) == 0

    decision = json.loads((work / "decisions" / "images.json").read_text())
    uri = f"s3://pipeline-store/models/sentiment/candidates/{sha[:16]}"
    assert decision["ready"] is False and decision["candidate_uri"] == uri
    assert "CANDIDATE_URI to it" in decision["reasons"][-1] and uri in decision["reasons"][-1]
    keys = {
        o["Key"]
        for o in boto3.client("s3").list_objects_v2(Bucket="pipeline-store", Prefix="models/")["Contents"]
    }
    prefix = f"models/sentiment/candidates/{sha[:16]}/"
    assert keys == {prefix + "metrics.json", prefix + "export/metadata.json"}  # no weights, no checkpoints
    # What main.yml's promote-dev does with CANDIDATE_URI: promotion reads the candidate from the bucket.
    evidence = load_evidence(uri, loadtest=None, policy_report=None, build_record=None)
    assert evidence.bundle_uri == uri + "/export"
