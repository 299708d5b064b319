"""GPU training benchmark on the `gpu` preset: samples/s, MFU and checkpoint stall, in at most 8 minutes.

    python -m benchmarks.train_gpu              # one CUDA GPU (H200 or any): writes reports/bench/train_gpu.json
    python -m benchmarks.train_gpu --dry-run    # the same code paths on CPU with a tiny model, < 2 minutes

It runs the real trainer (training.trainer.run) with the `gpu` preset's settings (bf16 autocast, TF32,
torch.compile before DDP, fused AdamW, pinned-memory DataLoader, length-grouped batches) for a bounded number
of steps, with checkpoints every third of the run, and reads back what the loop measured:

- samples/s: median over logging windows after the first (compilation and allocator warm-up excluded);
- MFU: model FLOPs of the steps actually run, from the architecture (6 x non-embedding parameters per token
  for the dense layers, forward + backward, plus 12 x layers x hidden x sequence length per token for the
  attention scores and weighted sums; PaLM, appendix B) and each batch's real padded shape, divided by the
  time and the GPU's dense bf16 peak from NVIDIA's data sheet (unknown GPU: no MFU, FLOP/s still reported);
- checkpoint stall: the seconds each synchronous save held the loop (max and count).

A deadline (7 minutes of training) ends the run cleanly if the GPU is slower than expected. Any error exits
non-zero (the trainer's own exit code, or 1 with the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

OUT = Path("reports/bench/train_gpu.json")
TRAIN_BUDGET_S = 7 * 60
# Dense bf16 tensor-core peaks (FLOP/s) from NVIDIA's data sheets (without sparsity).
GPU_PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12, "L4": 121e12}
# Dry run only: a nominal CPU peak (cores x 2 AVX-512 FMA units x 16 fp32 lanes x 2 FLOP x 2 GHz), so that
# the MFU arithmetic runs; the figure is not a claim about the CPU.
NOMINAL_CPU_FLOPS_PER_CORE = 2 * 16 * 2 * 2e9


def run_config(dry_run: bool, steps: int) -> Any:
    from training import presets
    from training.config import apply_overrides

    common = [
        f"max_steps={steps}",
        "epochs=4",
        f"checkpoint.every_steps={max(1, steps // 3)}",
        "checkpoint.every_minutes=none",
        "checkpoint.resume=false",
        "eval_every_steps=none",
        "patience=none",
        "log_every_steps=10",
        "export=false",
        "baselines=false",
        "mlflow=false",
    ]
    if not dry_run:
        return apply_overrides(presets.gpu(), [*common, "compile=true"])
    # The gpu preset's settings with a tiny random BERT on CPU: bf16 autocast (native bf16 CPUs), the
    # DataLoader path, the compile-before-DDP wrapper (compile itself is CUDA-only), the same measurements.
    return apply_overrides(
        presets.gpu(),
        [
            *common,
            "device=cpu",
            "compile=true",
            "model.pretrained=false",
            "model.num_hidden_layers=2",
            "model.hidden_size=64",
            "model.num_attention_heads=2",
            "model.intermediate_size=128",
            "data.max_train_rows=320",
            "cpu_threads=1",  # a 64-wide model gains nothing from a second thread on a shared machine
            "data.max_val_rows=64",
            "data.max_test_rows=64",
            "data.max_length=64",
            "batch_size=16",
            "eval_batch_size=64",
            "optim.lr=3e-3",
            "log_every_steps=4",
        ],
    )


def model_flops(config: Any, batches: list[tuple[int, int]]) -> float:
    """Training FLOPs of these (batch size, padded length) steps for the configured architecture."""
    from training.model import build_model

    m = build_model(config.model, config.data.labels, config.seed)
    emb = sum(p.numel() for n, p in m.named_parameters() if "embeddings" in n)
    dense = sum(p.numel() for p in m.parameters()) - emb
    layers, hidden = m.config.num_hidden_layers, m.config.hidden_size
    return float(sum(6 * dense * b * s + 12 * layers * hidden * s * b * s for b, s in batches))


def step_shapes(config: Any, steps: int) -> list[tuple[int, int]]:
    """(rows, padded length) of each micro-batch the run trained on, rebuilt from its seeded sampler."""
    from training import data, features
    from training.model import load_tokenizer

    dataset = data.load(config.data)
    encoded, _ = features.encode_dataset(load_tokenizer(config.model), dataset, config.data.max_length)
    train = encoded["train"]
    lengths = train.lengths()
    shapes: list[tuple[int, int]] = []
    epoch = 0
    while len(shapes) < steps * config.optim.grad_accum_steps:
        for b in features.epoch_batches(
            len(train),
            config.batch_size,
            epoch=epoch,
            seed=config.seed,
            lengths=lengths if config.length_bucketing else None,
            window_batches=config.bucket_window,
        ):
            shapes.append((len(b), int(max(lengths[i] for i in b))))
        epoch += 1
    return shapes[: steps * config.optim.grad_accum_steps]


def peak_flops(dry_run: bool) -> tuple[float | None, str]:
    import torch

    if dry_run or not torch.cuda.is_available():
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return cores * NOMINAL_CPU_FLOPS_PER_CORE, f"nominal CPU ({cores} cores)"
    name = torch.cuda.get_device_name(0)
    return next((p for k, p in GPU_PEAK_BF16.items() if k in name), None), name


def measure(dry_run: bool, steps: int) -> dict[str, Any]:
    import torch

    from training.trainer import Hooks, run

    if not dry_run and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device visible; use --dry-run to check the code paths on CPU")
    config = run_config(dry_run, steps)
    with tempfile.TemporaryDirectory() as tmp:
        hooks = Hooks(deadline=time.monotonic() + TRAIN_BUDGET_S)
        code = run(config, Path(tmp) / "run", hooks)
        if code != 0:
            raise RuntimeError(f"training.trainer.run exited {code}")
        metrics = json.loads((Path(tmp) / "run" / "metrics.json").read_text())
    windows = [h for h in metrics["history"] if "samples_per_s" in h]
    if len(windows) < 2:
        raise RuntimeError(f"too few logging windows ({len(windows)}) to leave out the warm-up one")
    done = metrics["steps"]
    shapes = step_shapes(config, done)
    rows = sum(b for b, _ in shapes)
    train_s = rows / metrics["train_samples_per_s"]  # the loop's own timed seconds (saves excluded)
    peak, device_name = peak_flops(dry_run)
    flops = model_flops(config, shapes)
    out: dict[str, Any] = {
        "steps": done,
        "stopped_by": "deadline" if hooks.stopped == "deadline" else "max_steps",
        "samples_per_s": statistics.median(w["samples_per_s"] for w in windows[1:]),
        "samples_per_s_including_warmup": metrics["train_samples_per_s"],
        "achieved_tflops": flops / train_s / 1e12,
        "peak_tflops": peak / 1e12 if peak else None,
        "peak_source": device_name,
        "mfu": flops / train_s / peak if peak else None,
        "padded_tokens": sum(b * s for b, s in shapes),
        "checkpoint": {
            "saves": metrics["checkpoint"]["saves_this_attempt"],
            "stall_max_s": metrics["checkpoint"]["max_save_seconds"],
        },
        "validation": metrics["validation"],
        "device": metrics["device"],
    }
    if torch.cuda.is_available() and not dry_run:
        out["gpu_max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny model: check the code paths (< 2 min)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default 600; dry run 12)")
    p.add_argument(
        "--out", type=Path, default=None, help=f"report (default {OUT}; dry run: train_gpu_dry.json)"
    )
    args = p.parse_args(argv)
    steps = args.steps or (12 if args.dry_run else 600)
    out = args.out or (OUT.with_name("train_gpu_dry.json") if args.dry_run else OUT)
    os.environ.setdefault("TRAINING_MLFLOW", "0")
    started = time.monotonic()
    try:
        result = measure(args.dry_run, steps)
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001 (report any failure as a non-zero exit with its traceback)
        traceback.print_exc()
        return 1
    report = {
        "benchmark": "train_gpu",
        "dry_run": args.dry_run,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": time.monotonic() - started,
        "load_average_1m": os.getloadavg()[0],
        **result,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("samples_per_s", "mfu", "achieved_tflops", "checkpoint")}, indent=2
        )
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
