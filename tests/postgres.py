"""A throwaway PostgreSQL cluster the tests start: its own data folder, a free 127.0.0.1 port, its unix socket
in its own folder, trust authentication for one superuser (`tests`), stopped by its postmaster's pid.

    server = start_postgres(tmp_path / "postgres")     # or the `postgres` fixture (tests/training/conftest.py)
    url = server.create_database("study")              # postgresql://tests@127.0.0.1:PORT/study
    ...
    server.stop()

The binaries are Debian's (`apt-get install postgresql`: /usr/lib/postgresql/<major>/bin); without them the
test is skipped saying so. PostgreSQL refuses to run as root (initdb: "cannot be run as root"), and CI runs as
root: there the cluster runs as the unprivileged `postgres` user the Debian package creates (`nobody`
otherwise), through `setpriv`, which execs, so the pid the test holds is the postmaster's. That user cannot
enter pytest's tmp_path (/tmp/pytest-of-root is 0700), so as root the cluster lives in a folder of its own
under the system temp folder, owned by that user and deleted at stop.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from localservers import start_on_free_port

SUPERUSER = "tests"
FAST_SHUTDOWN_S = 20  # SIGINT: fast shutdown (open sessions rolled back); SIGQUIT (immediate) after that


def bin_dir() -> Path | None:
    """The newest installed major's binaries (Debian installs them outside PATH)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name)
    )
    return found[-1].parent if found else None


@dataclass
class Postgres:
    proc: subprocess.Popen
    port: int
    data: Path
    bin: Path
    owned_folder: Path | None = None
    """The folder made for a cluster run as another user (as root): deleted at stop."""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def sql(self, query: str, database: str = "postgres") -> list[list[str]]:
        """Rows of `query`, run by psql (tab-separated): the tests need no Python driver of their own."""
        cmd = [
            str(self.bin / "psql"),
            "-X",
            "-At",
            "-F",
            "\t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            query,
            self.url(database),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql exited {done.returncode}: {done.stderr.strip()}")
        return [line.split("\t") for line in done.stdout.splitlines()]

    def create_database(self, name: str) -> str:
        """A fresh database on this cluster; its URL (the form `tune --storage` takes)."""
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Through the postmaster's own pid: fast shutdown, then immediate, then SIGKILL. Its children are in
        sessions of their own (postgres calls setsid for each), so they are not signalled as a group: the
        postmaster stops them, and a child that finds the postmaster gone exits."""
        for sig, wait_s in ((signal.SIGINT, FAST_SHUTDOWN_S), (signal.SIGQUIT, 10), (signal.SIGKILL, None)):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait_s)
        if self.owned_folder is not None:
            shutil.rmtree(self.owned_folder, ignore_errors=True)


def _run_as() -> tuple[list[str], int, int] | None:
    """As root: the `setpriv` prefix that drops to an unprivileged user, with its uid and gid."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            user = pwd.getpwnam(name)
            prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
            return prefix, user.pw_uid, user.pw_gid
    pytest.skip("running as root with neither a `postgres` nor a `nobody` user: PostgreSQL refuses root")


def start_postgres(folder: Path) -> Postgres:
    """initdb + postgres on a free loopback port; returns once it accepts connections."""
    binaries = bin_dir()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin): apt-get install postgresql")
    folder.mkdir(parents=True, exist_ok=True)
    drop = _run_as()
    prefix: list[str] = []
    owned = None
    base = folder
    if drop is not None:
        prefix, uid, gid = drop
        owned = base = Path(tempfile.mkdtemp(prefix="pg-test-"))
        os.chown(base, uid, gid)
    data, sockets = base / "data", base / "sockets"
    try:
        for made in (data, sockets):
            made.mkdir(mode=0o700)
            if drop is not None:
                os.chown(made, drop[1], drop[2])
        init = subprocess.run(
            [*prefix, str(binaries / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            cwd=base, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if init.returncode != 0:
            raise RuntimeError(
                f"initdb exited {init.returncode}:\n{init.stdout[-2000:]}{init.stderr[-2000:]}"
            )

        def command(port: int) -> list[str]:
            # fsync off: a test cluster is thrown away, durability only costs time on a shared disk.
            return [*prefix, str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
                    "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off"]  # fmt: skip

        def ready(port: int) -> bool:
            probe = [
                str(binaries / "pg_isready"),
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                SUPERUSER,
                "-d",
                "postgres",
            ]
            return subprocess.run(probe, timeout=10).returncode == 0

        # postgres logs "could not bind IPv4 address ...: Address already in use" on a lost port: picked again.
        proc, port = start_on_free_port(command, folder / "postgres.log", "postgres", ready)
    except BaseException:
        if owned is not None:
            shutil.rmtree(owned, ignore_errors=True)
        raise
    return Postgres(proc, port, data, binaries, owned)
