"""Serving fixtures: a tiny real export bundle, a model repository built from it, a real tritonserver.

The bundle comes from `training.export.make_tiny_bundle` (random 2-layer BERT, real MiniLM tokenizer,
real ONNX export with int8): its predictions are noise, so tests compare the server with the same
model run in-process instead of with sentiment labels.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest


def tritonserver_missing() -> str | None:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return "nvidia-pytriton (which ships the tritonserver binary) is not installed: run `make setup`"
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver" / "bin" / "tritonserver"
    return None if root.is_file() else f"{root} is missing: reinstall nvidia-pytriton==0.7.0"


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.export import make_tiny_bundle

    return make_tiny_bundle(tmp_path_factory.mktemp("bundle") / "export", seed=0, quantize=True)


@pytest.fixture(scope="session")
def served_repo(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Version 1 = the int8 model, version 2 = fp32 (latest): both stay loaded (version policy)."""
    from serving.repository import BuildOptions, build

    repo = tmp_path_factory.mktemp("repo") / "models"
    build(tiny_bundle, repo, options=BuildOptions(precision="int8"))
    build(tiny_bundle, repo)
    return repo


def start_server(repo: Path) -> Iterator:
    reason = tritonserver_missing()
    if reason:
        pytest.skip(reason)
    from serving.server import TritonServer

    with TritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server


def serve_recording(bundle: Path, root: Path) -> Iterator[tuple]:
    """Build `bundle` under root/models and serve it with every request recorded under root/records:
    yields (server, records folder). For modules that check the endpoint's answers and its records together."""
    from serving.repository import BuildOptions, build

    build(bundle, root / "models", options=BuildOptions())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MONITORING_SAMPLE_RATE", "1")
        mp.setenv("MONITORING_RECORDS_URL", str(root / "records"))
        for server in start_server(root / "models"):
            yield server, root / "records"


@pytest.fixture(scope="session")
def triton_factory():
    """start_server, for modules that need a server on a repository of their own."""
    return start_server


@pytest.fixture(scope="module")
def server(served_repo: Path) -> Iterator:
    """One real tritonserver per test module, on free ports."""
    yield from start_server(served_repo)
