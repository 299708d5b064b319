"""A pack that starts but does not answer: the runner must say so as "the pack failed" (exit 3) with the pack,
its port and its stderr, never as an internal error (exit 4) or a run that waits forever. The packs here are
fake interpreters (POLICY_PACK_PYTHON) that print a port the way `python -m pulumi.policy` does."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import policy_fixtures as fx
import pytest

from policies import analyze, client, report

QUIET_PORT = """
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))  # bound, so no one else gets the port, but never listening: connections are refused
open(sys.argv[1], "w").write(str(os.getpid()))
print("FAKE-PACK: bound, not listening", file=sys.stderr, flush=True)
print(s.getsockname()[1], flush=True)
{after}
"""

HANGING_SERVER = """
import os, sys, time
from concurrent import futures
import grpc
def hang(request, context):
    time.sleep(600)
server = grpc.server(futures.ThreadPoolExecutor(2))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "pulumirpc.Analyzer", {m: grpc.unary_unary_rpc_method_handler(hang) for m in ("Handshake", "GetAnalyzerInfo")}
),))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
open(sys.argv[1], "w").write(str(os.getpid()))
print("FAKE-PACK: serving, never answering", file=sys.stderr, flush=True)
print(port, flush=True)
server.wait_for_termination()
"""


def _fake_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str) -> Path:
    """A POLICY_PACK_PYTHON that runs `program` (this test's interpreter, which has grpc) in place of the pack;
    returns the file where the fake writes its pid."""
    script, pid_file, fake = tmp_path / "fake_pack.py", tmp_path / "fake.pid", tmp_path / "python"
    script.write_text(program)
    # exec: the runner's kill of "the pack" reaches the fake itself, not a shell in front of it.
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "{pid_file}"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("POLICY_PACK_PYTHON", str(fake))
    return pid_file


def _analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    plan = tmp_path / "dev.json"
    plan.write_text(json.dumps(fx.aws_stack()))
    code = analyze.main([str(plan), "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


def _assert_gone(pid_file: Path) -> None:
    with pytest.raises(ProcessLookupError):  # killed and reaped by the runner
        os.kill(int(pid_file.read_text()), 0)


def test_a_pack_that_prints_a_port_but_never_serves_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was exit 4 after 30 s: grpc.FutureTimeoutError is no grpc.RpcError, so it reached the internal-error
    handler, with a traceback and without a word from the pack."""
    pid_file = _fake_pack(tmp_path, monkeypatch, QUIET_PORT.format(after="time.sleep(120)"))
    monkeypatch.setattr(client, "READY_TIMEOUT_S", 1.0)
    code, err = _analyze(tmp_path, capsys)
    assert code == 3, err
    assert "Traceback" not in err
    assert f"the policy pack {analyze.PACK_DIR} ({tmp_path / 'python'} -m pulumi.policy" in err, err
    port = err.split("printed port ", 1)[1].split()[0]
    assert f"did not answer on 127.0.0.1:{port} within 1s" in err, err
    assert "FAKE-PACK: bound, not listening" in err, err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    _assert_gone(pid_file)


def test_a_pack_that_dies_after_printing_its_port_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was a 30 s wait for a process already gone, then exit 4; now its exit status, without the wait."""
    _fake_pack(tmp_path, monkeypatch, QUIET_PORT.format(after="sys.exit(7)"))
    started = time.monotonic()
    code, err = _analyze(tmp_path, capsys)
    assert code == 3, err
    assert time.monotonic() - started < 15, "the runner waited out the ready timeout for a dead pack"
    assert "exited (status 7) after printing port" in err, err
    assert "FAKE-PACK: bound, not listening" in err, err


def test_a_pack_that_stops_answering_mid_session_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule (or the SDK) that hangs: the calls had no deadline, so the gate held CI until the job's timeout."""
    pid_file = _fake_pack(tmp_path, monkeypatch, HANGING_SERVER)
    monkeypatch.setattr(client, "RPC_TIMEOUT_S", 1.0)
    code, err = _analyze(tmp_path, capsys)
    assert code == 3, err
    assert "did not answer Handshake within 1s" in err, err
    assert "FAKE-PACK: serving, never answering" in err, err
    _assert_gone(pid_file)


@pytest.mark.parametrize("prog", ["analyze", "report"])
def test_a_port_that_is_no_port_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], prog: str
) -> None:
    """ "99999" passed `isdigit()` and the runner dialled it for 30 s; "²" passed too and int() raised (exit 4)."""
    fake = tmp_path / "python"
    monkeypatch.setenv("POLICY_PACK_PYTHON", str(fake))
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "dev.json").write_text(json.dumps(fx.aws_stack()))
    for text in ("99999", "²"):
        fake.write_text(f"#!/bin/sh\necho 'FAKE-PACK: no port' >&2\necho '{text}'\nexec sleep 60\n")
        fake.chmod(0o755)
        if prog == "analyze":
            code = analyze.main([str(plans / "dev.json"), "--out", str(tmp_path / "out")])
        else:
            code = report.main(["--plans", str(plans), "--out", str(tmp_path / "out"), "--no-checkov"])
        err = capsys.readouterr().err
        assert code == 3, err
        assert f"did not print its port (1-65535) within 60s (got {text!r})" in err, err
        assert "FAKE-PACK: no port" in err, err


@pytest.mark.integration
def test_a_proxy_in_the_environment_does_not_reach_the_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pack_python: Path
) -> None:
    """A CI runner behind a proxy (http_proxy/https_proxy set, 127.0.0.1 not in no_proxy): gRPC sent the
    runner's connection to the pack through the proxy, which never answered (exit 4 after 30 s). The Pulumi
    CLI never proxies loopback; neither does the runner now."""
    with socket.socket() as closed:  # a proxy address where no one listens
        closed.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{closed.getsockname()[1]}"
        for var in ("http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            monkeypatch.setenv(var, proxy)
        for var in ("no_proxy", "NO_PROXY", "no_grpc_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("POLICY_PACK_PYTHON", str(pack_python))
        monkeypatch.setattr(client, "READY_TIMEOUT_S", 10.0)
        code, err = _analyze(tmp_path, capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "dev.json").read_text())["stack"] == "dev"
