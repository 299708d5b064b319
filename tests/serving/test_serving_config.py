"""Generated config.pbtxt files are valid Triton configuration (parsed by Triton's own ModelConfig proto)."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from serving.config import (
    DynamicBatching,
    EnsembleStep,
    InstanceGroup,
    ModelConfig,
    Tensor,
    VersionPolicy,
)
from serving.engine_config import ORT_GRAPH_LEVELS, TRT_CACHE_PATH, TensorRTProfile
from serving.errors import ConfigError
from serving.repository import MODEL_SOURCES, BuildOptions, model_configs


def parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize(
    "options",
    [
        BuildOptions(),
        BuildOptions(backend="onnxruntime"),
        BuildOptions(backend="onnxruntime", gpu=True, instances=2, queue_delay_us=500),
    ],
    ids=["python", "onnxruntime", "onnxruntime-gpu"],
)
def test_every_generated_config_parses_as_triton_model_config(options: BuildOptions) -> None:
    configs = model_configs(options, num_labels=2)
    assert sorted(configs) == ["classifier", "sentiment"]
    for name, config in configs.items():
        proto = parse(config.render())
        assert proto.name == name
        assert proto.max_batch_size == options.max_batch_size
        assert proto.version_policy.latest.num_versions == 2


def test_production_classifier_uses_onnxruntime_backend_with_batching_warmup_and_tensorrt() -> None:
    options = BuildOptions(backend="onnxruntime", gpu=True)
    proto = parse(model_configs(options, 2, max_length=64)["classifier"].render())
    assert proto.platform == "onnxruntime_onnx" and proto.backend == ""
    assert proto.dynamic_batching.max_queue_delay_microseconds == 0
    assert proto.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    # Unset level = ORT_ENABLE_ALL in the backend's mapping (level 1 would be "extended" only).
    assert proto.optimization.graph.level == 0
    assert proto.model_warmup[0].inputs["input_ids"].zero_data
    assert [i.name for i in proto.input] == ["input_ids", "attention_mask"]
    assert list(proto.input[0].dims) == [-1]
    assert proto.input[0].data_type == model_config_pb2.TYPE_INT64
    assert proto.output[0].data_type == model_config_pb2.TYPE_FP32 and list(proto.output[0].dims) == [2]


def test_tensorrt_has_a_profile_for_the_serving_shapes_and_an_engine_cache_on_the_volume() -> None:
    proto = parse(
        model_configs(BuildOptions(backend="onnxruntime", gpu=True), 2, max_length=64)["classifier"].render()
    )
    (trt,) = proto.optimization.execution_accelerators.gpu_execution_accelerator
    assert trt.name == "tensorrt"
    assert dict(trt.parameters) == {
        "precision_mode": "FP16",
        "max_workspace_size_bytes": str(1 << 30),
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": TRT_CACHE_PATH,
        "trt_timing_cache_enable": "1",
        "trt_timing_cache_path": TRT_CACHE_PATH,
        # batch 1..max_batch_size, length 1..max_length: every shape the sentiment model can send
        "trt_profile_min_shapes": "input_ids:1x1,attention_mask:1x1",
        "trt_profile_opt_shapes": "input_ids:8x32,attention_mask:8x32",
        "trt_profile_max_shapes": "input_ids:64x64,attention_mask:64x64",
    }
    with pytest.raises(ConfigError, match="min <= opt <= max"):
        TensorRTProfile(inputs=("x",), min_shape=(1, 1), opt_shape=(8, 80), max_shape=(64, 64))


def _set_fields(proto: model_config_pb2.ModelConfig) -> dict[str, object]:
    return {field.name: value for field, value in proto.ListFields()}


@pytest.mark.parametrize("instances", [1, 2])
def test_local_and_production_classifier_configs_are_equal_field_by_field(instances: int) -> None:
    """Every field both set, compared as parsed by Triton's proto; only the engine's name may differ."""
    options = {"instances": instances, "queue_delay_us": 1000, "intra_op_threads": 0}
    local = parse(model_configs(BuildOptions(backend="python", **options), 2)["classifier"].render())
    prod = parse(model_configs(BuildOptions(backend="onnxruntime", **options), 2)["classifier"].render())
    local_fields, prod_fields = _set_fields(local), _set_fields(prod)
    assert (local_fields.pop("backend"), prod_fields.pop("platform")) == ("python", "onnxruntime_onnx")
    assert local_fields.keys() == prod_fields.keys()
    for name in local_fields:
        assert local_fields[name] == prod_fields[name], name
    # The fields the issue names, explicitly: same threads (from the cores: no oversubscription) and batching.
    threads = int(prod.parameters["intra_op_thread_count"].string_value)
    assert threads >= 1 and threads * instances <= max(1, BuildOptions().threads())
    assert prod.parameters["inter_op_thread_count"].string_value == "1"
    assert local.dynamic_batching == prod.dynamic_batching
    # With the same topology (bls) the sentiment endpoint does not depend on the switch at all.
    assert (
        model_configs(BuildOptions(backend="python", topology="bls"), 2)["sentiment"].render()
        == model_configs(BuildOptions(backend="onnxruntime"), 2)["sentiment"].render()
    )


# Where production (bls) keeps each field the local default (fused) endpoint sets: the request side
# belongs to production's `sentiment` (it batches the texts), the engine side to its `classifier`.
ENDPOINT_FIELDS = {
    "name",
    "backend",
    "max_batch_size",
    "version_policy",
    "input",
    "output",
    "dynamic_batching",
}
ENGINE_FIELDS = {"max_batch_size", "instance_group", "optimization"}
ENGINE_PARAMETERS = ("intra_op_thread_count", "inter_op_thread_count", "allow_spinning")
# Production classifier fields the fused endpoint has no counterpart for, and why.
CLASSIFIER_ONLY = {
    "name": "the model's own name",
    "platform": "the engine: onnxruntime_onnx in production, ORT inside the python endpoint locally",
    "input": "token ids (the endpoint's BLS call); the fused endpoint takes TEXT, as production's endpoint",
    "output": "logits; the fused endpoint answers LABEL/PROBABILITIES, as production's endpoint",
    "dynamic_batching": "window 0 on already merged calls; texts wait in the endpoint's window in both",
    "model_warmup": "zero token ids; a TEXT warmup of empty strings would be refused by the endpoint",
}


@pytest.mark.parametrize(
    "options",
    [{}, {"instances": 2, "queue_delay_us": 1000}, {"intra_op_threads": 1, "max_batch_size": 32}],
    ids=["defaults", "two-instances", "threads-given"],
)
def test_local_default_endpoint_runs_the_graph_with_production_settings_field_by_field(
    options: dict[str, int],
) -> None:
    """The local default (fused: tokenizer + ORT in `sentiment`) vs production (bls: `sentiment` -> the
    onnxruntime backend's `classifier`), every set field as parsed by Triton's proto, none cleared."""
    local_options = BuildOptions(backend="python", **options)
    assert local_options.topology == "fused"  # the default of the local python backend
    prod_options = BuildOptions(backend="onnxruntime", **options)
    assert prod_options.topology == "bls"
    local = parse(model_configs(local_options, 2)["sentiment"].render())
    prod = model_configs(prod_options, 2)
    prod_endpoint, prod_engine = parse(prod["sentiment"].render()), parse(prod["classifier"].render())
    assert prod_engine.platform == "onnxruntime_onnx"
    local_fields = _set_fields(local)
    endpoint_fields, engine_fields = _set_fields(prod_endpoint), _set_fields(prod_engine)
    params = {k: v.string_value for k, v in local_fields.pop("parameters").items()}
    for name, value in local_fields.items():
        assert name in ENDPOINT_FIELDS | ENGINE_FIELDS, f"{name}: set locally, not placed in production"
        if name in ENDPOINT_FIELDS:
            assert value == endpoint_fields[name], name
        if name in ENGINE_FIELDS:
            assert value == engine_fields[name], name
    # The other way: every production field is in the local endpoint, or a listed, explained difference.
    for name in endpoint_fields.keys() - {"parameters"}:
        assert name in local_fields, f"production endpoint sets {name}, the local default does not"
    for name in engine_fields.keys() - {"parameters"}:
        assert name in local_fields or name in CLASSIFIER_ONLY, f"production classifier sets {name}"
        if name in local_fields and name not in ENDPOINT_FIELDS:
            assert local_fields[name] == engine_fields[name], name
    # Parameters: the endpoint's own (text limit, padding) + the engine's (threads, spinning) + the switch.
    endpoint_params = {k: v.string_value for k, v in prod_endpoint.parameters.items()}
    engine_params = {k: v.string_value for k, v in prod_engine.parameters.items()}
    assert params == {
        **endpoint_params,
        **{k: engine_params[k] for k in ENGINE_PARAMETERS},
        "topology": "fused",
    }
    # The settings the issue names, explicitly: graph level, threads, batching window, max batch.
    assert local.optimization.graph.level == prod_engine.optimization.graph.level == 0  # ORT_ENABLE_ALL
    assert params["intra_op_thread_count"] == engine_params["intra_op_thread_count"]
    threads = int(params["intra_op_thread_count"])
    count = local.instance_group[0].count
    assert threads * count <= max(count, BuildOptions().threads())  # no oversubscription
    assert params["inter_op_thread_count"] == engine_params["inter_op_thread_count"] == "1"
    assert local.dynamic_batching == prod_endpoint.dynamic_batching  # where texts wait, in both
    assert local.max_batch_size == prod_engine.max_batch_size == prod_endpoint.max_batch_size
    assert list(local.instance_group) == list(prod_engine.instance_group)


def test_stand_in_maps_the_graph_level_like_the_onnxruntime_backend() -> None:
    import ast

    # Both python models that run a graph (classifier, fused sentiment) open it through ort_session().
    source = (MODEL_SOURCES / "sentiment_common.py").read_text()
    mapping = next(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "GRAPH_LEVEL_NAMES"
    )
    assert ast.literal_eval(mapping) == ORT_GRAPH_LEVELS
    assert "ort_session(config" in (MODEL_SOURCES / "classifier.py").read_text()


def test_endpoint_batches_texts_and_calls_the_classifier_of_its_own_version() -> None:
    proto = parse(model_configs(BuildOptions(), 3)["sentiment"].render())
    assert proto.backend == "python"
    assert [(t.name, t.data_type) for t in proto.input] == [("TEXT", model_config_pb2.TYPE_STRING)]
    assert {t.name: list(t.dims) for t in proto.output} == {"LABEL": [1], "PROBABILITIES": [3]}
    assert proto.dynamic_batching.max_queue_delay_microseconds == BuildOptions().queue_delay_us
    assert not proto.HasField("ensemble_scheduling")  # no version -1 steps: the pin is in N/steps.json


@pytest.mark.parametrize("backend", ["python", "onnxruntime"])
def test_endpoint_drops_requests_still_queued_after_their_timeout(backend: str) -> None:
    """Triton lets a request's `timeout` only shorten a nonzero default: without both, the endpoint ran
    every queued request of a client that had gone (the live test: test_serving_server.py)."""
    from serving.repository import ENDPOINT_QUEUE_TIMEOUT_US

    configs = model_configs(BuildOptions(backend=backend), 2)  # type: ignore[arg-type]
    policy = parse(configs["sentiment"].render()).dynamic_batching.default_queue_policy
    assert policy.timeout_action == model_config_pb2.ModelQueuePolicy.REJECT
    assert policy.default_timeout_microseconds == ENDPOINT_QUEUE_TIMEOUT_US > 0
    assert policy.allow_timeout_override
    # Its callers are the endpoint's own BLS calls, sent only for a live request: nothing to drop.
    assert not parse(configs["classifier"].render()).dynamic_batching.HasField("default_queue_policy")


def test_pinned_version_renders_a_specific_policy() -> None:
    for config in model_configs(BuildOptions(), 2, pinned=3).values():
        assert list(parse(config.render()).version_policy.specific.versions) == [3]


def test_strings_are_escaped() -> None:
    config = ModelConfig(
        name="m",
        backend="python",
        max_batch_size=0,
        inputs=(Tensor(name="x", data_type="TYPE_FP32", dims=(1,)),),
        outputs=(Tensor(name="y", data_type="TYPE_FP32", dims=(1,)),),
        parameters={"note": 'say "hi" \\ bye'},
    )
    assert parse(config.render()).parameters["note"].string_value == 'say "hi" \\ bye'


def _tensor(**kw: object) -> Tensor:
    return Tensor(**{"name": "x", "data_type": "TYPE_FP32", "dims": (1,), **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _tensor(dims=()), "non-empty"),
        (lambda: _tensor(dims=(0,)), "positive sizes or -1"),
        (lambda: _tensor(data_type="TYPE_FLOAT"), "data_type"),
        (lambda: _tensor(name="bad name"), "name"),
        (lambda: DynamicBatching(max_queue_delay_microseconds=-1), ">= 0"),
        (lambda: DynamicBatching(max_queue_delay_microseconds=0, queue_timeout_microseconds=-1), "0 = never"),
        (lambda: InstanceGroup(count=0), ">= 1"),
        (lambda: InstanceGroup(kind="KIND_CPU", gpus=(0,)), "KIND_GPU"),
        (lambda: VersionPolicy(latest=2, specific=(1,)), "exactly one"),
        (lambda: BuildOptions(backend="python", gpu=True), "onnxruntime"),
        (lambda: BuildOptions(backend="tensorflow"), "backend"),  # type: ignore[arg-type]
        (lambda: BuildOptions(max_batch_size=0), "max_batch_size"),
        (
            lambda: ModelConfig(
                name="m",
                backend="python",
                platform="onnxruntime_onnx",
                max_batch_size=1,
                inputs=(_tensor(),),
                outputs=(_tensor(name="y"),),
            ),
            "exactly one of backend",
        ),
        (
            lambda: ModelConfig(
                name="m",
                backend="python",
                max_batch_size=4,
                inputs=(_tensor(),),
                outputs=(_tensor(name="y"),),
                dynamic_batching=DynamicBatching(max_queue_delay_microseconds=1, preferred_batch_size=(8,)),
            ),
            "exceeds max_batch_size",
        ),
        (
            lambda: ModelConfig(
                name="m",
                backend="python",
                max_batch_size=0,
                inputs=(_tensor(),),
                outputs=(_tensor(name="y"),),
                dynamic_batching=DynamicBatching(max_queue_delay_microseconds=1),
            ),
            "max_batch_size > 0",
        ),
        (
            lambda: ModelConfig(
                name="e",
                platform="ensemble",
                max_batch_size=1,
                inputs=(_tensor(),),
                outputs=(_tensor(name="y"),),
            ),
            "ensemble_steps",
        ),
        (
            lambda: ModelConfig(
                name="m",
                backend="python",
                max_batch_size=1,
                inputs=(_tensor(),),
                outputs=(_tensor(),),
            ),
            "unique",
        ),
        (
            lambda: ModelConfig(
                name="m",
                backend="python",
                max_batch_size=1,
                inputs=(_tensor(),),
                outputs=(_tensor(name="y"),),
                ensemble_steps=(EnsembleStep(model_name="a", input_map={}, output_map={}),),
            ),
            "platform='ensemble'",
        ),
    ],
)
def test_invalid_values_are_rejected_with_a_fix(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=message):
        make()


def test_length_buckets_default_to_exact_on_cpu_and_16_tokens_on_gpu() -> None:
    def multiple(options: BuildOptions) -> str:
        return (
            parse(model_configs(options, 2)["sentiment"].render())
            .parameters["pad_to_multiple_of"]
            .string_value
        )

    assert multiple(BuildOptions()) == "1"
    assert multiple(BuildOptions(backend="onnxruntime", gpu=True)) == "16"
    assert multiple(BuildOptions(pad_to_multiple_of=8)) == "8"
    with pytest.raises(ConfigError, match="pad_to_multiple_of"):
        BuildOptions(pad_to_multiple_of=0)
