"""Stopping the demo from outside, with the real `python -m demo` code, moto S3 server and training run.

The policy stage (20-100 s of plans) and the preflight are stubbed out so that the train stage, which starts
the moto server (a session of its own) and the training command (another one), is reached in seconds. The
test then signals the demo as a terminal or a CI runner would and checks that nothing it started survives.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from demo_processes import MARKER, command_lines, kill_marked

ROOT = Path(__file__).resolve().parents[2]

# argv: reports, work, cleanup marker file ("" for none).
DEMO = """
import sys, time
from pathlib import Path
import demo.pipeline as p

p.missing_tools = lambda: []
p.stage_policy = lambda r, cfg, summary: None
if sys.argv[3]:
    # Stopping takes a while in real runs (Triton drains for up to 20 s, training checkpoints on SIGTERM):
    # the moto server's stop is made to take 3 s and says when it starts, so that a second signal is sent
    # while the demo is stopping what it started.
    real_stop = p.MotoS3.stop
    def slow_stop(self):
        if self.proc is not None:
            Path(sys.argv[3]).write_text("stopping")
            time.sleep(3)
        real_stop(self)
    p.MotoS3.stop = slow_stop
from demo.__main__ import main
sys.exit(main(["--fast", "--quiet", "--reports", sys.argv[1], "--work", sys.argv[2]]))
"""


class Terminal:
    """A pseudo-terminal for the demo's output; hang_up() closes it as a closed terminal window does (then
    every write to it fails with EIO)."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.output = bytearray()
        self._open = True
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while self._open:
            if select.select([self.master], [], [], 0.1)[0]:
                try:
                    data = os.read(self.master, 4096)
                except OSError:
                    return
                if not data:
                    return
                self.output += data

    def hang_up(self) -> None:
        self._open = False
        self._reader.join()
        os.close(self.master)


def _start(
    tmp_path: Path, marker: str, cleanup_file: str = "", terminal: Terminal | None = None, nohup: bool = False
) -> subprocess.Popen[str]:
    out = terminal.slave if terminal else subprocess.PIPE

    def signals() -> None:  # as a shell starts a foreground command; under nohup, SIGHUP ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN if nohup else signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-c", DEMO, str(tmp_path / "reports"), str(tmp_path / "work"), cleanup_file],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True, env={**os.environ, MARKER: marker},
        preexec_fn=signals,
    )  # fmt: skip
    if terminal:
        os.close(terminal.slave)
    return proc


def _wait_for_training(proc: subprocess.Popen[str], marker: str, timeout_s: float = 60) -> None:
    """Until the moto server and the training command both run (each in a session of its own)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        lines = command_lines(marker, besides=proc.pid)
        if any("moto.server" in c for c in lines) and any("-m training train" in c for c in lines):
            return
        time.sleep(0.2)
    out = proc.communicate(timeout=30)[0] if proc.poll() is not None else "(still running)"
    pytest.fail(
        f"the demo's train stage did not start moto + training in {timeout_s:.0f} s:\n{(out or '')[-3000:]}"
    )


@contextmanager
def _demo_in_training(
    tmp_path: Path, cleanup_file: str = "", terminal: Terminal | None = None, nohup: bool = False
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The demo, started and waited for until it trains; whatever the test does, nothing it started outlives
    the test."""
    marker = uuid.uuid4().hex
    proc = _start(tmp_path, marker, cleanup_file, terminal=terminal, nohup=nohup)
    try:
        _wait_for_training(proc, marker)
        yield proc, marker
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_marked(marker)


def _finish(proc: subprocess.Popen[str], tmp_path: Path, marker: str) -> tuple[str, dict]:
    try:
        out = proc.communicate(timeout=90)[0] or ""
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0] or ""
        pytest.fail(f"the demo did not stop within 90 s of the signal:\n{out[-3000:]}")
    time.sleep(0.5)  # a process SIGKILLed by the demo's last step may take a moment to be reaped
    leaked = [line[:120] for line in command_lines(marker)]
    assert not leaked, f"left running after the demo exited {proc.returncode}: {leaked}\n{out[-3000:]}"
    summary_path = tmp_path / "reports" / "demo" / "summary.json"
    assert summary_path.exists(), f"no summary written (exit {proc.returncode}):\n{out[-3000:]}"
    return out, json.loads(summary_path.read_text())


@pytest.mark.integration
def test_a_closed_terminal_stops_the_demo_and_what_it_started(tmp_path: Path) -> None:
    """SIGHUP (terminal closed, SSH dropped) killed the demo on the spot: moto and the training run, each in
    a session of its own, kept running with no one to stop them. The terminal is gone as well: the demo's
    last lines to it must not turn the orderly stop into a traceback."""
    terminal = Terminal()
    with _demo_in_training(tmp_path, terminal=terminal) as (proc, marker):
        terminal.hang_up()
        proc.send_signal(signal.SIGHUP)
        _, summary = _finish(proc, tmp_path, marker)
    logs = "\n".join(
        p.read_text()[-1500:] for p in sorted((tmp_path / "reports" / "demo" / "logs").glob("*.log"))
    )
    assert proc.returncode == 130, (
        f"exit {proc.returncode}; before the hang-up:\n{terminal.output.decode()}\n{logs}"
    )
    assert summary["failed_stage"]["why"] == "interrupted" and summary["failed_stage"]["name"] == "train"
    assert summary["failed_stage"]["log"].endswith("1-train.log")
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [("train", "interrupted")]


