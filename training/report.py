"""The end of a run: best-model folder, metrics.json (with baselines), manifest.json, cost.json, export bundle."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from training import checkpoint as ckpt
from training import data, distributed, metrics
from training import environment as env
from training.config import RunConfig
from training.errors import EXIT_OK
from training.state import State
from training.tracking import Tracker

log = logging.getLogger("training")


def score_best(
    config: RunConfig,
    dist: distributed.Dist,
    raw_model: Any,
    encoded: dict[str, Any],
    pad_id: int,
    autocast: Any,
    store: ckpt.Store,
    state: State,
) -> tuple[ckpt.Loaded | None, dict[str, dict[str, float]]]:
    """Load the recorded best weights (training/checkpoint.py: recorded_best) and score validation and test."""
    from training import state as state_mod
    from training.evaluate import predict

    best = ckpt.recorded_best(store, state.best_step)
    if best is not None:
        raw_model.load_state_dict(state_mod.torch_load(best.files["model.pt"]))
    results = {
        split: metrics.scores(
            encoded[split].labels,
            predict(
                raw_model,
                encoded[split],
                batch_size=config.eval_batch_size,
                pad_id=pad_id,
                dist=dist,
                autocast=autocast,
            ),
        )
        for split in ("validation", "test")
    }
    return best, results


def finish(
    config: RunConfig,
    output: Path,
    dist: distributed.Dist,
    raw_model: Any,
    tokenizer: Any,
    dataset: data.Dataset,
    results: dict[str, dict[str, float]],
    state: State,
    store: ckpt.Store,
    best: ckpt.Loaded | None,
    tracker: Tracker,
    save_times: list[float],
    token_cache: str,
    wall_start: float,
    *,
    wall_seconds: float | None = None,
) -> int:
    """``wall_seconds``: the run's time when this attempt trained nothing (training/rerun.py reported_wall)."""
    model_dir = output / "model"
    raw_model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    (output / "manifest.json").write_text(json.dumps(dataset.manifest, indent=2), encoding="utf-8")

    base: dict[str, Any] = {}
    if config.baselines:
        base = metrics.baselines(
            dataset.train.texts,
            dataset.train.labels,
            {
                "validation": (dataset.validation.texts, dataset.validation.labels),
                "test": (dataset.test.texts, dataset.test.labels),
            },
            seed=config.seed,
            num_classes=len(config.data.labels),
        )
    beats = bool(base) and results["test"]["accuracy"] > base["tfidf_logreg"]["test"]["accuracy"]
    wall = state.wall_seconds + (time.monotonic() - wall_start) if wall_seconds is None else wall_seconds
    out: dict[str, Any] = {
        "test": results["test"],
        "validation": results["validation"],
        "baselines": {name: scores["test"] for name, scores in base.items()},
        "baselines_validation": {name: scores["validation"] for name, scores in base.items()},
        "beats_tfidf": beats,
        "best_step": best.step if best else None,
        "stopped_early": state.stopped_early,
        **_run_facts(dist, dataset, state, store, save_times, token_cache, wall),
    }
    if base and not beats:
        log.warning(
            "the model (test accuracy %.4f) does NOT beat TF-IDF + logistic regression (%.4f)",
            results["test"]["accuracy"],
            base["tfidf_logreg"]["test"]["accuracy"],
        )
    _write_cost(config, output, dist, store, state, best.manifest if best else None, wall)
    _write_metrics(output, out)

    if config.export:
        out["export"] = _export(config, output, model_dir, dataset, out)
        _write_metrics(output, out)
    tracker.metrics(
        {f"test_{k}": v for k, v in results["test"].items()}
        | {f"tfidf_test_{k}": v for k, v in out["baselines"].get("tfidf_logreg", {}).items()},
        state.step,
    )
    for name in ("metrics.json", "manifest.json", "cost.json"):
        tracker.artifact(output / name)
    tracker.end()
    log.info(
        "test accuracy %.4f f1 %.4f auc %.4f | tf-idf %.4f | majority %.4f | %s",
        results["test"]["accuracy"],
        results["test"]["f1"],
        results["test"]["auc"],
        out["baselines"].get("tfidf_logreg", {}).get("accuracy", float("nan")),
        out["baselines"].get("majority", {}).get("accuracy", float("nan")),
        "beats TF-IDF" if beats else "does not beat TF-IDF",
    )
    return EXIT_OK


