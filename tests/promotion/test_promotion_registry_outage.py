"""Promotion against a real `mlflow server` (the registry a team runs), started by the test.

- The server refuses a version whose files are on this machine: said before anything deploys, with the fix
  (the message used to blame the network: "check that the server answers").
- A database registry (`postgresql://...`, MLflow's own SQL store) that does not answer: exit 2 with the fix, nothing
  written (SQLAlchemy's error used to escape as a traceback with exit 1, a gate's rejection to the workflows).
- The server goes away between a successful deploy and the alias move: the environment now runs the new image,
  so the promotion history (what `rollback` restores from) must say so although the alias could not move, and
  the error names the call that repairs the alias. Before, the history still named the replaced version as
  live, and a later rollback would have "restored" the wrong one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from promotion_fixtures import (
    RecordingDeployer,
    candidate_in_bucket,
    mlflow_server,
    policy_report,
    write_json,
)

from localservers import stop_group
from promotion import promote as ops
from promotion.__main__ import main
from promotion.config import load_config
from promotion.errors import RegistryError
from promotion.evidence import Evidence, load_evidence
from promotion.registry import Registry
from promotion.store import ModelStore
from tests.conftest import free_port


class _RegistryDiesAfterSmoke(RecordingDeployer):
    def __init__(self, server: subprocess.Popen) -> None:
        super().__init__()
        self.server = server

    def smoke(self, image: str) -> bytes | None:
        out = super().smoke(image)
        stop_group(self.server, grace_s=20)
        return out


def _evidence(files: dict[str, Path], candidate: str, tmp: Path) -> Evidence:
    return load_evidence(
        candidate,
        loadtest=str(files["loadtest"]),
        policy_report=str(write_json(tmp / "dev.json", policy_report("dev"))),
        build_record=str(files["build_record"]),
    )


@pytest.mark.integration
def test_an_unreachable_registry_stops_before_anything_is_deployed(
    evidence_files: dict[str, Path], s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    down = Registry(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    store = ModelStore(str(tmp_path / "store"), "m-registry-down")
    calls: list[str] = []
    with pytest.raises(RegistryError, match="could not register a version of m-registry-down"):
        ops.promote(
            _evidence(evidence_files, candidate_in_bucket(evidence_files["candidate"], "down"), tmp_path), load_config(),
            "dev", store=store, registry=down, deployer=RecordingDeployer(calls=calls),
        )  # fmt: skip
    assert calls == []  # was: `pulumi up` ran, then an MlflowException traceback and no record
    assert store.deployed("dev") == []


@pytest.mark.integration
def test_a_tracking_server_registry_local_sources_and_an_outage_after_the_deploy(
    evidence_files: dict[str, Path], s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    pytest.importorskip("uvicorn", reason="`mlflow server` needs uvicorn (in the project's lock)")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    candidate = candidate_in_bucket(evidence_files["candidate"], "run1")
    store = ModelStore(str(tmp_path / "store"), "m-outage")
    server, url = mlflow_server(tmp_path / "mlflow.db")
    try:
        # What the precheck stands for: the server itself refuses a local source.
        client = MlflowClient(tracking_uri=url, registry_uri=url)
        client.create_registered_model("probe")
        with pytest.raises(MlflowException, match="local path as a model version source"):
            client.create_model_version("probe", source=str(evidence_files["candidate"] / "export"))

        local = RecordingDeployer()
        with pytest.raises(RegistryError, match="refuses a version whose files are on this machine"):
            ops.promote(
                _evidence(evidence_files, str(evidence_files["candidate"]), tmp_path), load_config(), "dev",
                store=store, registry=Registry(url), deployer=local,
            )  # fmt: skip
        assert local.calls == [] and store.deployed("dev") == []

        deployer = _RegistryDiesAfterSmoke(server)
        with pytest.raises(RegistryError) as raised:
            ops.promote(
                _evidence(evidence_files, candidate, tmp_path), load_config(), "dev",
                store=store, registry=Registry(url), deployer=deployer,
            )  # fmt: skip
    finally:
        stop_group(server, grace_s=20)
    assert [c.split()[0] for c in deployer.calls] == ["up", "smoke"], raised.value
    live = store.deployed("dev")
    assert [d.version for d in live] == ["1"]  # was: [] while version 1 served dev
    assert live[0].serving_image == deployer.calls[0].split()[1]
    message = str(raised.value)
    assert "dev runs version 1" in message
    assert "set_registered_model_alias('m-outage', 'dev', '1')" in message


def test_a_database_registry_that_does_not_answer_is_exit_2_with_nothing_written(
    evidence_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    pytest.importorskip("psycopg", reason="MLflow's postgresql registry needs a driver")
    import mlflow.store.db.utils

    # MLflow retries a new engine 10 times with backoff (~100 s); once says the same here.
    monkeypatch.setattr(mlflow.store.db.utils, "MAX_RETRY_COUNT", 1)
    uri = f"postgresql://mlflow:secret@127.0.0.1:{free_port()}/mlflow"  # nothing listens there
    store = tmp_path / "store"
    argv = [
        "promote", "--env", "dev", "--store", str(store), "--model-name", "m-db-down", "--registry-uri", uri,
        "--candidate", str(evidence_files["candidate"]), "--loadtest", str(evidence_files["loadtest"]),
        "--policy-report", str(evidence_files["policy_report"]), "--local-run", "--no-images",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    shown = uri.replace(":secret@", ":***@")  # the password stays out of logs and records
    assert (
        f"model registry {shown} could not register a version of m-db-down" in err and "Traceback" not in err
    )
    assert "secret" not in err
    assert [p for p in store.rglob("*") if p.is_file()] == []  # no record, no history, the lock removed
    with pytest.raises(RegistryError, match="could not read m-db-down@dev"):
        Registry(uri).alias_version("m-db-down", "dev")  # rollback's first registry call


@pytest.mark.parametrize("scheme", ["mysql", "mssql+pyodbc", "mysql+nosuchdriver"])
def test_a_database_registry_whose_driver_cannot_load_is_a_registry_error(scheme: str) -> None:
    """SQLAlchemy's default mysql driver (mysqlclient) and pyodbc are not installed here: MLflow met that only on
    first use, as an ImportError through every call (a traceback, exit 1: a gate's rejection to the workflows)."""
    with pytest.raises(RegistryError, match="database driver cannot be loaded") as raised:
        Registry(f"{scheme}://u:secret@127.0.0.1:9/x")
    assert "secret" not in str(raised.value) and "u:***@127.0.0.1:9" in str(raised.value)
