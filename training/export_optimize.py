"""Offline graph fusion with ONNX Runtime's transformer optimizer (`onnxruntime.transformers.optimizer`).

It rewrites BERT subgraphs into ONNX Runtime's fused kernels (SkipLayerNormalization, BiasGelu and, when
its pattern matches, Attention), so every runtime that loads the bundle (Triton's onnxruntime backend,
the python stand-in, the benchmark) gets them without relying on its own online optimisation level. The
result must pass the same parity check as the exported graph (export.py falls back to the plain graph,
and records why, when it does not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_TYPE = "bert"


def optimize_graph(src: Path, dst: Path, *, num_heads: int, hidden_size: int) -> dict[str, Any]:
    """Write the fused graph of `src` to `dst`; return what was fused (for metadata.json)."""
    from onnxruntime.transformers.optimizer import optimize_model

    external = (src.parent / (src.name + ".data")).exists()
    # opt_level 0: only the transformer fusions here; the runtime applies its own graph level on top.
    fused = optimize_model(
        str(src), model_type=MODEL_TYPE, num_heads=num_heads, hidden_size=hidden_size, opt_level=0
    )
    fused.save_model_to_file(str(dst), use_external_data_format=external)
    stats = {k: int(v) for k, v in fused.get_fused_operator_statistics().items() if v}
    return {"tool": "onnxruntime.transformers.optimizer", "model_type": MODEL_TYPE, "fused": stats}
