"""Training throughput on CPU: our loop vs the Hugging Face Trainer, side by side in one run, at equal accuracy.

    python -m benchmarks.train                         # MiniLM, ~4-6 minutes on 2 shared CPU cores
    python -m benchmarks.train --model tiny --steps 6  # seconds: a smoke run of the harness

Every run trains the same model (same init) on the same rows of the real corpus, with the same batch size,
optimizer (AdamW, linear warmup/decay, clipping), dynamic padding and number of samples, then scores the same
validation rows with the same function. What differs is only what the loop does with them:

- `hf_trainer`: transformers.Trainer, the batches in the seeded shuffled order, fp32 (the reference).
- `ours_same_batches`: our loop (training.trainer.run), the same batches: the loop's own overhead (one host
  sync per logging step instead of one per micro-batch, inline collation, no Trainer callbacks/accelerate).
- `ours_length_grouped`: + length-grouped batching over a wide window (less padding, still a seeded order).
- `ours`: + bf16 autocast where the CPU has native bf16 (AVX512-BF16/AMX), else the same as above.

Both loops use AdamW's fused kernel (the Trainer's default `adamw_torch_fused`): the same optimizer.

Writes reports/bench/train.json with top-level `speedup_vs_hf_trainer` (ours / hf_trainer samples/s), both
validation accuracies (`accuracy_equal`: their difference within two binomial standard errors on the
validation rows, `accuracy_tolerance`), each optimisation's contribution (ratio to the previous variant), the load average
before and after each run (the machine is shared: compare ratios of runs made side by side, not absolute
figures), and the in-loop checkpoint stall. The first `--warmup` steps of each run are not timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path("reports/bench/train.json")


def accuracy_tolerance(accuracy: float, rows: int) -> float:
    """Two standard errors of the difference of two accuracies measured on `rows` rows (binomial)."""
    return 2 * (2 * accuracy * (1 - accuracy) / rows) ** 0.5


@dataclass(frozen=True, slots=True)
class Setup:
    model: str
    steps: int
    warmup: int
    batch_size: int
    max_length: int
    val_rows: int
    bucket_window: int = 100
    lr: float = 1e-4
    seed: int = 0


def _data_config(setup: Setup) -> Any:
    from training.config import DataConfig

    rows = (setup.steps + setup.warmup) * setup.batch_size
    return DataConfig(
        max_train_rows=rows, max_val_rows=setup.val_rows, max_test_rows=64, max_length=setup.max_length
    )


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


def prepare(setup: Setup) -> tuple[Any, dict[str, Any], list[list[int]]]:
    """Tokenizer, the encoded splits and the reference batches (our sampler's order, no length grouping)."""
    from training import data, features, model

    tokenizer = model.load_tokenizer(_model_config(setup))
    dataset = data.load(_data_config(setup))
    encoded, _ = features.encode_dataset(tokenizer, dataset, setup.max_length)
    batches = features.epoch_batches(len(encoded["train"]), setup.batch_size, epoch=0, seed=setup.seed)
    return tokenizer, encoded, batches[: setup.steps + setup.warmup]


def _summary(
    setup: Setup, step_s: list[float], samples: list[int], padded: list[int], real: list[int]
) -> dict:
    w = setup.warmup
    t = sum(step_s[w:])
    return {
        "timed_steps": len(step_s) - w,
        "samples_per_s": sum(samples[w:]) / t,
        "real_tokens_per_s": sum(real[w:]) / t,
        "padding_fraction": 1 - sum(real[w:]) / sum(padded[w:]),
        "median_step_ms": 1000 * statistics.median(step_s[w:]),
    }


def _shapes(encoded: Any, batches: list[list[int]]) -> tuple[list[int], list[int], list[int]]:
    lengths = [[len(encoded.row(i)) for i in b] for b in batches]
    return [len(b) for b in batches], [len(x) * max(x) for x in lengths], [sum(x) for x in lengths]


def hf_trainer_run(setup: Setup, tokenizer: Any, encoded: dict[str, Any], batches: list[list[int]]) -> dict:
    """The reference batches through transformers.Trainer (its AdamW, linear schedule, clipping), fp32."""
    import torch
    import transformers

    from training import metrics, model
    from training.distributed import Dist
    from training.evaluate import predict

    train = encoded["train"]
    order = [i for b in batches for i in b]  # read sequentially in batch_size chunks = the same batches

    class Rows(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(order)

        def __getitem__(self, k: int) -> dict[str, Any]:
            row = train.row(order[k]).tolist()
            return {"input_ids": row, "attention_mask": [1] * len(row), "labels": int(train.labels[order[k]])}

    class Sequential(transformers.Trainer):
        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            data: Any = train_dataset or self.train_dataset
            return torch.utils.data.SequentialSampler(data)

    step_s: list[float] = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step_s.append(time.perf_counter() - self.t0)

    net = model.build_model(_model_config(setup), ("negative", "positive"), setup.seed)
    with tempfile.TemporaryDirectory() as tmp:
        args = transformers.TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=setup.batch_size,
            max_steps=len(batches),
            learning_rate=setup.lr,
            weight_decay=0.01,
            warmup_steps=max(1, int(0.1 * len(batches))),
            lr_scheduler_type="linear",
            max_grad_norm=1.0,
            logging_strategy="no",
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=True,
            seed=setup.seed,
        )
        collator = transformers.DataCollatorWithPadding(tokenizer, padding="longest")
        Sequential(
            model=net, args=args, data_collator=collator, train_dataset=Rows(), callbacks=[Timer()]
        ).train()
    dist = Dist(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    val = encoded["validation"]
    probs = predict(net, val, batch_size=64, pad_id=tokenizer.pad_token_id or 0, dist=dist)
    samples, padded, real = _shapes(train, batches)
    return {**_summary(setup, step_s, samples, padded, real), "validation": metrics.scores(val.labels, probs)}


def our_loop_run(
    setup: Setup, encoded: dict[str, Any], *, grouped: bool, bf16: bool, checkpoint_every: int | None = None
) -> dict:
    """training.trainer.run; per-step times from its history (one row per step), batch shapes recomputed."""
    from training import features, trainer
    from training.config import CheckpointConfig, OptimConfig, RunConfig

    train = encoded["train"]
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(
            name="bench",
            data=_data_config(setup),
            model=_model_config(setup),
            optim=OptimConfig(lr=setup.lr, warmup_fraction=0.1),
            checkpoint=CheckpointConfig(
                uri=f"{tmp}/checkpoints", every_steps=checkpoint_every, every_minutes=None, resume=False
            ),
            epochs=1,
            max_steps=setup.steps + setup.warmup,
            batch_size=setup.batch_size,
            eval_batch_size=64,
            length_bucketing=grouped,
            bucket_window=setup.bucket_window,
            patience=None,
            log_every_steps=1,  # one history row per step: per-step times (costs one host sync per step)
            export=False,
            baselines=False,
            mlflow=False,
            precision="bf16" if bf16 else "fp32",
            device="cpu",
        )
        if trainer.run(config, Path(tmp) / "run") != 0:
            raise RuntimeError("training.trainer.run failed")
        result = json.loads((Path(tmp) / "run" / "metrics.json").read_text())
    batches = features.epoch_batches(
        len(train),
        setup.batch_size,
        epoch=0,
        seed=setup.seed,
        lengths=train.lengths() if grouped else None,
        window_batches=setup.bucket_window,
    )[: setup.steps + setup.warmup]
    samples, padded, real = _shapes(train, batches)
    history = [h for h in result["history"] if "samples_per_s" in h]
    step_s = [n / h["samples_per_s"] for n, h in zip(samples, history, strict=True)]
    return {
        **_summary(setup, step_s, samples, padded, real),
        "validation": result["validation"],
        "checkpoint": result["checkpoint"],
    }


def environment() -> dict[str, Any]:
    import torch
    import transformers

    from training.accel import cpu_has_native_bf16

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "load_average_1m": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--model", default="minilm", help="minilm (default), tiny (random 2-layer BERT) or a folder"
    )
    p.add_argument("--steps", type=int, default=40, help="timed steps per run (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--val-rows", type=int, default=400)
    p.add_argument("--bucket-window", type=int, default=100, help="batches per length-sorted window")
    p.add_argument("--rounds", type=int, default=2, help="interleaved repetitions (default %(default)s)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    setup = Setup(
        args.model,
        args.steps,
        args.warmup,
        args.batch_size,
        args.max_length,
        args.val_rows,
        args.bucket_window,
    )
    os.environ.setdefault("TRAINING_MLFLOW", "0")

    print(f"benchmarks.train: {setup}", flush=True)
    tokenizer, encoded, batches = prepare(setup)
    every = max(1, (setup.steps + setup.warmup) // 3)
    runs = {
        "hf_trainer": lambda: hf_trainer_run(setup, tokenizer, encoded, batches),
        "ours_same_batches": lambda: our_loop_run(setup, encoded, grouped=False, bf16=False),
        "ours_length_grouped": lambda: our_loop_run(setup, encoded, grouped=True, bf16=False),
        # Saves every third of the run: the stall is read from the loop (its step times exclude the saves).
        "ours": lambda: our_loop_run(setup, encoded, grouped=True, bf16=True, checkpoint_every=every),
    }
    # Rounds interleave the variants (A B C D A B C D): drift in the machine's load hits all of them alike;
    # each variant's figure is its median over the rounds.
    rounds: dict[str, list[dict]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            load_before = os.getloadavg()[0]
            r = {**fn(), "load_average_1m_before": load_before, "load_average_1m_after": os.getloadavg()[0]}
            rounds[name].append(r)
            print(
                f"  {name:<20} {r['samples_per_s']:6.1f} samples/s  padding {r['padding_fraction']:.2f}  "
                f"val acc {r['validation']['accuracy']:.4f}  load {load_before:.1f}",
                flush=True,
            )
    results = {
        name: {**sorted(rs, key=lambda r: r["samples_per_s"])[len(rs) // 2], "rounds": rs}
        for name, rs in rounds.items()
    }
    tolerance = accuracy_tolerance(
        results["hf_trainer"]["validation"]["accuracy"], len(encoded["validation"])
    )
    sps = {k: statistics.median(r["samples_per_s"] for r in rs) for k, rs in rounds.items()}
    acc = {k: v["validation"]["accuracy"] for k, v in results.items()}
    stall = results["ours"]["checkpoint"]
    report = {
        "benchmark": "train",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "speedup_vs_hf_trainer": sps["ours"] / sps["hf_trainer"],
        "validation_accuracy_all": acc,
        "validation_accuracy": {
            "ours": acc["ours"],
            "hf_trainer": acc["hf_trainer"],
        },
        "accuracy_difference": acc["ours"] - acc["hf_trainer"],
        "accuracy_tolerance": tolerance,
        "accuracy_equal": abs(acc["ours"] - acc["hf_trainer"]) <= tolerance,
        "samples_each": (setup.steps + setup.warmup) * setup.batch_size,
        "samples_per_s_median": sps,
        "rounds": args.rounds,
        "contributions": {
            "loop_overhead (ours_same_batches / hf_trainer)": sps["ours_same_batches"] / sps["hf_trainer"],
            "length_grouping (ours_length_grouped / ours_same_batches)": sps["ours_length_grouped"]
            / sps["ours_same_batches"],
            "bf16_autocast (ours / ours_length_grouped)": sps["ours"] / sps["ours_length_grouped"],
        },
        "setup": dataclasses.asdict(setup),
        "environment": environment(),
        "runs": results,
        "checkpoint": {"every_steps": every, **{k: v for k, v in stall.items() if k != "uri"}},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("speedup_vs_hf_trainer", "validation_accuracy", "contributions")},
            indent=2,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