def finish_stopped(
    config: RunConfig,
    output: Path,
    dist: distributed.Dist,
    dataset: data.Dataset,
    state: State,
    store: ckpt.Store,
    tracker: Tracker,
    save_times: list[float],
    token_cache: str,
    wall_start: float,
) -> int:
    """The end of a run its caller stopped (a pruned trial, training/tune.py): its weights are never used.

    So no test-split scoring, baselines, model folder or export: metrics.json gives the validation scores
    of the best step (as the loop measured them; its weights stay in ``best-<step>/``), "test": null and
    "stopped_by_caller": true; cost.json is written as for any run (the study's budget counts it).
    """
    validations = [row for row in state.history if "val_accuracy" in row]
    # The best step's row; the last one when no validation improved (a NaN score never beats -inf).
    row = next(
        (r for r in validations if r["step"] == state.best_step), validations[-1] if validations else {}
    )
    val = {key.removeprefix("val_"): value for key, value in row.items() if key.startswith("val_")}
    wall = state.wall_seconds + (time.monotonic() - wall_start)
    out: dict[str, Any] = {
        "test": None,
        "validation": val,
        "stopped_by_caller": True,
        "best_step": state.best_step,
        **_run_facts(dist, dataset, state, store, save_times, token_cache, wall),
    }
    best = (
        ckpt.verify(store, ckpt.step_name(state.best_step, ckpt.BEST_PREFIX), wanted=[])
        if state.best_step is not None
        else None
    )
    _write_cost(config, output, dist, store, state, best[0] if best else None, wall)
    _write_metrics(output, out)
    for name in ("metrics.json", "cost.json"):
        tracker.artifact(output / name)
    tracker.end()
    log.info("stopped by its caller at step %d: best validation %s", state.step, val)
    return EXIT_OK


def _run_facts(
    dist: distributed.Dist,
    dataset: data.Dataset,
    state: State,
    store: ckpt.Store,
    save_times: list[float],
    token_cache: str,
    wall: float,
) -> dict[str, Any]:
    """metrics.json's account of the run itself, the same for a finished run and a stopped one."""
    return {
        "train_samples_per_s": state.samples_seen / state.train_seconds if state.train_seconds else 0.0,
        "epochs_run": state.epoch + (1 if state.batch_in_epoch else 0),  # epochs started
        "steps": state.step,
        "history": state.history,
        "dataset_manifest_sha256": dataset.manifest["sha256"],
        "world_size": dist.world_size,
        "device": str(dist.device),
        "attempts": state.attempts,
        "wall_seconds": wall,
        "data": {**dataset.stats, "token_cache": token_cache},
        "checkpoint": {
            "uri": store.uri,
            "saves_this_attempt": len(save_times),
            "max_save_seconds": max(save_times) if save_times else None,
        },
        "export": None,
    }


def _write_cost(
    config: RunConfig,
    output: Path,
    dist: distributed.Dist,
    store: ckpt.Store,
    state: State,
    best_manifest: dict[str, Any] | None,
    wall: float,
) -> None:
    from training import cost

    nodes = env.TRAINING_NODES.get() or max(1, dist.world_size // (env.LOCAL_WORLD_SIZE.get() or 1))
    storage = sum(int(f["bytes"]) for f in (best_manifest["files"].values() if best_manifest else []))
    latest_ckpt = ckpt.verify(store, ckpt.step_name(state.step), wanted=[])
    if latest_ckpt:
        storage += sum(int(f["bytes"]) for f in latest_ckpt[0]["files"].values())
    record = cost.record(
        cloud=env.TRAINING_CLOUD.get() or config.cloud,
        region=env.TRAINING_REGION.get() or config.region,
        instance_type=env.TRAINING_INSTANCE_TYPE.get() or config.instance_type,
        nodes=nodes,
        wall_seconds=wall,
        storage_bytes=storage,
    )
    (output / "cost.json").write_text(json.dumps(record, indent=2), encoding="utf-8")


def _write_metrics(output: Path, out: dict[str, Any]) -> None:
    tmp = output / ".metrics.json.tmp"
    tmp.write_text(json.dumps(out, indent=2), encoding="utf-8")
    tmp.replace(output / "metrics.json")


def _export(
    config: RunConfig, output: Path, model_dir: Path, dataset: data.Dataset, out: dict[str, Any]
) -> dict[str, Any] | None:
    try:
        from training.export import export_bundle
    except ImportError as exc:
        log.warning("export skipped: training.export.export_bundle is not available (%s)", exc)
        return None
    from training.export_errors import ExportError

    try:
        meta = export_bundle(
            model_dir,
            output / "export",
            dataset.test.texts,
            dataset.test.labels,
            max_length=config.data.max_length,
            metadata={
                "model_name": config.name,
                "dataset_manifest_sha256": dataset.manifest["sha256"],
                "metrics": out["test"],
            },
            quantize=config.quantize,
        )
    except ExportError as exc:
        # At the end of a run that may have taken hours: a rerun of `train` repeats the same export and fails
        # the same way, while the trained model is already safe. Say so, and how to redo only the export.
        raise ExportError(
            f"{exc} -- the training itself finished: the model is in {model_dir} and {output / 'metrics.json'} "
            f"is written. Redo only the export with `python -m training export {model_dir} --out "
            f"{output / 'export'} --data {config.data.source}` (its flags take the fix above), or rerun train "
            "with export=false"
        ) from exc
    return {
        "parity": meta.get("parity"),
        "quantization": meta.get("quantization"),
        "dir": str(output / "export"),
    }
