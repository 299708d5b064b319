"""python -m serving build|pin|serve|infer|check|loadtest|signal (see serving/README.md).

    python -m serving build runs/demo/export models/ --backend python
    python -m serving serve models/ --http-port 8000 --grpc-port 8001 --metrics-port 8002
    python -m serving infer "what a lovely day" --url 127.0.0.1:8000
    python -m serving check --url 127.0.0.1:8000 --bundle runs/demo/export
    python -m serving loadtest --url 127.0.0.1:8001 --protocol grpc --out reports/loadtest.json

Imports of tritonclient/numpy/onnxruntime happen inside the commands, so --help stays instant.
Exit codes: 0 ok, 1 a check failed (wrong answer), 2 usage or environment error (message says the fix).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from serving import arguments as arg
from serving.errors import ServingError

# Light (tritonclient is imported per call): --help stays instant.
from serving.loadtest import DEFAULT_TIMEOUT_S as LOADTEST_TIMEOUT_S


def _add_client_args(p: argparse.ArgumentParser, timeout_s: float = 10.0) -> None:
    p.add_argument("--url", default="127.0.0.1:8000", help="host:port (HTTP 8000 / gRPC 8001 by default)")
    p.add_argument("--protocol", choices=("http", "grpc"), default="http")
    p.add_argument("--model", default="sentiment")
    p.add_argument(
        "--timeout", type=arg.seconds, default=timeout_s, help=f"seconds per call (default {timeout_s:g})"
    )


def _add_version_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model-version", type=arg.positive_int, default=None, metavar="N",
        help="ask this version of the model (default: the newest the server has ready); the repository keeps the "
        "previous version loaded, so a new version and the one it replaced can be compared",
    )  # fmt: skip


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m serving", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="add an export bundle to a Triton model repository as a new version")
    p.add_argument("bundle", type=Path)
    p.add_argument("repo", type=Path)
    p.add_argument("--version", type=arg.positive_int, help="default: latest + 1")
    p.add_argument(
        "--backend",
        choices=("onnxruntime", "python"),
        default="python",
        help="onnxruntime: Triton's ORT backend (NVIDIA images); python: local stand-in (default)",
    )
    p.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    p.add_argument("--max-batch-size", type=arg.positive_int, default=64)
    p.add_argument(
        "--queue-delay-us", type=arg.count, help="endpoint batching window (default: BuildOptions)"
    )
    p.add_argument(
        "--endpoint-instances", type=arg.positive_int, help="sentiment instances (default: BuildOptions)"
    )
    p.add_argument("--instances", type=arg.positive_int, help="classifier instances (default: BuildOptions)")
    p.add_argument(
        "--intra-op-threads",
        type=arg.count,
        help="ORT threads per classifier (default, 0: cores // instances)",
    )
    p.add_argument("--gpu", action="store_true", help="KIND_GPU instances + TensorRT (onnxruntime backend)")
    p.add_argument(
        "--topology",
        choices=("bls", "fused"),
        help="bls: sentiment -> classifier (BLS); fused: ORT inside sentiment (python only). Default: fused with --backend python, bls with onnxruntime",
    )
    p.add_argument(
        "--pad-to-multiple-of",
        type=arg.positive_int,
        help="token length buckets (default: 16 with --gpu, else 1)",
    )

    p = sub.add_parser("pin", help="serve only one version (rollback), or 'latest' to undo")
    p.add_argument("repo", type=Path)
    p.add_argument("version", help="a version number or 'latest'")
    p.add_argument("--url", help="also reload the models on this running server (HTTP host:port)")

    p = sub.add_parser("serve", help="run the real tritonserver on a repository until Ctrl-C")
    p.add_argument("repo", type=Path)
    p.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to listen on every interface")
    p.add_argument("--http-port", type=arg.port, default=8000, help="0: a free one")
    p.add_argument("--grpc-port", type=arg.port, default=8001, help="0: a free one")
    p.add_argument("--metrics-port", type=arg.port, default=8002, help="0: a free one")
    p.add_argument("--log-verbose", type=arg.count, default=0)

    p = sub.add_parser("infer", help="classify texts: prints one JSON line per text")
    p.add_argument("texts", nargs="+")
    _add_client_args(p)
    _add_version_arg(p)

    p = sub.add_parser("check", help="smoke test a running server; exit 1 on a wrong answer")
    _add_client_args(p)
    _add_version_arg(p)
    p.add_argument("--bundle", type=Path, help="compare answers with this bundle's model run locally")
    p.add_argument("--expect", type=arg.expectation, action="append", default=[], metavar="TEXT=LABEL")
    p.add_argument("--repo", type=Path, help="start a server on this repository (free ports) for the check")

    p = sub.add_parser("loadtest", help="concurrency sweep: throughput, p50/p95/p99 latency, errors (JSON)")
    # Longer than a single call's: a request cut short is an error, and a lost latency sample, of its level.
    _add_client_args(p, timeout_s=LOADTEST_TIMEOUT_S)
    p.add_argument("--concurrency", type=arg.concurrency, default=[1, 8, 32], help="e.g. 1,8,32")
    p.add_argument("--requests", type=arg.positive_int, default=200, help="requests per concurrency level")
    p.add_argument("--texts", type=Path, help="one text per line (default: a few built-in sentences)")
    p.add_argument("--warmup-requests", type=arg.count, default=8,
                   help="sent one at a time before the sweep and not measured (0: none, e.g. a warm server)")  # fmt: skip
    p.add_argument("--out", type=Path, required=True)

    p = sub.add_parser("signal", help="print the autoscaling signal per model over a window (JSON)")
    p.add_argument("--metrics-url", default="http://127.0.0.1:8002/metrics")
    p.add_argument("--window", type=arg.seconds, default=10.0, help="seconds between the two scrapes")
    return ap


def _build(args: argparse.Namespace) -> int:
    from serving.repository import BuildOptions, build

    given = {
        "queue_delay_us": args.queue_delay_us,
        "endpoint_instances": args.endpoint_instances,
        "instances": args.instances,
        "intra_op_threads": args.intra_op_threads,
        "topology": args.topology,
    }
    options = BuildOptions(  # flags left out keep BuildOptions' defaults (one place)
        backend=args.backend,
        precision=args.precision,
        max_batch_size=args.max_batch_size,
        gpu=args.gpu,
        pad_to_multiple_of=args.pad_to_multiple_of,
        **{k: v for k, v in given.items() if v is not None},
    )
    version = build(args.bundle, args.repo, version=args.version, options=options)
    print(f"built {args.repo} version {version} ({args.backend}, {args.precision})")
    return 0


def _pin(args: argparse.Namespace) -> int:
    from serving.manifest import versions
    from serving.repository import KEEP_VERSIONS, MODELS, pin

    if args.version == "latest":
        version = None
    elif args.version.isdigit():
        version = int(args.version)
    else:
        raise ServingError(f"version {args.version!r}: pass a version number or 'latest'")
    pin(args.repo, version)
    print(f"{args.repo}: serving {'the newest versions' if version is None else f'version {version} only'}")
    if args.url:
        from serving.client import SentimentClient

        expected = [version] if version is not None else versions(args.repo)[-KEEP_VERSIONS:]
        with SentimentClient(args.url) as client:
            client.load_models(MODELS)  # classifier first: the endpoint's BLS calls need it loaded
            # The server reloads from its own repository: pinning another copy changes nothing there.
            served = {name: client.ready_versions(name) for name in MODELS}
        if any(v != expected for v in served.values()):
            raise ServingError(
                f"{args.repo} is pinned on disk, but after the reload {args.url} serves "
                + ", ".join(f"{name} versions {v}" for name, v in served.items())
                + f", not {expected}: pin the repository that server was started on (its "
                "--model-repository), or restart it on this one"
            )
        print(f"reloaded {', '.join(MODELS)} on {args.url}")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _serve(args: argparse.Namespace) -> int:
    from serving.server import TritonServer

    _undo_interrupted_build(args.repo)
    server = TritonServer(
        args.repo,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        log_verbose=args.log_verbose,
    )
    signal.signal(signal.SIGTERM, _interrupt)  # kubectl/systemd stop as cleanly as Ctrl-C
    with server:
        # The prints are inside the try: a stop that lands right after "Ctrl-C to stop." (a supervisor's
        # SIGTERM as soon as the server is up) is the asked-for stop, exit 0, not an interrupted start's 130.
        try:
            print(f"tritonserver ready on {args.repo}", flush=True)
            print(
                f"  HTTP    http://{server.http_url}  (/v2/health/ready, /v2/models/sentiment/infer)",
                flush=True,
            )
            print(f"  gRPC    {server.grpc_url}", flush=True)
            print(f"  metrics {server.metrics_url}", flush=True)
            print("Ctrl-C to stop.", flush=True)
            while server.process is not None and server.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("stopping tritonserver ...", flush=True)
            return 0
        print(f"tritonserver exited on its own:\n{server.log_tail()}", file=sys.stderr)
        return 2


def _client(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from serving.client import SentimentClient

    version = "" if getattr(args, "model_version", None) is None else str(args.model_version)
    return SentimentClient(
        args.url, protocol=args.protocol, model=args.model, version=version, timeout_s=args.timeout
    )


def _infer(args: argparse.Namespace) -> int:
    with _client(args) as client:
        for text, pred in zip(args.texts, client.classify(args.texts), strict=True):
            print(json.dumps({"text": text, "label": pred.label, "probabilities": pred.probabilities}))
    return 0


def _check(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from serving.bundle import load_bundle
    from serving.check import run_check
    from serving.server import TritonServer

    if args.bundle:  # was read only after the server start and the wait for it (up to a minute)
        load_bundle(args.bundle)
    if args.repo:
        _undo_interrupted_build(args.repo)
    server = TritonServer(args.repo, http_port=0, grpc_port=0, metrics_port=0) if args.repo else None
    if server is not None:
        # The server runs in its own session, so a SIGTERM (CI timeout, kill) to us alone would leave it
        # running on its ports: turn it into KeyboardInterrupt, so leaving the `with` stops the server.
        signal.signal(signal.SIGTERM, _interrupt)
    with server or nullcontext():
        if server is not None:
            args.url = server.grpc_url if args.protocol == "grpc" else server.http_url
        with _client(args) as client:
            problems = run_check(client, bundle=args.bundle, expectations=args.expect)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    print(f"check {'failed' if problems else 'passed'} against {args.url} ({args.protocol})")
    return 1 if problems else 0


def _text_lines(path: Path) -> list[str]:
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise ServingError(f"--texts {path}: {exc.strerror}: pass a file with one text per line") from exc
    except UnicodeDecodeError as exc:
        raise ServingError(
            f"--texts {path} is not UTF-8 ({exc.reason} at byte {exc.start}): re-encode it"
        ) from exc
    if not lines:
        raise ServingError(f"--texts {path} has no non-blank line: put one text per line")
    return lines


def _loadtest(args: argparse.Namespace) -> int:
    from serving.loadtest import run
    from serving.manifest import atomic_write

    arg.writable_file(args.out, "--out")  # found after the sweep, the error cost the whole sweep's minutes
    texts = (
        _text_lines(args.texts)
        if args.texts
        else [
            "what a great game last night",
            "my phone died again, so annoying",
            "thanks for the kind words!",
        ]
    )
    report = run(
        args.url,
        texts,
        concurrencies=args.concurrency,
        requests=args.requests,
        model=args.model,
        protocol=args.protocol,
        warmup_requests=args.warmup_requests,
        timeout_s=args.timeout,
    )
    atomic_write(args.out, json.dumps(report, indent=2) + "\n")
    for row in report["results"]:
        print(json.dumps(row))
    return 0 if all(r["errors"] == 0 for r in report["results"]) else 1


def _signal(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from serving.autoscale import HPA_MODEL, HPA_TARGET_QUEUE_US, measure

    result = measure(args.metrics_url, args.window)
    print(
        json.dumps(
            {
                "window_s": args.window,
                "hpa": {"model": HPA_MODEL, "target_queue_us_per_request": HPA_TARGET_QUEUE_US},
                "models": {name: asdict(s) for name, s in result.items()},
            },
            indent=2,
        )
    )
    return 0


COMMANDS = {
    "build": _build,
    "pin": _pin,
    "serve": _serve,
    "infer": _infer,
    "check": _check,
    "loadtest": _loadtest,
    "signal": _signal,
}


def _undo_interrupted_build(repo: Path) -> None:
    """Before Triton reads `repo`: it would load a stopped build's folders as the newest version."""
    from serving.repository import recover

    try:
        recover(repo)
    except OSError as exc:  # e.g. a read-only copy of the repository
        raise ServingError(
            f"{repo} holds files of a build that was stopped before it finished, and they cannot be removed "
            f"({exc.strerror}: {exc.filename}): run `python -m serving pin {repo} latest` where it is writable"
        ) from exc


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command in ("build", "pin"):
        # A plain SIGTERM ends Python without cleanup: as KeyboardInterrupt, the build removes its half version.
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return COMMANDS[args.command](args)
    except ServingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
