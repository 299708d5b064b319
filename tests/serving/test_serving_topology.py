"""The two topologies: fused (tokenizer and ONNX Runtime in one python model, no BLS hop; the local
python backend's default, which the shared `served_repo` and the rollback tests run) and bls (`sentiment`
-> `classifier` by BLS; production's shape with the onnxruntime backend, here on the python stand-in):
same answers, rollback whole in both, and each really does (not) call the classifier."""

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
    bls = BuildOptions(topology="bls")
    assert "topology" not in {k for k, _ in model_configs(bls, 2)["sentiment"].parameters.items()}
    assert BuildOptions().topology == "fused" and BuildOptions(backend="onnxruntime").topology == "bls"
    assert (BuildOptions().endpoint_instances, bls.endpoint_instances) == (BuildOptions().instances, 2)


def test_fused_needs_the_python_backend() -> None:
    with pytest.raises(ConfigError, match="topology fused .* backend python"):
        BuildOptions(topology="fused", backend="onnxruntime")
    with pytest.raises(ConfigError, match="topology 'nope'"):
        BuildOptions(topology="nope")  # type: ignore[arg-type]


def classifier_calls(url: str) -> int:
    """Executions of `classifier` so far (the warmup's too: compare before/after)."""
    import tritonclient.http as http

    stats = http.InferenceServerClient(url).get_inference_statistics(model_name="classifier")
    return sum(int(v["inference_stats"]["success"]["count"]) for v in stats["model_stats"])


@pytest.fixture(scope="module")
def fused(served_repo: Path, server) -> Iterator:
    """The shared default repository (version 1 = int8, version 2 = fp32): fused by default."""
    assert (served_repo / "sentiment" / "1" / "model.onnx").is_file()
    assert '"fused"' in (served_repo / "sentiment" / "config.pbtxt").read_text()
    yield server


@pytest.fixture(scope="module")
def bls(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory, triton_factory) -> Iterator:
    """Version 1 = int8, version 2 = fp32, both bls (production's shape, on the python stand-in)."""
    repo = tmp_path_factory.mktemp("bls") / "models"
    build(tiny_bundle, repo, options=BuildOptions(precision="int8", topology="bls"))
    build(tiny_bundle, repo, options=BuildOptions(topology="bls"))
    assert not (repo / "sentiment" / "1" / "model.onnx").exists()
    yield from triton_factory(repo)


@pytest.mark.integration
def test_fused_versions_answer_with_their_own_graph_without_calling_the_classifier(
    fused, tiny_bundle: Path
) -> None:
    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    gap = np.abs(fp32 - int8).max()
    before = classifier_calls(fused.http_url)
    v1, v2 = versioned(fused.http_url, "1"), versioned(fused.http_url, "2")
    np.testing.assert_allclose(v1, int8, atol=gap / 5)  # rollback stays whole: v1 = its own int8 graph
    np.testing.assert_allclose(v2, fp32, atol=gap / 5)
    assert classifier_calls(fused.http_url) == before  # no BLS hop: the endpoint ran the graph itself


@pytest.mark.integration
def test_bls_versions_answer_through_the_classifier_of_their_own_build(bls, tiny_bundle: Path) -> None:
    fp32, int8 = expected(tiny_bundle, "model.onnx"), expected(tiny_bundle, "model.int8.onnx")
    gap = np.abs(fp32 - int8).max()
    before = classifier_calls(bls.http_url)
    v1, v2 = versioned(bls.http_url, "1"), versioned(bls.http_url, "2")
    np.testing.assert_allclose(v1, int8, atol=gap / 5)  # v1's steps.json pins classifier version 1
    np.testing.assert_allclose(v2, fp32, atol=gap / 5)
    assert classifier_calls(bls.http_url) == before + 2  # one BLS call per endpoint execution


@pytest.mark.integration
def test_a_batch_of_very_different_lengths_runs_as_sub_batches_with_the_same_answers(
    bls, tiny_bundle: Path
) -> None:
    """Three short texts and one at max_length: padding the short ones to it costs more than a second call at
    the CPU default (length_split_overhead 32): two classifier calls, and the answers of one padded batch."""
    texts = ["ok", "ok then", "fine", "a long and winding review of a film " * 10]
    assert "length_split_overhead_tokens" in (bls.repo / "sentiment" / "config.pbtxt").read_text()
    before = classifier_calls(bls.http_url)
    got = versioned(bls.http_url, "2", texts)  # fp32: padding and masking change nothing but the cost
    assert classifier_calls(bls.http_url) == before + 2
    np.testing.assert_allclose(got, expected(tiny_bundle, "model.onnx", texts), atol=1e-5)
