"""Run the real `tritonserver` binary that ships in the nvidia-pytriton wheel.

    with TritonServer("models/", http_port=8000, grpc_port=8001, metrics_port=8002) as server:
        print(server.http_url)

The wheel is located with importlib (pytriton itself is never imported: it would pull its whole
client stack). Its python backend needs a stub built for the running Python; we assemble a backend
directory of our own (links into the wheel) instead of writing into site-packages, and hand the
stub this interpreter's site-packages so model.py files import numpy/onnxruntime/tokenizers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from localservers import free_port
from serving.errors import PortInUseError, PortsTakenError, ServerError

READY_TIMEOUT_S = 120.0
ROLES = ("http", "grpc", "metrics")
START_ATTEMPTS = 3
"""Tries with fresh ports when a port this class picked was taken between the pick and Triton's bind."""
WATCHDOG = Path(__file__).with_name("watchdog.py")
"""Stops the server when the process that started it dies without stopping it (SIGKILL, OOM kill)."""
# Triton logs each failed model as one line; its message (escaped newlines, then a Python traceback)
# ends at the first "\n". The table and shutdown lines after it push it out of any short tail.
_LOAD_FAILURE = re.compile(r"\] \"(failed to load '[^']+' version \d+: .*?)(?:\\n|\"$)")
# A config.pbtxt Triton cannot parse never gets that far: protobuf logs the reason (line:column, the field),
# then Triton names the folder and file, both above the table that fills the tail.
_CONFIG_SYNTAX = re.compile(r"Error parsing text-format inference\.ModelConfig: (.*)$")
_POLL_FAILURE = re.compile(r"\] \"Poll failed for model directory '([^']+)': (.*?)\"?$")


def wheel_root() -> Path:
    """site-packages/pytriton/tritonserver of the installed nvidia-pytriton wheel."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServerError(
            "tritonserver not found: install the serving extras (`make setup`, nvidia-pytriton==0.7.0)"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    if not (root / "bin" / "tritonserver").is_file():
        raise ServerError(f"{root}/bin/tritonserver is missing: reinstall nvidia-pytriton==0.7.0")
    return root


def binary() -> Path:
    return wheel_root() / "bin" / "tritonserver"


def make_backend_dir(target: Path) -> Path:
    """A Triton backend directory whose python backend runs this interpreter's version (3.x)."""
    root = wheel_root()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / py / "triton_python_backend_stub"
    if not stub.is_file():
        raise ServerError(f"nvidia-pytriton has no python backend stub for Python {py}: use Python 3.8-3.13")
    python_dir = target / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    # Links, not copies: the stub and backend find their bundled libraries relative to the real files.
    for src in (root / "backends" / "python" / "libtriton_python.so", stub):
        link = python_dir / src.name
        if not link.exists():
            link.symlink_to(src)
    # The backend copies this module next to each model's stub; a real file keeps its path stable.
    utils = root / "backends" / "python" / "triton_python_backend_utils.py"
    shutil.copy2(utils, python_dir / utils.name)
    return target


SHM_DIR = Path("/dev/shm")


def shm_prefix(workdir: Path) -> str:
    """The python backend's shared-memory region prefix of the server running in `workdir` (unique: mkdtemp)."""
    return f"triton_python_backend_shm_region_{workdir.name}-"


def remove_shm(workdir: Path) -> None:
    """Remove the shared-memory regions of the server that ran in `workdir` (call once its group is dead)."""
    for region in SHM_DIR.glob(f"{shm_prefix(workdir)}*"):
        with contextlib.suppress(FileNotFoundError):
            region.unlink()


