"""One promotion or rollback of an environment at a time (promotion/lock.py), on the stores users give.

Two promotions of dev at once (CI's deploy group and the cluster's retraining pipeline share no concurrency
group) both judged against the same champion and both deployed; the history's read-modify-write could lose one's
event. The second must be refused while the first holds the environment, on a local folder, on S3 (moto's server,
which enforces `If-None-Match: *` like S3) and on Azure Blob (Azurite); a holder killed outright leaves a lock that
`unlock` removes only with its id.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from promotion_fixtures import RecordingDeployer, evidence_of, make_candidate, promotion_cli

from localservers import stop_group
from promotion import promote as ops
from promotion import rollback as rollback_ops
from promotion.config import load_config
from promotion.evidence import read_bytes
from promotion.lock import LockHeld, lock_uri
from promotion.registry import Registry
from promotion.store import ModelStore
from tests.emulators import start_azurite, start_gcs
from tests.httpd import http_server

CFG = load_config()


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    proc, env = start_azurite(tmp_path_factory.mktemp("azurite"))
    try:
        yield env
    finally:
        stop_group(proc, grace_s=2)  # Azurite ignores SIGTERM: the 10 s default would only wait for SIGKILL


@pytest.fixture
def store_root(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    import fsspec

    if request.param == "local":
        yield str(tmp_path / "store")
        return
    if request.param == "s3":
        request.getfixturevalue("s3_env")
        import boto3

        boto3.client("s3").create_bucket(
            Bucket="locks", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
        )
        yield "s3://locks/store"
    else:
        for key, value in request.getfixturevalue("azurite").items():
            monkeypatch.setenv(key, value)
        container = f"locks{os.getpid()}{tmp_path.name[-6:].lower().replace('_', '')}"
        fsspec.filesystem("az").mkdir(container)
        yield f"az://{container}/store"
    # A cached client would outlive the server's environment (the next test's server has another port).
    fsspec.get_filesystem_class(request.param).clear_instance_cache()


class BlockingDeployer(RecordingDeployer):
    """`pulumi up` that takes its time: holds the promotion inside the deploy until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.deploying = threading.Event()
        self.go_on = threading.Event()

    def up(self, image: str) -> None:
        self.deploying.set()
        assert self.go_on.wait(60), "the test never let the deploy finish"
        super().up(image)


