"""How `python -m serving build` builds a repository: one typed, validated set of options, stored in the
manifest (repository.json) so a later pin or build re-renders the same configs. Defaults that depend on other
fields are resolved once, in `__post_init__`; the numbers behind each default are in serving/README.md and
serving/PERFORMANCE.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from serving.engine_config import TRT_CACHE_PATH
from serving.errors import ConfigError

Backend = Literal["onnxruntime", "python"]
Precision = Literal["fp32", "int8"]
Topology = Literal["bls", "fused"]
# A sub-batch call's fixed cost on CPU in token-equivalents (BuildOptions.length_split_overhead), measured rather
# than guessed: `python -m benchmarks.serve_split` reruns the comparison, reports/bench/serve_split.json holds
# the last run, whose `status` checks this value.
LENGTH_SPLIT_OVERHEAD_CPU = 16.0

# What a manifest written before a field existed means by its absence: how the serving that wrote it behaved,
# not today's default (a pin or a `serve` recovery re-renders every config from the stored options, so today's
# default would silently change a built repository). Adding a field whose default is not the old behaviour
# means adding it here.
ABSENT_MEANS: dict[str, Any] = {
    "topology": "bls",  # before ba82b40 the endpoint always called the classifier (fused is 004cce2's default)
    "length_split_overhead": -1.0,  # before ddc8f8b every dynamic batch ran as one padded call
}
# Options of layouts this serving no longer builds or serves, with what they were.
RETIRED = {
    "preprocess_queue_delay_us": "the first serving's ensemble (preprocess -> classifier -> postprocess models)",
}


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildOptions:
    backend: Backend = "python"
    """onnxruntime: Triton's ORT backend (NVIDIA images); python: the same classifier run by the python backend."""
    precision: Precision = "fp32"
    """int8 serves the bundle's model.int8.onnx (dynamic quantization) as model.onnx."""
    max_batch_size: int = 64
    queue_delay_us: int = 5000
    """Batching window of `sentiment`, where requests of any length merge. From the sweep in
    benchmarks/serve.py: with 2 endpoint instances it cleared the batch target with margin (batch 8 at
    concurrency 8) and p99 in every run; the fastest pick moves between runs within the noise (README)."""
    classifier_queue_delay_us: int = 0
    """Window of the classifier's own batcher, which merges already-batched calls of the sentiment instances
    only when their lengths match: waiting there buys little (0 on CPU)."""
    endpoint_instances: int | None = None
    """`sentiment` instances; None = per topology: bls 2 (two pipeline tokenizing/answering with the
    classifier's run, and with the window above each still gathers batches), fused `instances` (the
    endpoint runs the graph itself, so it is counted like the classifier: one per node on CPU, its ORT
    threads take every core; the sweep in serving/PERFORMANCE.md)."""
    instances: int = 1
    """Classifier instances. One per node on CPU: its ORT threads already take every core."""
    intra_op_threads: int = 0
    """ONNX Runtime threads per classifier instance; 0 = cores // instances (no oversubscription)."""
    ort_spinning: bool = False
    """Python stand-in only: let ORT's idle threads spin (lower latency on dedicated cores)."""
    gpu: bool = False
    """Production GPU nodes: KIND_GPU instances and the TensorRT execution accelerator (onnxruntime backend)."""
    trt_cache_path: str = TRT_CACHE_PATH
    """GPU only: where TensorRT keeps engines and its timing cache (a volume in the pod: a restart or a new
    shape within the profile reuses them instead of rebuilding)."""
    max_text_bytes: int = 65536
    pad_to_multiple_of: int | None = None
    """Round padded lengths up to a multiple of this; None = 16 with gpu (fewer shapes for TensorRT, and
    padding is nearly free on a GPU), 1 on CPU (padded positions cost CPU; serving/README.md)."""
    length_split_overhead: float | None = None
    """`sentiment` runs each dynamic batch as length-sorted sub-batches when a call (costed at this many
    token-equivalents) is cheaper than the padding it saves (serving/models/batching.py). None = per device:
    LENGTH_SPLIT_OVERHEAD_CPU on CPU, off (-1) with gpu, where padding is nearly free. A negative value turns
    it off. 16: benchmarks/serve_split.py (reports/bench/serve_split.json): ONNX Runtime CPU ms per text on
    batches of 8 of the test split (demo model), costs 0-32 and one padded batch interleaved per batch, at 1
    and 2 threads, fp32 and int8: 16 best or within 3% of the best cost in each (1.9% at most), -18 to -25%
    vs one padded batch (serving/README.md)."""
    topology: Topology | None = None
    """bls: `sentiment` calls `classifier` (BLS). fused: `sentiment` runs its own copy of the graph with ONNX
    Runtime in-process (one python hop instead of two). None = per backend: fused with the python backend
    (the local CPU stand-in: a lower overhead over raw ONNX Runtime than bls in every side-by-side run of
    benchmarks/serve.py), bls with the onnxruntime backend (production: the classifier is native there,
    so bls already has one python hop). Numbers in serving/README.md. `classifier` is built either way
    (production's shape, pins)."""

    def __post_init__(self) -> None:
        # Defaults that depend on other fields are resolved here, once, so the manifest stores them.
        if self.topology is None:
            object.__setattr__(self, "topology", "fused" if self.backend == "python" else "bls")
        if self.length_split_overhead is None:
            object.__setattr__(self, "length_split_overhead", -1.0 if self.gpu else LENGTH_SPLIT_OVERHEAD_CPU)
        if self.endpoint_instances is None:
            default = self.instances if self.topology == "fused" else 2
            object.__setattr__(self, "endpoint_instances", default)
        if self.backend not in ("onnxruntime", "python"):
            raise ConfigError(f"backend {self.backend!r}: use onnxruntime (NVIDIA image) or python (local)")
        if self.precision not in ("fp32", "int8"):
            raise ConfigError(f"precision {self.precision!r}: use fp32 or int8")
        if self.topology not in ("bls", "fused"):
            raise ConfigError(f"topology {self.topology!r}: use bls (endpoint -> classifier) or fused")
        if self.topology == "fused" and self.backend != "python":
            raise ConfigError(
                "topology fused runs ONNX Runtime inside the python endpoint: it needs backend python "
                "(production uses bls with the onnxruntime backend)"
            )
        if self.gpu and self.backend != "onnxruntime":
            raise ConfigError(
                "gpu=True needs backend onnxruntime (the python stand-in runs ONNX Runtime on CPU)"
            )
        if self.pad_to_multiple_of is not None and self.pad_to_multiple_of < 1:
            raise ConfigError("pad_to_multiple_of must be >= 1 (1 = pad to the longest text only)")
        for name in ("max_batch_size", "instances", "endpoint_instances", "max_text_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1")
        for name in ("queue_delay_us", "classifier_queue_delay_us", "intra_op_threads"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0")

    def threads(self) -> int:
        """ORT intra-op threads per classifier instance: the cores shared out, never more threads than cores."""
        return self.intra_op_threads or max(1, _cores() // self.instances)

    def endpoint_threads(self) -> int:
        """fused: ORT threads per endpoint instance, the cores shared out among the endpoint's instances."""
        return self.intra_op_threads or max(1, _cores() // int(self.endpoint_instances or 1))


def stored_options(stored: Any, where: str) -> BuildOptions:
    """The options a manifest (`where`) recorded, as the serving that wrote them meant them (ABSENT_MEANS).

    A key this serving does not know was written by a newer one (or an ensemble-era one, RETIRED): refused by
    name, since guessing what it meant would render configs that serve something else."""
    if not isinstance(stored, dict):
        raise ConfigError(f"{where}: 'options' is {type(stored).__name__}, not the build options object")
    retired = sorted(k for k in stored if k in RETIRED)
    if retired:
        raise ConfigError(
            f"{where} was written by an older serving whose layout ({RETIRED[retired[0]]}) this one neither "
            "builds nor serves: build the bundles into a new repository folder (python -m serving build BUNDLE "
            "NEW_REPO) and serve that"
        )
    known = {f.name for f in fields(BuildOptions)}
    unknown = sorted(k for k in stored if k not in known)
    if unknown:
        raise ConfigError(
            f"{where} records build options this serving does not know ({', '.join(unknown)}): a newer serving "
            "built it. Pin or serve it with the serving (image) that built it, or a newer one"
        )
    try:
        return BuildOptions(**{**{k: v for k, v in ABSENT_MEANS.items() if k not in stored}, **stored})
    except (TypeError, ValueError) as exc:  # a hand-edited value of the wrong type
        raise ConfigError(f"{where}: unreadable build options ({exc}): restore the file") from exc
