"""The fused topology (tokenizer and ONNX Runtime in one python model, no BLS hop), the alternative
benchmarks/serve.py measures next to the default bls endpoint: same answers, rollback still whole, and the
classifier really is not called."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from serving.errors import ConfigError
from serving.repository import BuildOptions, build, model_configs
from tests.serving.test_serving_versions import expected, versioned


def test_fused_config_gives_the_endpoint_the_classifier_engine_settings_with_cores_shared_out() -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    options = BuildOptions(topology="fused", endpoint_instances=2)
    proto = text_format.Parse(model_configs(options, 2)["sentiment"].render(), model_config_pb2.ModelConfig())
    params = {k: v.string_value for k, v in proto.parameters.items()}
    cores = len(os.sched_getaffinity(0))
    assert params["topology"] == "fused"
    assert int(params["intra_op_thread_count"]) * 2 <= max(2, cores)  # no oversubscription across instances
    assert params["inter_op_thread_count"] == "1" and params["allow_spinning"] == "0"
    assert "topology" not in {k for k, _ in model_configs(BuildOptions(), 2)["sentiment"].parameters.items()}


def test_fused_needs_the_python_backend() -> None:
    with pytest.raises(ConfigError, match="topology fused .* backend python"):
        BuildOptions(topology="fused", backend="onnxruntime")
    with pytest.raises(ConfigError, match="topology 'nope'"):
        BuildOptions(topology="nope")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fused(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory, triton_factory) -> Iterator:
    """Version 1 = int8, version 2 = fp32, both fused."""
    repo = tmp_path_factory.mktemp("fused") / "models"
    build(tiny_bundle, repo, options=BuildOptions(precision="int8", topology="fused"))
    build(tiny_bundle, repo, options=BuildOptions(topology="fused"))
    assert (repo / "sentiment" / "1" / "model.onnx").is_file()
    yield from triton_factory(repo)


@pytest.mark.integration
def test_fused_versions_answer_with_their_own_graph_without_calling_the_classifier(
    fused, tiny_bundle: Path
) -> None:
    import tritonclient.http as http

    def classifier_calls() -> int:  # the warmup's executions are counted too: compare before/after
        stats = http.InferenceServerClient(fused.http_url).get_inference_statistics(model_name="classifier")
        return sum(int(v["inference_stats"]["success"]["count"]) for v in stats["model_stats"])

    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    gap = np.abs(fp32 - int8).max()
    before = classifier_calls()
    v1, v2 = versioned(fused.http_url, "1"), versioned(fused.http_url, "2")
    np.testing.assert_allclose(v1, int8, atol=gap / 5)  # rollback stays whole: v1 = its own int8 graph
    np.testing.assert_allclose(v2, fp32, atol=gap / 5)
    assert classifier_calls() == before  # no BLS hop: the endpoint ran the graph itself