def _check_port(host: str, port: int, role: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As Triton binds: connections of an earlier server in TIME_WAIT do not make a port busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise PortInUseError(port, role, host) from exc


_STARTED: weakref.WeakSet[TritonServer] = weakref.WeakSet()


def _forget_in_forked_child() -> None:
    """A child forked from the starter (os.fork, multiprocessing's fork) does not own the starter's servers.

    Its inherited copy of the watchdog's pipe would keep the watchdog waiting after the starter died, and its
    copies of the objects would stop the starter's server (or kill its watchdog) if it left their `with`.
    """
    for server in list(_STARTED):
        if server._watchdog is not None and server._watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                server._watchdog.stdin.close()
        server.process, server._watchdog, server._log, server._workdir = None, None, None, None


os.register_at_fork(after_in_child=_forget_in_forked_child)


class TritonServer:
    """Start tritonserver on `repo`, wait until /v2/health/ready, stop it on exit (context manager)."""

    def __init__(
        self,
        repo: str | Path,
        *,
        http_port: int = 8000,
        grpc_port: int = 8001,
        metrics_port: int = 8002,
        host: str = "127.0.0.1",
        ready_timeout_s: float = READY_TIMEOUT_S,
        log_verbose: int = 0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.repo = Path(repo).resolve()
        self.host = host
        # Port 0 = pick a free one (tests, `check --repo`): several servers may run side by side.
        self._picked = {
            role for role, p in zip(ROLES, (http_port, grpc_port, metrics_port), strict=True) if not p
        }
        self.http_port, self.grpc_port, self.metrics_port = (
            p or free_port(host) for p in (http_port, grpc_port, metrics_port)
        )
        self.ready_timeout_s = ready_timeout_s
        self.log_verbose = log_verbose
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        self._workdir: Path | None = None

    @property
    def http_url(self) -> str:
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def log_path(self) -> Path | None:
        return self._workdir / "tritonserver.log" if self._workdir else None

    def command(self, backend_dir: Path) -> list[str]:
        return [
            str(binary()),
            f"--model-repository={self.repo}",
            f"--backend-directory={backend_dir}",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            # nv_inference_request_summary_us quantiles: the p99 alert and dashboard panel read them.
            "--metrics-config=summary_latencies=true",
            # explicit + load all: `serving pin` can reload the models live (POST .../load).
            "--model-control-mode=explicit",
            "--load-model=*",
            "--strict-readiness=true",
            "--exit-on-error=true",
            "--exit-timeout-secs=10",
            f"--log-verbose={self.log_verbose}",
            # Each stub's shared memory gets this server's own name prefix, so stop() (and the watchdog) can
            # remove what SIGKILLed stubs leave in /dev/shm: 1 MiB and up per model instance, every time.
            f"--backend-config=python,shm-region-prefix-name={shm_prefix(backend_dir.parent)}",
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # The stub embeds libpython, which finds its prefix by looking up `python3` on PATH: this
        # environment's bin/ first makes the models import this venv's numpy/onnxruntime/tokenizers.
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.prefix) / "bin"), env.get("PATH")]))
        libs = wheel_root().parent.parent / "nvidia_pytriton.libs"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(libs), env.get("LD_LIBRARY_PATH")]))
        # Each python model instance runs its own stub process: one thread each, or 2 cores thrash.
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def start(self) -> TritonServer:
        if self.process is not None:
            raise ServerError("server already started")
        if not self.repo.is_dir():
            raise ServerError(
                f"model repository {self.repo} does not exist: run `python -m serving build` first"
            )
        if any(c.isspace() for c in str(self.repo.resolve())):
            # Triton's python backend starts each model's stub with the path unquoted
            # (triton-inference-server/python_backend#401): the server never became ready, after minutes.
            raise ServerError(
                f"model repository {self.repo.resolve()} has whitespace in its path, which Triton's python "
                "backend cannot load models from (python_backend#401): build or copy it to a path without spaces"
            )
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except PortsTakenError:
                # A free port is only free until someone binds it: another server's pick, an outgoing
                # connection's ephemeral port. Ports the caller chose are theirs to fix (the error says so).
                if not self._picked or attempt == START_ATTEMPTS:
                    raise
                for role in self._picked:
                    setattr(self, f"{role}_port", free_port(self.host))
        raise AssertionError("unreachable")

    def _start_once(self) -> TritonServer:
        for role in ROLES:
            _check_port(self.host, getattr(self, f"{role}_port"), role)
        self._workdir = Path(tempfile.mkdtemp(prefix="tritonserver-"))
        _STARTED.add(self)
        try:
            backend_dir = make_backend_dir(self._workdir / "backends")
            log = open(self._workdir / "tritonserver.log", "wb")  # noqa: SIM115 - closed in stop()
            self._log = log
            # Started first, so no moment passes with a server and no watchdog: the pid follows on its pipe.
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", str(WATCHDOG), str(self._workdir), shm_prefix(self._workdir)],
                stdin=subprocess.PIPE,
                start_new_session=True,  # signals for our process group (Ctrl-C, timeout -s KILL) spare it
            )
            self.process = subprocess.Popen(
                self.command(backend_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=self._workdir,
                start_new_session=True,  # Ctrl-C reaches us; we stop the server in order
            )
            assert self._watchdog.stdin is not None
            try:
                self._watchdog.stdin.write(f"{self.process.pid}\n".encode())
                self._watchdog.stdin.flush()
            except OSError as exc:
                raise ServerError(
                    f"the watchdog ({sys.executable} -I {WATCHDOG}) exited at start with code "
                    f"{self._watchdog.poll()}: its error is printed above"
                ) from exc
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def load_failures(self) -> list[str]:
        """Triton's "failed to load 'MODEL' version N: reason" lines from the log, in order."""
        if self.log_path is None or not self.log_path.exists():
            return []
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [m.group(1) for m in map(_LOAD_FAILURE.search, lines) if m]

    def config_failures(self) -> list[str]:
        """Models whose config.pbtxt Triton could not read, each with protobuf's reason when it logged one."""
        if self.log_path is None or not self.log_path.exists():
            return []
        failures, reason = [], ""
        for line in self.log_path.read_text(errors="replace").splitlines():
            if syntax := _CONFIG_SYNTAX.search(line):
                reason = syntax.group(1)
            elif poll := _POLL_FAILURE.search(line):
                failures.append(f"model '{poll.group(1)}': {poll.group(2)}{f': {reason}' if reason else ''}")
                reason = ""
        return failures

    def _failure(self, what: str) -> ServerError:
        failures = self.load_failures()
        if failures:
            what += (
                " because models failed to load (fix or rebuild the version, or `serving pin` a good one):\n  "
                + "\n  ".join(failures)
            )
            if any("for backend 'onnxruntime'" in f for f in failures):
                what += (
                    f"\n{self.repo} was built with --backend onnxruntime, which only NVIDIA's image has: build a "
                    "repository for this local tritonserver with the default --backend python"
                )
        configs = self.config_failures()
        if configs:
            what += (
                f"\nbecause Triton could not read a model's config.pbtxt (rendered by `serving build`/`pin`: undo the edit "
                f"or render it again with `python -m serving pin {self.repo} latest`, or the pinned version; "
                "change options with a new `serving build`):\n  " + "\n  ".join(configs)
            )
        return ServerError(f"{what}\nlast lines of its log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def is_ready(self) -> bool:
        """Models ready and /metrics answering: Triton reports ready before it binds its metrics port."""
        for url in (f"http://{self.http_url}/v2/health/ready", self.metrics_url):
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status != 200:
                        return False
            except (urllib.error.URLError, OSError):
                return False
        return True

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                # HTTP/gRPC say "Address already in use", the metrics service "Socket '...' already in use".
                if "already in use" in tail:
                    raise PortsTakenError(
                        f"tritonserver could not bind its ports (taken meanwhile?):\n{tail}"
                    )
                raise self._failure(f"tritonserver exited with code {self.process.returncode}")
            if self.is_ready():
                return
            time.sleep(0.25)
        raise self._failure(f"tritonserver not ready after {self.ready_timeout_s:.0f} s")

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGINT (Triton drains in-flight requests), then SIGKILL if it does not exit in time."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
                try:
                    self.process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
            # Stopped while loading models, Triton exits without its python backend stubs: they outlived it
            # (reparented to init, each holding a model) in its process group, which still exists through them.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.returncode
            self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._watchdog is not None:
            # Killed, not sent end of file: end of file is what tells it to stop the server (we are gone).
            self._watchdog.kill()
            self._watchdog.wait()
            if self._watchdog.stdin is not None:
                with contextlib.suppress(OSError):
                    self._watchdog.stdin.close()
            self._watchdog = None
        if self._workdir is not None:
            remove_shm(self._workdir)
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        return code

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
