"""Training throughput: our plain PyTorch loop vs the Hugging Face Trainer, plus checkpoint cost.

    python -m benchmarks.train                         # MiniLM, ~3 minutes on 2 CPU cores
    python -m benchmarks.train --model tiny --steps 6  # seconds: a smoke run of the harness

Writes reports/bench/train.json:
- `throughput`: training samples/s (and real tokens/s) of both loops on the same model (same init), the same
  rows of the real corpus, the same batches in the same order and the same optimizer settings, with dynamic
  padding on (pad each batch to its longest row) and off (pad to max_length). The first `--warmup` steps
  of each run are not timed (allocator and thread-pool warm-up).
- `checkpoint`: time to serialise and write a full checkpoint (model, optimizer, scheduler) through
  training.checkpoint to a local folder, and the training stall it causes: the extra wall time of the steps
  that saved over the median step, measured inside our loop.
- on CUDA also MFU (model FLOPs utilisation against the GPU's bf16 dense peak) and peak GPU memory.

Numbers on 2 shared cores are noisy: each figure is one run; compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path("reports/bench/train.json")
# bf16 dense tensor-core peaks (FLOP/s) from NVIDIA's data sheets, for MFU; unknown GPUs report no MFU.
GPU_PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10G": 125e12, "L4": 121e12}


@dataclass(frozen=True, slots=True)
class Setup:
    model: str
    steps: int
    warmup: int
    batch_size: int
    max_length: int
    lr: float = 5e-5
    seed: int = 0


@dataclass(slots=True)
class Run:
    """Per-step wall times and batch shapes of one timed training run."""

    step_s: list[float]
    samples: list[int]
    real_tokens: list[int]
    padded_tokens: list[int]
    checkpoint: dict[str, Any] | None = None

    def summary(
        self, warmup: int, flops_per_token: float | None = None, peak: float | None = None
    ) -> dict[str, Any]:
        t = sum(self.step_s[warmup:])
        n = sum(self.samples[warmup:])
        padded = sum(self.padded_tokens[warmup:])
        out: dict[str, Any] = {
            "timed_steps": len(self.step_s) - warmup,
            "samples_per_s": n / t,
            "real_tokens_per_s": sum(self.real_tokens[warmup:]) / t,
            "padding_fraction": 1 - sum(self.real_tokens[warmup:]) / padded,
            "median_step_ms": 1000 * statistics.median(self.step_s[warmup:]),
        }
        if flops_per_token and peak:
            out["mfu"] = flops_per_token * padded / t / peak
        return out


# --------------------------------------------------------------------------- shared inputs


def _data_config(setup: Setup) -> Any:
    from training.config import DataConfig

    rows = (setup.steps + setup.warmup) * setup.batch_size
    return DataConfig(max_train_rows=rows, max_val_rows=64, max_test_rows=64, max_length=setup.max_length)


def _model_config(setup: Setup) -> Any:
    from training.config import ModelConfig

    if setup.model == "tiny":
        return ModelConfig(
            pretrained=False,
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=2,
            intermediate_size=128,
        )
    return ModelConfig(name_or_path=setup.model)


def prepare(setup: Setup) -> tuple[Any, Any, list[list[int]]]:
    """Tokenizer, the encoded training split and this run's batches (row indices), as our loop builds them."""
    from training import data, features, model

    tokenizer = model.load_tokenizer(_model_config(setup))
    dataset = data.load(_data_config(setup))
    encoded, _ = features.encode_dataset(tokenizer, dataset, setup.max_length)
    train = encoded["train"]
    batches = features.epoch_batches(len(train), setup.batch_size, epoch=0, seed=setup.seed)
    return tokenizer, train, batches[: setup.steps + setup.warmup]


def fresh_model(setup: Setup) -> Any:
    from training import model
    from training.config import DataConfig

    return model.build_model(_model_config(setup), DataConfig().labels, setup.seed)


def flops_per_token(m: Any, seq_len: int) -> float:
    """Training FLOPs per token: 6 x non-embedding parameters + attention scores (PaLM appendix B)."""
    cfg = m.config
    emb = sum(p.numel() for n, p in m.named_parameters() if "embeddings" in n)
    params = sum(p.numel() for p in m.parameters()) - emb
    return 6 * params + 12 * cfg.num_hidden_layers * cfg.hidden_size * seq_len


# --------------------------------------------------------------------------- the Hugging Face Trainer


