"""`python -m training export`: re-export a saved model folder to the bundle (training/export.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from training.export_errors import ExportError
from training.export_parity import MIN_PARITY_TEXTS


def _read_texts(
    path: Path, n: int, class_names: tuple[str, ...] = ("negative", "positive")
) -> tuple[list[str], list[int] | None]:
    """Texts (and labels when present) from a .jsonl/.csv/.txt file with a `text` (and `label`) column.

    Labels are read as training reads them (training/data.py `label_id`): class names or ids.
    """
    import csv

    from training.data import label_id

    rows: list[dict[str, Any]]
    try:
        if path.suffix == ".jsonl":
            lines = path.read_text(encoding="utf-8-sig").splitlines()
            rows = [json.loads(line) for line in lines if line.strip()]
        elif path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8-sig") as fh:
                rows = list(csv.DictReader(fh))
        else:
            rows = [
                {"text": line} for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()
            ]
    except FileNotFoundError:
        raise ExportError(f"--texts {path}: no such file") from None
    except OSError as exc:  # a folder, no permission: was a traceback (exit 1)
        raise ExportError(f"--texts {path}: {exc.strerror}: pass a .jsonl/.csv/.txt file") from None
    except (ValueError, csv.Error) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ExportError(
            f"--texts {path}: cannot be read as UTF-8 {path.suffix or 'text'} ({exc})"
        ) from None
    if rows and not all(isinstance(r, dict) for r in rows):
        raise ExportError(f"--texts {path}: every line must be a JSON object with a `text` key")
    if rows and "text" not in rows[0]:
        raise ExportError(f"--texts {path}: no `text` column (found {sorted(rows[0])})")
    rows = rows[:n]
    texts = [str(r["text"]) for r in rows]
    if not (rows and all("label" in r for r in rows)):
        return texts, None
    labels = [label_id(r["label"], class_names) for r in rows]
    bad = [(i, r["label"]) for i, (r, lab) in enumerate(zip(rows, labels, strict=True)) if lab is None]
    if bad:
        row, value = bad[0]
        raise ExportError(
            f"--texts {path}: row {row + 1} has label {value!r}; labels must be one of {list(class_names)} "
            f"or 0..{len(class_names) - 1} ({len(bad)} rows do not), or drop the label column to check parity only"
        )
    return texts, [lab for lab in labels if lab is not None]


def _read_metrics(path: Path) -> dict[str, Any]:
    """The run's metrics.json, whose test scores go into metadata.json (and from there into promotion).

    A damaged one (a run killed while writing it) used to be a JSONDecodeError/AttributeError traceback, exit 1.
    """
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(
            f"metrics file {path} cannot be read as JSON ({exc}): pass the run's metrics.json with --metrics, "
            "or rerun the training that writes it"
        ) from None
    if not isinstance(run, dict) or not isinstance(run.get("test", {}), dict):
        raise ExportError(
            f"metrics file {path} is not a run's metrics.json (a JSON object with a `test` object): "
            "pass the right one with --metrics"
        )
    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a trained Hugging Face model folder to the ONNX bundle serving reads",
        description="Export MODEL_DIR to an ONNX bundle, checking parity against PyTorch on the held-out test "
        "texts of the preset's data (or on --texts).",
    )
    p.add_argument("model_dir", type=Path, help="Hugging Face model folder (a run's DIR/model)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="bundle folder to create (an earlier bundle there is replaced; any other folder is refused)",
    )
    p.add_argument(
        "--preset", default="demo", help="preset whose data split gives the test texts (default demo)"
    )
    p.add_argument("--data", help="dataset URI of the run, if not the preset's")
    p.add_argument(
        "--texts",
        type=Path,
        help="parity texts instead: .jsonl/.csv with text[,label] (label: class name or id), or .txt",
    )
    p.add_argument("--n-texts", type=int, default=1000, help="at most this many texts (default %(default)s)")
    p.add_argument(
        "--max-length", type=int, help="tokenizer truncation (default: the preset's data.max_length)"
    )
    p.add_argument(
        "--quantize", action="store_true", help="also write model.int8.onnx (needs labelled texts)"
    )
    p.add_argument(
        "--no-optimize",
        dest="optimize",
        action="store_false",
        help="ship the plain exported graph (default: ONNX Runtime's transformer fusions, parity-checked)",
    )
    p.add_argument("--metrics", type=Path, help="the run's metrics.json (default: MODEL_DIR/../metrics.json)")
    p.add_argument("--model-version", help="version string recorded in metadata.json")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides used by the run")
    p.set_defaults(func=_cli_export)


def _cli_export(args: argparse.Namespace) -> int:
    from training import data, presets
    from training.config import apply_overrides

    # 0 or less used to pass silently: --n-texts -3 dropped the last 3 texts, --max-length 0 meant the default.
    if args.n_texts < 1:
        raise ExportError(
            f"--n-texts {args.n_texts}: pass at least 1 (release bundles check >= {MIN_PARITY_TEXTS})"
        )
    if args.max_length is not None and args.max_length < 2:
        raise ExportError(
            f"--max-length {args.max_length}: pass >= 2 (the tokenizer's start and end tokens, [CLS]/[SEP] or "
            "<s>/</s>), or omit it"
        )
    from training.model import with_model_labels

    config = with_model_labels(
        apply_overrides(presets.get(args.preset), args.overrides), args.model_dir, args.overrides
    )
    if args.data:
        config = apply_overrides(config, {"data.source": args.data})
    if args.texts is not None:
        texts, labels = _read_texts(args.texts, args.n_texts, config.data.labels)
    else:
        test = data.load(config.data).test  # the same deterministic split the run was scored on
        texts, labels = test.texts[: args.n_texts], test.labels[: args.n_texts]
    if len(texts) < MIN_PARITY_TEXTS:
        print(
            f"warning: parity on {len(texts)} texts; release bundles check >= {MIN_PARITY_TEXTS}",
            file=sys.stderr,
        )
    extra: dict[str, Any] = {"model_name": config.name, "model_version": args.model_version}
    if args.metrics is not None and not args.metrics.is_file():
        raise ExportError(f"--metrics {args.metrics}: no such file: pass the run's metrics.json or omit it")
    metrics_file = args.metrics or args.model_dir / ".." / "metrics.json"
    if metrics_file.is_file():
        run = _read_metrics(metrics_file)
        extra["metrics"] = run.get("test", {})
        extra["dataset_manifest_sha256"] = run.get("dataset_manifest_sha256")
    # An ExportError is a TrainingError: the training CLI prints it and exits 2.
    from training.export import export_bundle

    meta = export_bundle(
        args.model_dir,
        args.out,
        texts,
        labels,
        max_length=config.data.max_length if args.max_length is None else args.max_length,
        metadata=extra,
        quantize=args.quantize,
        optimize=args.optimize,
    )
    summary = {"bundle": str(args.out), "parity": meta["parity"], "quantization": meta["quantization"]}
    print(json.dumps(summary, indent=2))
    return 0