@pytest.mark.integration
def test_a_second_signal_does_not_cut_the_stopping_short(tmp_path: Path) -> None:
    """Ctrl-C, then Ctrl-C again (and SIGTERM, SIGHUP) while the demo stops what it started: the later
    signals interrupted the clean-up, so the moto server was never stopped and no summary was written."""
    stopping = tmp_path / "stopping"
    with _demo_in_training(tmp_path, str(stopping)) as (proc, marker):
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while not stopping.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stopping.exists(), "the demo never began stopping its moto server"
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            proc.send_signal(sig)
            time.sleep(0.2)
        out, summary = _finish(proc, tmp_path, marker)
    assert proc.returncode == 130, out[-3000:]
    assert "already stopping" in out
    assert summary["failed_stage"]["why"] == "interrupted"
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [("train", "interrupted")]


@pytest.mark.integration
def test_nohup_still_keeps_the_demo_through_a_hang_up(tmp_path: Path) -> None:
    """`nohup make demo`: SIGHUP ignored on entry stays ignored; Ctrl-C (SIGINT) still stops it in order."""
    with _demo_in_training(tmp_path, nohup=True) as (proc, marker):
        proc.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert proc.poll() is None, "a nohup'ed demo stopped on SIGHUP"
        proc.send_signal(signal.SIGINT)
        out, summary = _finish(proc, tmp_path, marker)
    assert proc.returncode == 130, out[-3000:]
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [("train", "interrupted")]


@pytest.mark.integration
def test_ctrl_c_while_stopping_after_a_failed_stage_still_stops_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage fails, and Ctrl-C comes while the demo stops what it started (Triton drains for up to 20 s):
    the interrupt cut the stopping short, the moto server (a session of its own) kept running and no summary
    was written. Real moto server, real signal, in-process demo."""
    import demo.pipeline as p
    from localservers import stop_group

    buckets: list[p.MotoS3] = []

    class CtrlCWhileStopping(p.MotoS3):
        def __init__(self, log: Path) -> None:
            super().__init__(log)
            buckets.append(self)

        def stop(self) -> None:
            if self.proc is not None:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)  # the handler runs here, as it would in Triton's drain
            super().stop()

    pids: list[int] = []

    def failing(r: p.Runner, cfg: p.DemoConfig, summary: dict) -> None:
        with r.stage("policy", "starts the bucket, then fails"):
            pids.append(buckets[0].start(timeout_s=60).proc.pid)  # type: ignore[union-attr]
            r.fail("stub failure")

    monkeypatch.setattr(p, "missing_tools", lambda: [])
    monkeypatch.setattr(p, "MotoS3", CtrlCWhileStopping)
    monkeypatch.setattr(p, "stage_policy", failing)
    cfg = p.DemoConfig(reports=tmp_path / "reports", work=tmp_path / "work", fast=True, quiet=True)
    code: int | None = None
    try:
        code = p.run(cfg)
    except KeyboardInterrupt:  # the interrupt escaped the demo: reported below, not as a pytest abort
        pass
    finally:
        leftover = buckets[0].proc if buckets else None
        alive = leftover is not None and leftover.poll() is None
        if leftover is not None and alive:
            stop_group(leftover)
    assert pids and not alive and not psutil.pid_exists(pids[0]), "the moto server outlived the demo"
    assert code == 1
    failed = json.loads((cfg.out / "summary.json").read_text())["failed_stage"]
    assert (failed["name"], failed["why"]) == ("policy", "stub failure")


@pytest.mark.integration
def test_a_log_that_cannot_be_kept_does_not_keep_the_servers_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (here: a logs folder no one may write to, root included) when the demo copies tritonserver's
    log before stopping it: the copy's error skipped the server's stop, then the moto server's, then the
    summary. The server is a stand-in process in a session of its own (starting Triton is not what is tested);
    the moto server is real."""
    import demo.pipeline as p
    from localservers import stop_group

    class StandInServer:
        def __init__(self, log: Path) -> None:
            self.log_path = log
            self.proc = subprocess.Popen(["sleep", "600"], start_new_session=True)

        def stop(self) -> None:
            stop_group(self.proc, grace_s=5)

    buckets: list[p.MotoS3] = []
    started: list[subprocess.Popen] = []

    class Recorded(p.MotoS3):
        def __init__(self, log: Path) -> None:
            super().__init__(log)
            buckets.append(self)

    def serve(r: p.Runner, cfg: p.DemoConfig, summary: dict, s3: p.MotoS3, live: dict) -> None:
        with r.stage("serve", "starts a bucket and a server, then fails"):
            started.append(s3.start(timeout_s=60).proc)  # type: ignore[arg-type]
            (tmp_path / "server.log").write_text("served\n")
            live["server"] = StandInServer(tmp_path / "server.log")
            started.append(live["server"].proc)
            subprocess.run(["chattr", "+i", str(r.logs)], check=True)
            r.fail("stub failure")

    for name in ("stage_policy", "stage_train", "stage_export"):
        monkeypatch.setattr(p, name, lambda *a: None)
    monkeypatch.setattr(p, "missing_tools", lambda: [])
    monkeypatch.setattr(p, "MotoS3", Recorded)
    monkeypatch.setattr(p, "stage_serve", serve)
    cfg = p.DemoConfig(reports=tmp_path / "reports", work=tmp_path / "work", fast=True, quiet=True)
    if subprocess.run(["chattr", "-i", str(tmp_path)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr is not available on this file system")
    code: int | None = None
    try:
        code = p.run(cfg)
    except OSError:
        pass  # reported below: what it left running
    finally:
        subprocess.run(["chattr", "-i", str(cfg.out / "logs")], check=False)
        alive = [proc.args for proc in started if proc.poll() is None]
        for proc in started:
            if proc.poll() is None:
                stop_group(proc, grace_s=5)
    assert len(started) == 2 and not alive, f"left running: {alive}"
    assert code == 1
    failed = json.loads((cfg.out / "summary.json").read_text())["failed_stage"]
    assert (failed["name"], failed["why"]) == ("serve", "stub failure")