def hf_trainer_run(
    setup: Setup, tokenizer: Any, train: Any, batches: list[list[int]], *, dynamic: bool
) -> Run:
    """The same batches through transformers.Trainer (its AdamW, linear schedule, clipping)."""
    import torch
    import transformers

    order = [i for b in batches for i in b]  # Trainer then reads it sequentially in batch_size chunks

    class Rows(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(order)

        def __getitem__(self, k: int) -> dict[str, Any]:
            row = train.row(order[k]).tolist()
            return {"input_ids": row, "attention_mask": [1] * len(row), "labels": int(train.labels[order[k]])}

    class Sequential(transformers.Trainer):
        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            return torch.utils.data.SequentialSampler(train_dataset or self.train_dataset)

    run = Run([], [], [], [])

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            run.step_s.append(time.perf_counter() - self.t0)

    _batch_shapes(run, setup, train, batches, dynamic)
    collator = transformers.DataCollatorWithPadding(
        tokenizer,
        padding="longest" if dynamic else "max_length",
        max_length=None if dynamic else setup.max_length,
    )
    with tempfile.TemporaryDirectory() as tmp:
        args = transformers.TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=setup.batch_size,
            max_steps=len(batches),
            learning_rate=setup.lr,
            weight_decay=0.01,
            warmup_steps=max(1, len(batches) // 10),
            lr_scheduler_type="linear",
            max_grad_norm=1.0,
            logging_strategy="no",
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=not torch.cuda.is_available(),
            bf16=torch.cuda.is_available(),
            seed=setup.seed,
        )
        trainer = Sequential(
            model=fresh_model(setup),
            args=args,
            data_collator=collator,
            train_dataset=Rows(),
            callbacks=[Timer()],
        )
        trainer.train()
    return run


# --------------------------------------------------------------------------- our loop


def _batch_shapes(run: Run, setup: Setup, train: Any, batches: list[list[int]], dynamic: bool) -> None:
    for b in batches:
        lengths = [len(train.row(i)) for i in b]
        run.samples.append(len(b))
        run.real_tokens.append(sum(lengths))
        run.padded_tokens.append(len(b) * (max(lengths) if dynamic else setup.max_length))


def our_loop_run(
    setup: Setup,
    tokenizer: Any,
    train: Any,
    batches: list[list[int]],
    *,
    dynamic: bool,
    checkpoint_every: int | None = None,
) -> Run:
    """training.trainer.run on the same rows and batches; per-step times come from its history (one row per step)."""
    import torch

    from training import trainer
    from training.config import CheckpointConfig, OptimConfig, RunConfig

    cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(
            name="bench",
            data=_data_config(setup),
            model=_model_config(setup),
            optim=OptimConfig(lr=setup.lr, warmup_fraction=0.1),
            checkpoint=CheckpointConfig(
                uri=f"{tmp}/checkpoints",
                every_steps=checkpoint_every,
                every_minutes=None,
                keep_last=1,
                resume=False,
            ),
            epochs=1,
            max_steps=len(batches),
            batch_size=setup.batch_size,
            dynamic_padding=dynamic,
            length_bucketing=False,  # the HF side gets exactly the batches epoch_batches makes without it
            patience=None,
            log_every_steps=1,
            export=False,
            baselines=False,
            mlflow=False,
            precision="bf16" if cuda else "fp32",
            device="cuda" if cuda else "cpu",
        )
        code = trainer.run(config, Path(tmp) / "run")
        if code != 0:
            raise RuntimeError(f"training.trainer.run exited {code}")
        metrics = json.loads((Path(tmp) / "run" / "metrics.json").read_text())
    history = [h for h in metrics["history"] if "samples_per_s" in h]
    if len(history) != len(batches):
        raise RuntimeError(f"expected one history row per step ({len(batches)}), got {len(history)}")
    run = Run([], [], [], [])
    _batch_shapes(run, setup, train, batches, dynamic)
    run.step_s = [n / h["samples_per_s"] for n, h in zip(run.samples, history, strict=True)]
    run.checkpoint = metrics.get("checkpoint")
    return run


# --------------------------------------------------------------------------- checkpoints


def checkpoint_save(setup: Setup, uri: str) -> dict[str, Any]:
    """Serialise model + AdamW state (after one step, so the moments exist) and write them through the
    trainer's checkpoint store (temporary name + rename locally, one PUT per file on object storage)."""
    import torch

    from training import checkpoint

    m = fresh_model(setup)
    opt = torch.optim.AdamW(m.parameters(), lr=setup.lr)
    m(input_ids=torch.ones(2, 8, dtype=torch.long), labels=torch.zeros(2, dtype=torch.long)).loss.backward()
    opt.step()
    store = checkpoint.Store(uri)
    t0 = time.perf_counter()
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, buf)
    t1 = time.perf_counter()
    checkpoint.write_checkpoint(store, checkpoint.step_name(1), {"state.pt": buf.getvalue()})
    t2 = time.perf_counter()
    return {"uri_scheme": uri.split("://")[0] if "://" in uri else "file", "bytes": buf.tell(),
            "serialise_s": t1 - t0, "write_s": t2 - t1, "save_s": t2 - t0}  # fmt: skip


