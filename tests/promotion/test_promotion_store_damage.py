"""A damaged store and a registry that lost a version, through the real CLI (`python -m promotion`).

- A history or record that is not valid JSON, or a hand-edited record without its lineage, is bad input:
  exit 2 naming the file. It used to be a traceback with exit 1, which the workflows read as "a gate rejected
  the candidate".
- `rollback` to a version deleted in a real `mlflow server`: refused before anything is written. It used to
  write a rollback record (decision "rollback") for a rollback that never happened, then fail at the alias,
  telling the user to rerun, and every rerun added another such record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from promotion_fixtures import (
    candidate_in_bucket,
    make_candidate,
    mlflow_server,
)

from localservers import stop_group

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    return subprocess.run(
        [sys.executable, "-m", "promotion", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def promote(files: dict[str, Path], candidate: str, common: list[str]) -> None:
    done = cli(
        "promote", "--env", "dev", *common, "--candidate", candidate, "--loadtest", str(files["loadtest"]),
        "--policy-report", str(files["policy_report"]), "--build-record", str(files["build_record"]),
        "--deploy-command", "true", "--smoke-command", "true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.integration
def test_a_damaged_history_or_record_is_bad_input(evidence_files: dict[str, Path], tmp_path: Path) -> None:
    for package in ("sqlalchemy", "alembic", "sqlparse"):
        pytest.importorskip(package, reason="MLflow's sqlite registry needs sqlalchemy, alembic, sqlparse")
    store = tmp_path / "store"
    common = ["--store", str(store), "--model-name", "m", "--registry-uri", f"sqlite:///{tmp_path}/mlflow.db"]
    promote(evidence_files, str(evidence_files["candidate"]), common)
    history = store / "m" / "environments" / "dev.json"
    (record,) = (store / "m" / "records").glob("*-promote-*.json")
    evaluate = ["evaluate", "--env", "dev", *common, "--candidate", str(evidence_files["candidate"]),
                "--loadtest", str(evidence_files["loadtest"]), "--no-images", "--local-run"]  # fmt: skip

    good = history.read_text()
    history.write_text(good[: len(good) // 2])  # a write cut short
    for args in (["history", "--env", "dev", *common], evaluate):
        done = cli(*args)
        assert done.returncode == 2, done.stderr  # was 1, with a JSONDecodeError traceback
        assert f"promotion history {history} is not valid JSON" in done.stderr
        assert "Traceback" not in done.stderr
    history.write_text(good)

    edited = json.loads(record.read_text())
    del edited["lineage"]
    record.write_text(json.dumps(edited))
    done = cli(*evaluate)
    assert done.returncode == 2, done.stderr  # was 1, with KeyError: 'lineage'
    assert f"promotion record {record} has no `lineage` object" in done.stderr
    assert history.read_text() == good


@pytest.mark.integration
@pytest.mark.slow
def test_rollback_to_a_version_deleted_in_the_registry_writes_nothing(
    evidence_files: dict[str, Path], s3_env: str, tmp_path: Path
) -> None:
    from mlflow import MlflowClient

    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    store = tmp_path / "store"
    first = candidate_in_bucket(evidence_files["candidate"], "deleted-1")
    second = candidate_in_bucket(make_candidate(tmp_path / "run2", accuracy=0.885), "deleted-2")
    server, url = mlflow_server(tmp_path / "mlflow.db")
    try:
        common = ["--store", str(store), "--model-name", "m-deleted", "--registry-uri", url]
        promote(evidence_files, first, common)
        promote(evidence_files, second, common)
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        client.delete_model_version("m-deleted", "1")  # someone tidied the registry up
        records = sorted(p.name for p in (store / "m-deleted" / "records").iterdir())
        history = (store / "m-deleted" / "environments" / "dev.json").read_text()

        done = cli("rollback", "--env", "dev", *common, "--reason", "p99 regression")
        assert done.returncode == 2, done.stderr
        assert "cannot roll dev back to version 1 of m-deleted: it no longer exists" in done.stderr
        assert f"--candidate {first}" in done.stderr  # how to serve it again
        # was: a rollback record written, then "could not point m-deleted@dev at version 1 ... then rerun"
        assert sorted(p.name for p in (store / "m-deleted" / "records").iterdir()) == records
        assert (store / "m-deleted" / "environments" / "dev.json").read_text() == history
        assert client.get_model_version_by_alias("m-deleted", "dev").version == "2"
    finally:
        stop_group(server, grace_s=20)


@pytest.mark.parametrize("command", ["history", "promote"])
def test_a_store_that_cannot_be_read_or_written_is_exit_2_naming_it(
    command: str, evidence_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store path that cannot be used (here under a file; a read-only folder or a denied bucket alike): a
    NotADirectoryError traceback with exit 1, which `pipeline step promote` recorded as "promotion rejected by
    its gates"."""
    from promotion.__main__ import main

    (tmp_path / "a-file").write_text("")
    store = tmp_path / "a-file" / "store"
    args = {
        "history": ["history", "--env", "dev"],
        "promote": ["promote", "--env", "dev", "--candidate", str(evidence_files["candidate"]), "--loadtest",
                    str(evidence_files["loadtest"]), "--policy-report", str(evidence_files["policy_report"]),
                    "--no-images", "--local-run", "--registry-uri", f"sqlite:///{tmp_path}/mlflow.db"],
    }[command]  # fmt: skip
    assert main([*args, "--store", str(store), "--model-name", "m"]) == 2
    err = capsys.readouterr().err
    assert "promotion: NotADirectoryError" in err and f"check that {store}" in err, err
    assert not (tmp_path / "mlflow.db").exists()  # promote stopped before the registry
