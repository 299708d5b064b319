"""The engine block of a Triton model config: ONNX Runtime's graph optimisation and, on GPU, TensorRT.

Triton's onnxruntime backend reads it as `optimization` in production; the local python stand-in
(serving/models/sentiment_common.py) applies the same graph level, so both run the same engine settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.errors import ConfigError

# Where the TensorRT engines and timing cache live in the serving pod: a volume (infra/k8s/serving.py mounts
# it), so a restarted pod or a new request shape reuses engines instead of rebuilding them (minutes each).
TRT_CACHE_PATH = "/trt-cache"
# Graph optimisation as Triton's onnxruntime backend maps `optimization.graph.level` (its README: unset/0 =
# all optimisations, 1 = basic + extended, -1 = basic, 2 = none); the python stand-in applies the same map.
ORT_GRAPH_LEVELS: dict[int, str] = {
    0: "ORT_ENABLE_ALL",
    1: "ORT_ENABLE_EXTENDED",
    -1: "ORT_ENABLE_BASIC",
    2: "ORT_DISABLE_ALL",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TensorRTProfile:
    """One TensorRT optimisation profile: the [batch, sequence] shapes of the serving traffic.

    TensorRT builds one engine per profile; a request outside [min, max] falls back to a rebuild, so the
    range covers every shape the batcher can form (batch 1..max_batch_size, length 1..max_length).
    """

    inputs: tuple[str, ...]
    min_shape: tuple[int, int]
    opt_shape: tuple[int, int]
    max_shape: tuple[int, int]

    def __post_init__(self) -> None:
        lo, opt, hi = self.min_shape, self.opt_shape, self.max_shape
        if any(d < 1 for d in (*lo, *opt, *hi)) or not all(
            a <= b <= c for a, b, c in zip(lo, opt, hi, strict=True)
        ):
            raise ConfigError(
                f"TensorRT profile needs 1 <= min <= opt <= max per dimension, got {lo}, {opt}, {hi}"
            )

    def parameters(self) -> dict[str, str]:
        def shapes(shape: tuple[int, int]) -> str:
            return ",".join(f"{name}:{shape[0]}x{shape[1]}" for name in self.inputs)

        return {
            "trt_profile_min_shapes": shapes(self.min_shape),
            "trt_profile_opt_shapes": shapes(self.opt_shape),
            "trt_profile_max_shapes": shapes(self.max_shape),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class OnnxRuntimeOptimization:
    """`optimization` of Triton's onnxruntime backend; the local python stand-in reads the same block."""

    graph_level: int = 0
    """A key of ORT_GRAPH_LEVELS; 0 (unset) = ORT_ENABLE_ALL, what the stand-in and the export parity use."""
    tensorrt: TensorRTProfile | None = None
    """GPU only: TensorRT runs the subgraphs it supports (fp16) for this profile, CUDA the rest; engines cached."""
    trt_cache_path: str = TRT_CACHE_PATH

    def __post_init__(self) -> None:
        if self.graph_level not in ORT_GRAPH_LEVELS:
            raise ConfigError(
                f"optimization graph level {self.graph_level}: use one of {sorted(ORT_GRAPH_LEVELS)} "
                "(0 = all, 1 = extended, -1 = basic, 2 = none)"
            )

    def message(self) -> dict[str, object]:
        msg: dict[str, object] = {}
        if self.graph_level:
            msg["graph"] = {"level": self.graph_level}
        if self.tensorrt is not None:
            parameters = {
                "precision_mode": "FP16",
                "max_workspace_size_bytes": str(1 << 30),
                "trt_engine_cache_enable": "1",
                "trt_engine_cache_path": self.trt_cache_path,
                "trt_timing_cache_enable": "1",
                "trt_timing_cache_path": self.trt_cache_path,
                **self.tensorrt.parameters(),
            }
            msg["execution_accelerators"] = {
                "gpu_execution_accelerator": [
                    {
                        "name": "tensorrt",
                        "parameters": [{"key": k, "value": v} for k, v in parameters.items()],
                    }
                ]
            }
        return msg
