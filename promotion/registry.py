"""The MLflow model registry behind one small adaptor (MLflow is imported lazily here only).

One registered model (default `sentiment`), one version per promoted candidate, and
one alias per environment (`dev`, `staging`, `prod`) naming the version it serves.
The default store is a local sqlite file: no server to run. MLflow's sqlite store
needs sqlalchemy, alembic and sqlparse, which `mlflow-skinny` does not pull in;
the file store (`file:` URIs) is in maintenance mode in MLflow 3 and refused
unless MLFLOW_ALLOW_FILE_STORE=true.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from promotion.errors import RegistryError

DEFAULT_REGISTRY_URI = "sqlite:///runs/registry/mlflow.db"
SQL_PACKAGES = ("sqlalchemy", "alembic", "sqlparse")
_DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
# Registries behind MLflow's REST API (a tracking server, Databricks) rather than a database this process opens.
_SERVER_SCHEMES = ("http", "https", "databricks")


def default_registry_uri() -> str:
    """MLflow's own variables win (a team's tracking server), else the local sqlite file."""
    return (
        os.environ.get("MLFLOW_REGISTRY_URI") or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_REGISTRY_URI
    )


def without_password(uri: str) -> str:
    """The URI as messages, logs and records show it: a database registry's URI carries its password
    (postgresql://user:PASSWORD@host/db), which must not reach a pod's log, a CI log or a promotion record."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    return urllib.parse.urlunsplit(
        parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rsplit('@', 1)[1]}")
    )


def _database_driver_problem(uri: str) -> str | None:
    """Why SQLAlchemy cannot load the URI's database driver (None: it can). MLflow meets a missing driver only on
    first use, as an ImportError through every call: a traceback with exit 1, read as a gate's rejection."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ImportError, ArgumentError) as exc:
        return str(exc)
    return None


class Registry:
    def __init__(self, uri: str | None = None) -> None:
        self.uri = uri or default_registry_uri()
        self.shown_uri = without_password(self.uri)
        scheme = self.uri.split(":", 1)[0].split("+", 1)[0] if ":" in self.uri else ""
        if scheme in _DATABASE_SCHEMES:
            missing = [p for p in SQL_PACKAGES if importlib.util.find_spec(p) is None]
            if missing:
                raise RegistryError(
                    f"MLflow's {scheme} registry needs {', '.join(missing)} (not part of mlflow-skinny): "
                    f"`pip install {' '.join(missing)}`, or set MLFLOW_REGISTRY_URI to a tracking server"
                )
            problem = _database_driver_problem(self.uri)
            if problem:
                raise RegistryError(
                    f"model registry {self.shown_uri}: its database driver cannot be loaded ({problem}). Install "
                    "the driver the URI names (psycopg for postgresql://, mysqlclient for mysql://, or name an "
                    "installed one: mysql+pymysql://), or set MLFLOW_REGISTRY_URI to a tracking server"
                )
        # Created by the first write only: a command that reads (rollback's checks) or is refused must not leave an
        # empty registry behind, which the next read would take for one whose versions were deleted.
        self._sqlite_file = Path(self.uri.removeprefix("sqlite:///")) if scheme == "sqlite" else None
        self._mlflow: Any = None

    def exists(self) -> bool:
        """False for a sqlite registry whose file is not there yet (nothing was ever registered in it)."""
        return self._sqlite_file is None or self._sqlite_file.exists()

    @property
    def _client(self) -> Any:
        """Created on first use: importing MLflow and migrating a new database take seconds."""
        if self._mlflow is None:
            from mlflow import MlflowClient

            if self._sqlite_file is not None:
                self._sqlite_file.parent.mkdir(parents=True, exist_ok=True)

            # MLflow logs each schema migration at INFO on first use of a new database.
            for name in ("mlflow", "alembic"):
                logging.getLogger(name).setLevel(logging.WARNING)
            self._mlflow = MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
        return self._mlflow

    def _ensure_model(self, name: str) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self._client.get_registered_model(name)
        except MlflowException:
            self._client.create_registered_model(
                name, description="Sentiment classifier promoted by `python -m promotion` (see its records)."
            )

    def register(self, name: str, *, source: str, tags: dict[str, str], description: str) -> str:
        """A new version of `name` whose files are at `source`; returns the version number as a string."""
        if self.uri.split(":", 1)[0] in _SERVER_SCHEMES and (
            "://" not in source or source.startswith("file:")
        ):
            # A tracking server answers INVALID_PARAMETER_VALUE for a local source outside a run's artifacts
            # (mlflow/server/handlers.py, _validate_source_run): said here with the fix, before anything deploys.
            raise RegistryError(
                f"model registry {self.shown_uri} is a tracking server: it refuses a version whose files are on this "
                f"machine ({source}). Give --candidate from object storage (the training run's bucket: s3://, "
                "gs://, abfss://), or use a sqlite registry (--registry-uri sqlite:///PATH) for a local try"
            )
        with self._reachable("register a version of " + name):
            self._ensure_model(name)
            version = self._client.create_model_version(
                name, source=source, tags=tags, description=description
            )
        return str(version.version)

    def set_alias(self, name: str, alias: str, version: str) -> None:
        with self._reachable(f"point {name}@{alias} at version {version}"):
            self._client.set_registered_model_alias(name, alias, version)

    @contextlib.contextmanager
    def _reachable(self, what: str) -> Iterator[None]:
        """MLflow's errors (an unreachable server, a refused call) as RegistryError: exit 2, never a traceback.

        A database registry (`postgresql://`, `mysql://`, `sqlite:` on a disk gone) that does not answer raises
        SQLAlchemy's errors through MLflow, not MlflowException: that was a traceback with exit 1, which the
        workflows and the pipeline read as a gate's rejection."""
        from mlflow.exceptions import MlflowException

        unreachable: tuple[type[Exception], ...] = (MlflowException, OSError)
        with contextlib.suppress(ImportError):  # installed with every database registry (SQL_PACKAGES)
            from sqlalchemy.exc import SQLAlchemyError

            unreachable += (SQLAlchemyError,)
        try:
            yield
        except unreachable as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise RegistryError(
                f"model registry {self.shown_uri} could not {what}: {first}. Check MLFLOW_TRACKING_URI / "
                "--registry-uri and that the server answers, then rerun"
            ) from exc

    def has_version(self, name: str, version: str) -> bool:
        """Whether `name` version `version` still exists (a version can be deleted in the registry's UI)."""
        from mlflow.exceptions import MlflowException

        with self._reachable(f"look up version {version} of {name}"):
            try:
                self._client.get_model_version(name, version)
            except MlflowException as exc:
                if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                    return False
                raise
        return True

    def alias_version(self, name: str, alias: str) -> str | None:
        from mlflow.exceptions import MlflowException

        with self._reachable(f"read {name}@{alias}"):
            try:
                return str(self._client.get_model_version_by_alias(name, alias).version)
            except MlflowException:
                return None

    def version_tags(self, name: str, version: str) -> dict[str, Any]:
        with self._reachable(f"read the tags of version {version} of {name}"):
            return dict(self._client.get_model_version(name, version).tags)

    def set_version_tag(self, name: str, version: str, key: str, value: str) -> None:
        with self._reachable(f"tag version {version} of {name}"):
            self._client.set_model_version_tag(name, version, key, value)
