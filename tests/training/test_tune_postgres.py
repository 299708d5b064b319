"""tune on the cluster's study storage: a real PostgreSQL server, and the drivers the training image ships.

`launch --tune` hands every worker an RDB URL (the Secret's `url`, env TRAINING_TUNE_STORAGE). Before this
test neither the virtualenv nor the training image had a PostgreSQL or MySQL driver: SQLAlchemy maps
postgresql:// to psycopg and mysql:// to MySQLdb, imported at the first connection, so every worker died at
its first storage call ("Failed to import DB access module", exit 1). Here two real `python -m training tune
--preset smoke` workers share one study in a throwaway PostgreSQL cluster (tests/postgres.py), each with its
own output folder as a pod has, and a URL no installed driver can open is exit 2 at start, before any folder
or trial.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import socket
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests.postgres import Postgres
from tests.training.test_tune import start_workers, workers_space


def _image_packages() -> set[str]:
    from containers.requirements import path_for

    lines = path_for("training").read_text().splitlines()
    return {
        canonicalize_name(re.split(r"[\[=]", line)[0]) for line in lines if re.match(r"^[A-Za-z0-9]", line)
    }


def test_the_training_image_ships_the_driver_of_every_documented_storage_url() -> None:
    """Each URL form the error message and README document opens with a driver the image installs."""
    from sqlalchemy.engine import make_url

    from training.tune_storage import STORAGE_FORMS

    schemes = set(re.findall(r"\b([a-z][a-z0-9+]*)://(?:USER|/)", STORAGE_FORMS))  # the forms to use
    assert {"postgresql", "mysql+pymysql", "sqlite"} <= schemes, STORAGE_FORMS
    image, owners = _image_packages(), md.packages_distributions()
    for scheme in schemes - {"sqlite"}:  # sqlite3 is the standard library's
        module = make_url(f"{scheme}://user@host/db").get_dialect().import_dbapi()
        dists = {canonicalize_name(d) for d in owners[module.__name__.split(".")[0]]}
        assert dists & image, f"{scheme}:// needs {dists}, not in containers/training/requirements.txt"
    # psycopg alone loads a system libpq; the binary wheel bundles one: the image needs no apt package for it.
    import psycopg

    assert psycopg.pq.__impl__ == "binary"
    assert "psycopg-binary" in image


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://tune:s3cret@db.internal:3306/optuna", "driver (MySQLdb) is not installed"),
        ("postgresql+psycopg2://tune:s3cret@db.internal/optuna", "driver (psycopg2) is not installed"),
        ("postgres://tune:s3cret@db.internal/optuna", "no database type 'postgres'"),
        ("tune:s3cret@db.internal/optuna", "not a database URL"),
    ],
)
def test_a_storage_no_installed_driver_opens_is_exit_2_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, expected: str
) -> None:
    from training.cli import main

    out = tmp_path / "study"
    args = ["tune", "--trials", "2", "--trial-timeout", "60", "--output", str(out), "--storage", url]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert expected in err and "mysql+pymysql://" in err and "postgresql://" in err, err
    assert "s3cret" not in err  # the Secret's password stays out of the pod's log
    assert not out.exists()  # refused before the study folder or any trial


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connections to it are refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("where", ["refused", "no-such-database"])
def test_a_study_storage_that_does_not_answer_is_exit_69_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, where: str
) -> None:
    """A database that is down, or a URL naming one the server lacks, was Optuna's traceback and exit 1."""
    from training.cli import main

    if where == "refused":
        url = f"postgresql://tune:s3cret@127.0.0.1:{_closed_port()}/optuna"
    else:
        server: Postgres = request.getfixturevalue("postgres")
        url = server.url("nope").replace("tests@", "tests:s3cret@")
    out = tmp_path / "study"
    args = ["tune", "--trials", "2", "--trial-timeout", "60", "--output", str(out), "--storage", url]
    assert main(args) == 69
    err = capsys.readouterr().err
    assert "did not answer (OperationalError" in err and "rerun the same command" in err, err
    assert "Traceback" not in err and "s3cret" not in err, err


@pytest.mark.integration
def test_two_workers_share_one_postgresql_study_without_running_a_trial_twice(
    tmp_path: Path, postgres: Postgres
) -> None:
    storage = postgres.create_database("optuna")
    # The URL arrives as on the cluster: from the Secret through TRAINING_TUNE_STORAGE, not a flag.
    env = {**os.environ, "TRAINING_MLFLOW": "0", "TRAINING_TUNE_STORAGE": storage}
    pods = {w: tmp_path / f"pod{w}" for w in ("0", "1")}  # each pod has its own folder
    procs = start_workers(pods, workers_space(tmp_path), env)
    try:
        logs = {w: p.communicate(timeout=240)[0] for w, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for w, p in procs.items():
        assert p.returncode == 0, logs[w][-4000:]
    ran = {
        w: [int(line.split("trial ")[1].split()[0]) for line in log.splitlines() if f"(worker {w}):" in line]
        for w, log in logs.items()
    }
    assert sorted(ran["0"] + ran["1"]) == [0, 1, 2], ran  # each trial ran once, on one worker
    for w, out in pods.items():
        # Each pod writes study.json when it runs out of trials; the other's last trial may still be running.
        states = {t["number"]: t["state"] for t in json.loads((out / "study.json").read_text())["trials"]}
        assert sorted(states) == [0, 1, 2], states
        for n in ran[w]:
            assert states[n] == "COMPLETE", states
            assert json.loads((out / "trials" / str(n) / "metrics.json").read_text())["attempts"] == 1

    # The study lives in PostgreSQL (not in a SQLite file beside it): read there with psql.
    rows = postgres.sql(
        "SELECT t.number, t.state, a.value_json FROM trials t JOIN trial_user_attributes a USING (trial_id) "
        "WHERE a.key = 'worker' ORDER BY t.number",
        "optuna",
    )
    assert {state for _, state, _ in rows} == {"COMPLETE"}, rows
    assert [(int(n), json.loads(v)) for n, _, v in rows] == sorted(
        (n, w) for w in ran for n in ran[w]
    ), rows  # fmt: skip
    assert not any((out / "study.db").exists() for out in pods.values())
