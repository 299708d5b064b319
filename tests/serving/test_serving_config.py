"""Generated config.pbtxt files are valid Triton configuration (parsed by Triton's own ModelConfig proto)."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from serving.config import DynamicBatching, EnsembleStep, InstanceGroup, ModelConfig, Tensor, VersionPolicy
from serving.errors import ConfigError
from serving.repository import BuildOptions, model_configs


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
    assert sorted(configs) == ["classifier", "postprocess", "preprocess", "sentiment"]
    for name, config in configs.items():
        proto = parse(config.render())
        assert proto.name == name
        assert proto.max_batch_size == options.max_batch_size
        assert proto.version_policy.latest.num_versions == 2


def test_production_classifier_uses_onnxruntime_backend_with_batching_warmup_and_tensorrt() -> None:
    proto = parse(model_configs(BuildOptions(backend="onnxruntime", gpu=True), 2)["classifier"].render())
    assert proto.platform == "onnxruntime_onnx" and proto.backend == ""
    assert proto.dynamic_batching.max_queue_delay_microseconds == 2000
    assert proto.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    assert proto.optimization.graph.level == 1
    assert proto.optimization.execution_accelerators.gpu_execution_accelerator[0].name == "tensorrt"
    assert proto.model_warmup[0].inputs["input_ids"].zero_data
    assert [i.name for i in proto.input] == ["input_ids", "attention_mask"]
    assert list(proto.input[0].dims) == [-1]
    assert proto.input[0].data_type == model_config_pb2.TYPE_INT64
    assert proto.output[0].data_type == model_config_pb2.TYPE_FP32 and list(proto.output[0].dims) == [2]


def test_local_and_production_classifier_differ_only_in_the_engine() -> None:
    local = parse(model_configs(BuildOptions(backend="python"), 2)["classifier"].render())
    prod = parse(model_configs(BuildOptions(backend="onnxruntime"), 2)["classifier"].render())
    assert (local.backend, prod.platform) == ("python", "onnxruntime_onnx")
    for proto in (local, prod):
        proto.ClearField("backend")
        proto.ClearField("platform")
        proto.ClearField("optimization")  # ORT-backend settings; the stand-in sets the same level in code
    assert local == prod
    # The other three models do not depend on the switch at all.
    for name in ("preprocess", "postprocess", "sentiment"):
        assert (
            model_configs(BuildOptions(backend="python"), 2)[name].render()
            == model_configs(BuildOptions(backend="onnxruntime"), 2)[name].render()
        )


def test_ensemble_wires_text_to_label_and_probabilities_through_the_three_steps() -> None:
    proto = parse(model_configs(BuildOptions(), 3)["sentiment"].render())
    assert proto.platform == "ensemble"
    assert [s.model_name for s in proto.ensemble_scheduling.step] == [
        "preprocess",
        "classifier",
        "postprocess",
    ]
    assert all(s.model_version == -1 for s in proto.ensemble_scheduling.step)
    assert [(t.name, t.data_type) for t in proto.input] == [("TEXT", model_config_pb2.TYPE_STRING)]
    assert {t.name: list(t.dims) for t in proto.output} == {"LABEL": [1], "PROBABILITIES": [3]}
    # Every ensemble tensor a step reads was written by an earlier step (or is the ensemble input).
    produced = {"TEXT"}
    for step in proto.ensemble_scheduling.step:
        assert set(step.input_map.values()) <= produced, step.model_name
        produced |= set(step.output_map.values())
    assert {"LABEL", "PROBABILITIES"} <= produced


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
            parse(model_configs(options, 2)["preprocess"].render())
            .parameters["pad_to_multiple_of"]
            .string_value
        )

    assert multiple(BuildOptions()) == "1"
    assert multiple(BuildOptions(backend="onnxruntime", gpu=True)) == "16"
    assert multiple(BuildOptions(pad_to_multiple_of=8)) == "8"
    with pytest.raises(ConfigError, match="pad_to_multiple_of"):
        BuildOptions(pad_to_multiple_of=0)
