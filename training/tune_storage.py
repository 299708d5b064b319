"""The tuning study's database: which URLs work, and opening one.

`python -m training tune --storage URL` (or TRAINING_TUNE_STORAGE, from the Secret `launch --tune --storage-secret`
names): SQLite on one machine, PostgreSQL or MySQL shared by the cluster's workers. A URL whose driver the image
lacks is refused at start (exit 2); a database that does not answer is exit 69 (rerun once it is back), both
without the password.
"""

from __future__ import annotations

import time
from typing import Any

from training.errors import ConfigError, StudyStorageUnavailable

STORAGE_ENV = "TRAINING_TUNE_STORAGE"
SQLITE_TIMEOUT_S = 60  # concurrent workers on one SQLite file wait for its lock instead of failing
STORAGE_FORMS = (
    "postgresql://USER:PASSWORD@HOST:5432/DATABASE (psycopg 3) or "
    "mysql+pymysql://USER:PASSWORD@HOST:3306/DATABASE (PyMySQL; plain mysql:// asks for mysqlclient, "
    "which the image does not ship), or sqlite:///PATH on one machine; on the cluster it is the key `url` "
    f"of the Secret `launch --tune --storage-secret` names (env {STORAGE_ENV})"
)


def check_storage_url(url: str) -> None:
    """Refuse, before the study opens, a storage URL whose database driver is not installed.

    SQLAlchemy picks the driver from the URL's scheme (postgresql:// -> psycopg, mysql:// -> MySQLdb) and
    imports it only at the first connection: a missing one used to fail every worker at its first storage call
    with Optuna's "Failed to import DB access module", a traceback and exit 1. The URL carries the password:
    it is shown with the password hidden, or not at all.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            "--storage", f"the study storage is not a database URL; use {STORAGE_FORMS}"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    try:
        parsed.get_dialect().import_dbapi()
    except NoSuchModuleError:
        raise ConfigError(
            "--storage", f"{shown}: no database type {parsed.drivername!r}; use {STORAGE_FORMS}"
        ) from None
    except ImportError as exc:
        raise ConfigError(
            "--storage",
            f"{shown}: its driver ({exc.name or exc}) is not installed (the training image has the drivers of "
            f"pyproject.toml's training extra only); use {STORAGE_FORMS}",
        ) from None


def open_storage(url: str) -> Any:
    """Optuna's RDB storage of `url`; StudyStorageUnavailable (exit 69) when its database does not answer."""
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError

    kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except (OperationalError, IntegrityError) as exc:
            # Workers starting together race to create the schema ("table ... already exists") or to stamp
            # its version ("UNIQUE constraint failed: alembic_version"): the loser retries against what the
            # winner made.
            raced = "already exists" in str(exc) or "alembic_version" in str(exc)
            if not raced and isinstance(exc, OperationalError):  # down, refused, no such database
                from sqlalchemy.engine import make_url

                shown = make_url(url).render_as_string(hide_password=True)
                raise StudyStorageUnavailable(shown, exc) from exc
            if not raced or attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")
