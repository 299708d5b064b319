"""int8: ONNX Runtime dynamic quantization of the (fused) fp32 graph; judged by accuracy, not parity."""

from __future__ import annotations

from pathlib import Path


def quantize_int8(src: Path, dst: Path) -> None:
    """ONNX Runtime dynamic quantization: int8 weights, activations quantized per batch at run time.

    Run on the fused graph (export_optimize): its MatMuls are the same, and the fusions stay in place.
    ONNX Runtime's optional pre-processing (quant_pre_process) is skipped: its symbolic shape inference
    fails on the dynamo-exported graph ("Incomplete symbolic shape inference"); the accuracy change is
    measured and reported instead.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        src,
        dst,
        weight_type=QuantType.QInt8,
        use_external_data_format=(src.parent / (src.name + ".data")).exists(),
    )
