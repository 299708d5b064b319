"""Read and check an export bundle (the contract written by `training.export.export_bundle`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.errors import BundleError

SUPPORTED_FORMAT = 1
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "logits"


@dataclass(frozen=True, slots=True)
class Bundle:
    path: Path
    metadata: dict[str, Any]
    labels: tuple[str, ...]

    @property
    def max_length(self) -> int:
        return int(self.metadata["max_length"])

    @property
    def onnx(self) -> Path:
        return self.path / "model.onnx"

    @property
    def int8(self) -> Path | None:
        quant = self.metadata.get("quantization") or {}
        path = self.path / str(quant.get("file") or "model.int8.onnx")
        return path if path.is_file() else None

    def model_file(self, precision: str) -> Path:
        if precision == "fp32":
            return self.onnx
        if precision == "int8":
            if self.int8 is None:
                raise BundleError(
                    f"{self.path} has no int8 model: export with `python -m training export ... --quantize` "
                    "or build with --precision fp32"
                )
            return self.int8
        raise BundleError(f"precision {precision!r}: use fp32 or int8")

    def check_graph(self, model_file: Path) -> None:
        """Load `model_file` in ONNX Runtime and run it once on two tokens: a graph that does not load
        or whose logits do not match labels.json fails the build here, not at server start (where one
        bad version keeps the whole repository from loading) or as silently mislabelled answers."""
        import numpy as np
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own classes for every kind of bad file
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BundleError(
                f"{model_file} does not load in ONNX Runtime ({reason}): re-run the export"
            ) from exc
        names = {i.name for i in session.get_inputs()}
        if names != set(INPUT_NAMES):
            raise BundleError(
                f"{model_file}: graph inputs {sorted(names)}, serving needs {list(INPUT_NAMES)}"
            )
        if OUTPUT_NAME not in {o.name for o in session.get_outputs()}:
            raise BundleError(f"{model_file}: the graph has no {OUTPUT_NAME!r} output: re-run the export")
        tokens = np.ones((1, 2), dtype=np.int64)
        try:
            (logits,) = session.run([OUTPUT_NAME], {name: tokens for name in INPUT_NAMES})
        except Exception as exc:  # noqa: BLE001
            raise BundleError(f"{model_file} fails on a 2-token input ({exc}): re-run the export") from exc
        if logits.shape != (1, len(self.labels)):
            raise BundleError(
                f"{model_file}: logits have shape {list(logits.shape)} for one text, but labels.json "
                f"names {len(self.labels)} classes {list(self.labels)}: export labels.json with the model"
            )


def load_bundle(path: str | Path) -> Bundle:
    """The bundle at `path`, after checking the files and metadata serving relies on."""
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"{path} is not a folder: pass the export bundle (e.g. runs/demo/export)")
    missing = [
        name
        for name in ("model.onnx", "labels.json", "metadata.json", "tokenizer/tokenizer.json")
        if not (path / name).is_file()
    ]
    if missing:
        raise BundleError(f"{path} is not a complete export bundle: missing {missing} (re-run the export)")
    try:
        metadata = json.loads((path / "metadata.json").read_text())
        labels = json.loads((path / "labels.json").read_text())
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: unreadable JSON ({exc}); re-run the export") from exc
    if not isinstance(metadata, dict):
        raise BundleError(f"{path}/metadata.json is not a JSON object: re-run the export")
    found = metadata.get("format_version")
    # Newer: "export it again" would make the same bundle; the fix is a serving that reads it.
    if type(found) is int and found > SUPPORTED_FORMAT:
        raise BundleError(
            f"{path}: bundle format_version {found} comes from a newer training export; this serving reads "
            f"format {SUPPORTED_FORMAT}: build it with a serving that reads format {found}, or export the "
            "model with this repository's `python -m training export`"
        )
    if found != SUPPORTED_FORMAT:
        raise BundleError(
            f"{path}: bundle format_version {found!r}, this serving reads "
            f"{SUPPORTED_FORMAT}: export it again with the matching training version"
        )
    names = tuple(i.get("name") for i in metadata.get("inputs", []))
    if names != INPUT_NAMES:
        raise BundleError(f"{path}: model inputs {names}, serving needs exactly {INPUT_NAMES}")
    if not isinstance(metadata.get("max_length"), int) or metadata["max_length"] < 2:
        raise BundleError(f"{path}: metadata max_length must be an integer >= 2")
    if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) and x for x in labels):
        raise BundleError(f"{path}: labels.json must be a list of >= 2 class names (index = class id)")
    outputs = metadata.get("outputs") or [{}]
    width = (outputs[0].get("shape") or [-1, len(labels)])[-1]
    if width not in (-1, len(labels)):
        raise BundleError(f"{path}: logits have {width} classes but labels.json names {len(labels)}")
    return Bundle(path=path, metadata=metadata, labels=tuple(labels))
