"""The PyTorch -> ONNX step: torch.onnx.export through torch.export (dynamo), dynamic batch and length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.export_parity import INPUT_NAMES, OUTPUT_NAME, tokenize

OPSET = 18
# protobuf caps a message at 2 GiB; stay well under it before switching to an external data file.
SINGLE_FILE_LIMIT_BYTES = 1_500_000_000


class _LogitsOnly:
    """Builds the nn.Module wrapper lazily (torch is imported only when exporting)."""

    @staticmethod
    def wrap(model: Any) -> Any:
        import torch

        class LogitsOnly(torch.nn.Module):
            # Exactly the contract's inputs: BERT's token_type_ids default to zeros, which is what a
            # single-sentence classifier uses, so serving never has to send them.
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
                return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

        return LogitsOnly(model).eval()


def export_onnx(model: Any, tokenizer: Any, path: Path, *, max_length: int) -> None:
    """torch.onnx.export through torch.export (dynamo) with dynamic batch and sequence axes."""
    import torch

    sample = {
        k: torch.from_numpy(v)
        for k, v in tokenize(tokenizer, ["a short one", "a longer sample text"], max_length).items()
    }
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    torch.onnx.export(
        _LogitsOnly.wrap(model),
        (sample["input_ids"], sample["attention_mask"]),
        str(path),
        dynamo=True,
        opset_version=OPSET,
        input_names=list(INPUT_NAMES),
        output_names=[OUTPUT_NAME],
        dynamic_shapes={name: {0: batch, 1: sequence} for name in INPUT_NAMES},
        external_data=needs_external_data(model),
        verbose=False,
    )


def needs_external_data(model: Any) -> bool:
    return sum(p.numel() * p.element_size() for p in model.parameters()) > SINGLE_FILE_LIMIT_BYTES
