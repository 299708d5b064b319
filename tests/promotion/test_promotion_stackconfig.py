"""Setting a committed stack's serving image to a digest, and rollback pointing it back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from promotion_fixtures import make_candidate, write_json

from promotion.__main__ import main
from promotion.errors import PromotionError
from promotion.stackconfig import set_serving_image

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "123456789012.dkr.ecr.eu-south-2.amazonaws.com/serving@sha256:" + "ab" * 32


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_only_the_image_line_changes(stack: str) -> None:
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
    after = set_serving_image(text, IMAGE)
    config = yaml.safe_load(after)["config"]
    assert config["eu-ml-platform:serving"]["image"] == IMAGE
    changed = [(a, b) for a, b in zip(text.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].strip() == f"image: {IMAGE}"
    assert set_serving_image(after, IMAGE) == after  # idempotent


def test_refuses_tags_and_missing_blocks() -> None:
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    with pytest.raises(PromotionError, match="pinned by digest"):
        set_serving_image(text, "registry/serving:latest")
    with pytest.raises(PromotionError, match="no `<project>:serving:` block"):
        set_serving_image("config:\n  eu-ml-platform:region: eu-south-2\n", IMAGE)
    with pytest.raises(PromotionError, match="no `image:` key"):
        set_serving_image("config:\n  p:serving:\n    minReplicas: 1\n  p:other: 2\n", IMAGE)


def test_promote_then_rollback_moves_the_stack_image(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    for package in ("sqlalchemy", "alembic", "sqlparse"):
        pytest.importorskip(package, reason="MLflow's sqlite registry needs sqlalchemy, alembic, sqlparse")
    stack_file = tmp_path / "Pulumi.dev.yaml"
    shutil.copy(ROOT / "Pulumi.dev.yaml", stack_file)
    common = ["--env", "dev", "--store", str(tmp_path / "store"), "--model-name", "m-stack",
              "--registry-uri", f"sqlite:///{tmp_path}/mlflow.db", "--stack-config", str(stack_file)]  # fmt: skip

    def promote(candidate: Path, digest: str) -> str:
        record = json.loads(evidence_files["build_record"].read_text())
        record["images"]["serving"]["digest"] = digest
        write_json(evidence_files["build_record"], record)
        args = ["promote", *common, "--candidate", str(candidate), "--loadtest", str(evidence_files["loadtest"]),
                "--policy-report", str(evidence_files["policy_report"]),
                "--build-record", str(evidence_files["build_record"]),
                "--deploy-command", "true", "--smoke-command", "true"]  # fmt: skip
        assert main(args) == 0
        return yaml.safe_load(stack_file.read_text())["config"]["eu-ml-platform:serving"]["image"]

    first = promote(evidence_files["candidate"], "sha256:" + "1" * 64)
    second = promote(make_candidate(tmp_path / "run2", accuracy=0.885), "sha256:" + "9" * 64)
    assert first.endswith("1" * 64) and second.endswith("9" * 64)
    assert main(["rollback", *common, "--reason", "bad p99 in dev"]) == 0
    assert yaml.safe_load(stack_file.read_text())["config"]["eu-ml-platform:serving"]["image"] == first


@pytest.mark.parametrize("name", ["Pulumi.prod.yaml", "missing/Pulumi.dev.yaml", "broken/Pulumi.dev.yaml"])
def test_a_wrong_stack_config_is_refused_before_anything_moves(
    evidence_files: dict[str, Path], tmp_path: Path, name: str
) -> None:
    # Was: dev's digest written into Pulumi.prod.yaml (exit 0: a pull request taking it to prod without staging
    # or an approval), or a traceback (exit 1) once the alias had moved and the history named the new version.
    stack_file = tmp_path / name
    if name.startswith("broken/"):
        stack_file.parent.mkdir()
        stack_file.write_text("config:\n  eu-ml-platform:serving: [\n")
    elif not name.startswith("missing/"):
        shutil.copy(ROOT / name, stack_file)
    before = stack_file.read_text() if stack_file.exists() else None
    store = tmp_path / "store"
    args = ["promote", "--env", "dev", "--store", str(store), "--model-name", "m-wrong-stack",
            "--registry-uri", f"sqlite:///{tmp_path}/mlflow.db", "--stack-config", str(stack_file),
            "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
            "--policy-report", str(evidence_files["policy_report"]),
            "--build-record", str(evidence_files["build_record"]),
            "--deploy-command", "true", "--smoke-command", "true"]  # fmt: skip
    assert main(args) == 2
    assert (stack_file.read_text() if stack_file.exists() else None) == before
    assert not store.exists()  # no record, no history, nothing registered under it