@pytest.mark.parametrize("store_root", ["local", "s3", "az"], indirect=True)
def test_a_second_promotion_of_the_environment_is_refused_while_one_runs(
    store_root: str, evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    model = "m-lock-" + (store_root.split("://")[0] if "://" in store_root else "local")
    store = ModelStore(store_root, model)
    slow = BlockingDeployer()
    outcome: dict[str, object] = {}

    def first() -> None:
        try:
            outcome["first"] = ops.promote(
                evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, deployer=slow
            )
        except BaseException as exc:  # surfaced by the assertions below
            outcome["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    try:
        while not slow.deploying.wait(0.1):
            assert thread.is_alive(), f"the first promotion never reached its deploy: {outcome}"
        held = json.loads(read_bytes(lock_uri(store_root, model, "dev")) or b"{}")
        assert held["operation"] == "promote" and held["pid"] == os.getpid()

        better = make_candidate(tmp_path / "run2", accuracy=0.9)
        with pytest.raises(LockHeld, match=r"another promotion or rollback of dev is running") as refused:
            ops.promote(
                evidence_of(evidence_files, better), CFG, "dev", store=store, registry=registry, deployer=OK()
            )
        assert f"--lock-id {held['lock_id']}" in str(refused.value) and "Nothing was changed" in str(
            refused.value
        )
        with pytest.raises(LockHeld):
            rollback_ops.rollback("dev", store=store, registry=registry, reason="races the promotion")
        # The refused run changed nothing: no record, no event, no alias.
        assert store.events("dev") == [] and registry.alias_version(model, "dev") is None
    finally:
        slow.go_on.set()
        thread.join(60)
    first_outcome = outcome["first"]
    assert isinstance(first_outcome, ops.Outcome), first_outcome
    assert first_outcome.record["decision"] == "promote"
    assert read_bytes(lock_uri(store_root, model, "dev")) is None, "the lock outlived its promotion"
    # Free again: the second candidate is judged against the champion the first one made.
    second = ops.promote(
        evidence_of(evidence_files, better), CFG, "dev", store=store, registry=registry, deployer=OK()
    )
    assert second.record["lineage"]["champion"]["version"] == first_outcome.record["model"]["version"]
    assert [e["version"] for e in store.events("dev")] == ["1", "2"]


def OK() -> RecordingDeployer:  # noqa: N802 (reads as the deployer it stands for)
    return RecordingDeployer()


def test_the_lock_goes_with_every_ending(
    evidence_files: dict[str, Path], tmp_path: Path, registry: Registry
) -> None:
    """A gate's no, a failed deploy, an error and Ctrl-C inside the deploy all leave the environment free."""
    store = ModelStore(str(tmp_path / "store"), "m-lock-endings")
    uri = lock_uri(store.root, store.model, "dev")
    worse = make_candidate(tmp_path / "bad", accuracy=0.5)
    assert (
        ops.promote(
            evidence_of(evidence_files, worse), CFG, "dev", store=store, registry=registry, deployer=OK()
        ).record["decision"]
        == "reject"
    )
    assert read_bytes(uri) is None
    failed = ops.promote(
        evidence_of(evidence_files),
        CFG,
        "dev",
        store=store,
        registry=registry,
        deployer=RecordingDeployer(fail="up"),
    )
    assert failed.record["decision"] == "deploy_failed" and read_bytes(uri) is None

    class Interrupted(RecordingDeployer):
        def up(self, image: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ops.promote(
            evidence_of(evidence_files), CFG, "dev", store=store, registry=registry, deployer=Interrupted()
        )
    assert read_bytes(uri) is None


def test_a_killed_promotion_leaves_a_lock_that_only_its_id_removes(
    evidence_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL (a lost node, a runner gone) runs no clean-up: the next run is refused, naming the holder and the
    command that frees the environment once someone has looked; `unlock` with another id removes nothing."""
    for key, value in {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/ml"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    store = tmp_path / "store"
    started = tmp_path / "deploy-started"
    promote = [
        "promote", "--env", "dev", "--candidate", str(evidence_files["candidate"]),
        "--loadtest", str(evidence_files["loadtest"]), "--policy-report", str(evidence_files["policy_report"]),
        "--build-record", str(evidence_files["build_record"]),
        "--smoke-command", "true",
    ]  # fmt: skip
    # The deploy "runs" (writes its pid, then sleeps) when the holder is killed with its whole group, and the deploy
    # with its own (it runs in a session of its own): a lost node takes everything.
    deploy = f"sh -c 'echo $$ > {started}; exec sleep 120'"
    holder = promotion_cli(
        *promote,
        "--deploy-command",
        deploy,
        store=store,
        background=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(1200):
            if started.exists() or holder.poll() is not None:
                break
            threading.Event().wait(0.1)
        assert started.exists(), f"the promotion never reached its deploy (exit {holder.poll()})"
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(30)
    finally:
        stop_group(holder, grace_s=1)
        for _ in range(50):
            if started.exists() and started.read_text().strip():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(started.read_text()), signal.SIGKILL)
                break
            threading.Event().wait(0.1)
    lock = json.loads((store / "sentiment" / "environments" / "dev.lock").read_text())
    # As if it ran on a CI runner that vanished: a holder gone from this machine is taken over instead
    # (test_promotion_lock_takeover.py); one elsewhere cannot be proved gone.
    lock["host"] = "runner-that-vanished"
    (store / "sentiment" / "environments" / "dev.lock").write_text(json.dumps(lock))

    refused = promotion_cli(*promote, "--deploy-command", "true", store=store)
    assert refused.returncode == 2, refused.stderr
    assert f"unlock --env dev --lock-id {lock['lock_id']}" in refused.stderr
    assert f"pid {holder.pid}" in refused.stderr and "Nothing was changed" in refused.stderr
    assert "run https://github.com/acme/ml/actions/runs/4242" in refused.stderr

    wrong = promotion_cli("unlock", "--env", "dev", "--lock-id", "0" * 32, store=store)
    assert wrong.returncode == 2 and "not removed" in wrong.stderr
    assert (store / "sentiment" / "environments" / "dev.lock").exists()

    freed = promotion_cli("unlock", "--env", "dev", "--lock-id", lock["lock_id"], store=store)
    assert freed.returncode == 0 and "removed" in freed.stdout, freed.stderr
    again = promotion_cli(*promote, "--deploy-command", "true", store=store)
    assert again.returncode == 0, again.stderr
    assert not (store / "sentiment" / "environments" / "dev.lock").exists()
    nothing = promotion_cli("unlock", "--env", "dev", "--lock-id", lock["lock_id"], store=store)
    assert nothing.returncode == 0 and "no lock" in nothing.stdout


class _RecordingProxy(http.server.BaseHTTPRequestHandler):
    """Forwards to the GCS emulator and records each request line (method, path with its query)."""

    upstream = ""
    seen: list[str] = []

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(f"{self.command} {self.path}")
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

    def log_message(self, *args: object) -> None:
        return None


def test_on_gcs_the_lock_is_created_with_the_generation_precondition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GCS emulator here ignores `ifGenerationMatch` (a second create succeeds there), so what can be shown is
    the protocol: the lock's upload asks GCS to create only if no live object exists (`ifGenerationMatch=0`, GCS's
    documented request precondition), which real GCS answers with 412 when another run holds it."""
    import fsspec
    import fsspec.config
    from gcsfs.core import GCSFileSystem

    from promotion import lock

    proc, env = start_gcs()
    previous = fsspec.get_filesystem_class("gs")
    _RecordingProxy.upstream = env["STORAGE_EMULATOR_HOST"].removeprefix("http://")
    _RecordingProxy.seen = []
    try:
        with http_server(_RecordingProxy) as proxy:
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
            monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
            fsspec.register_implementation("gs", GCSFileSystem, clobber=True)
            monkeypatch.setitem(fsspec.config.conf, "gs", {"token": "anon"})
            fsspec.filesystem("gs").mkdir("locks")
            with lock.held("gs://locks/store", "m", "dev", operation="promote", requested_by=None):
                assert read_bytes(lock_uri("gs://locks/store", "m", "dev"))
            assert read_bytes(lock_uri("gs://locks/store", "m", "dev")) is None
    finally:
        fsspec.register_implementation("gs", previous, clobber=True)
        GCSFileSystem.clear_instance_cache()
        stop_group(proc, grace_s=5)
    uploads = [r for r in _RecordingProxy.seen if "/upload/" in r and "dev.lock" in r]
    assert uploads and all("ifGenerationMatch=0" in r for r in uploads), _RecordingProxy.seen