@contextlib.contextmanager
def moto_s3_bucket() -> Iterator[str | None]:
    """A bucket on a local moto S3 server over real HTTP (None when moto is not installed)."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        yield None
        return
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {
        k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    os.environ.update(
        AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
    )
    try:
        boto3.client("s3", region_name="eu-south-2").create_bucket(
            Bucket="bench", CreateBucketConfiguration={"LocationConstraint": "eu-south-2"}
        )
        yield "s3://bench/checkpoints"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


# --------------------------------------------------------------------------- harness


def environment() -> dict[str, Any]:
    import torch
    import transformers

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cuda": torch.cuda.is_available(),
        # Shared CI machines: a load far above cpu_count means the figures measure contention, not the loop.
        "load_average_1m": os.getloadavg()[0],
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def gpu_peak() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((peak for key, peak in GPU_PEAK_BF16.items() if key in name), None)


def measure(name: str, fn: Callable[..., Run], setup: Setup, inputs: tuple, dynamic: bool) -> dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    run = fn(setup, *inputs, dynamic=dynamic)
    wall = time.perf_counter() - t0
    fpt = flops_per_token(fresh_model(setup), setup.max_length) if torch.cuda.is_available() else None
    out = {
        "loop": name,
        "dynamic_padding": dynamic,
        "wall_s": wall,
        **run.summary(setup.warmup, fpt, gpu_peak()),
    }
    if torch.cuda.is_available():
        out["gpu_max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(f"  {name:<10} dynamic_padding={dynamic!s:<5} {out['samples_per_s']:7.1f} samples/s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--model", default="minilm", help="minilm (default), tiny (random 2-layer BERT) or a folder"
    )
    p.add_argument("--steps", type=int, default=20, help="timed steps per run (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    setup = Setup(args.model, args.steps, args.warmup, args.batch_size, args.max_length)

    print(f"benchmarks.train: {setup}", flush=True)
    inputs = prepare(setup)
    loops = {"ours": our_loop_run, "hf_trainer": hf_trainer_run}
    results = [
        measure(name, fn, setup, inputs, dynamic) for dynamic in (True, False) for name, fn in loops.items()
    ]

    def pick(loop: str, dynamic: bool) -> dict[str, Any]:
        return next(r for r in results if r["loop"] == loop and r["dynamic_padding"] == dynamic)

    # Checkpoint cost inside our loop: it saves on the training thread, so each save stalls training by
    # its own duration (measured by the loop, reported in metrics.json).
    every = max(1, (setup.steps + setup.warmup) // 3)
    with_saves = our_loop_run(setup, *inputs, dynamic=True, checkpoint_every=every)
    in_loop = dict(with_saves.checkpoint or {})
    in_loop.pop("uri", None)
    ckpt: dict[str, Any] = {
        "in_loop": {**in_loop, "every_steps": every, "stall_per_save_s": in_loop.get("max_save_seconds")},
        "standalone": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        ckpt["standalone"].append(checkpoint_save(setup, tmp))
    with moto_s3_bucket() as bucket:
        if bucket:
            ckpt["standalone"].append(checkpoint_save(setup, bucket))
    print(f"  checkpoint: {json.dumps(ckpt)}", flush=True)
    report = {
        "benchmark": "train",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "setup": dataclasses.asdict(setup),
        "environment": environment(),
        "throughput": results,
        "ratios": {
            "ours_over_hf_dynamic": pick("ours", True)["samples_per_s"]
            / pick("hf_trainer", True)["samples_per_s"],
            "ours_over_hf_static": pick("ours", False)["samples_per_s"]
            / pick("hf_trainer", False)["samples_per_s"],
            "dynamic_over_static_ours": pick("ours", True)["samples_per_s"]
            / pick("ours", False)["samples_per_s"],
        },
        "checkpoint": ckpt,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["ratios"], indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
