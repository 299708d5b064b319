"""`python -m training launch`: flags -> LaunchConfig -> YAML (and with --apply, the Kubernetes API).

The renderers and their config are in training/launch.py (documented there, with what the Job does).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from training.errors import ConfigError
from training.launch import BUILD_RECORD, DEFAULT_IMAGE, MLFLOW_SECRET, LaunchConfig, apply, render, to_yaml
from training.launch import __doc__ as launch_doc


def image_from_build_record(path: Path) -> str | None:
    """The training image `python -m containers.build` last built: its pushed tag if any, else its local tag."""
    try:
        entry = json.loads(path.read_text())["images"]["training"]
        tags = entry["tags"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not tags:
        return None
    return str(tags[-1] if entry.get("pushed") else tags[0])


def _key_values(items: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(what, f"{item!r} is not KEY=VALUE")
        out[key] = value
    return out


def parse_toleration(text: str) -> dict[str, str]:
    """`KEY=VALUE:EFFECT` or `KEY:EFFECT` (kubectl taint syntax) -> a toleration."""
    head, sep, effect = text.rpartition(":")
    if not sep or not head:
        raise ConfigError(
            "tolerations", f"{text!r} is not KEY=VALUE:EFFECT (e.g. nvidia.com/gpu=present:NoSchedule)"
        )
    key, eq, value = head.partition("=")
    if eq:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


def register(subparsers: argparse._SubParsersAction) -> None:
    defaults = LaunchConfig()
    p = subparsers.add_parser(
        "launch",
        help="render (and with --apply submit) the Kubernetes Job for N nodes x M GPUs on the spot pool",
        description=launch_doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="key=value training overrides passed to `train`")
    p.add_argument("--name", default=defaults.name, help="Job name (default %(default)s)")
    p.add_argument("--namespace", default=defaults.namespace, help="namespace (default %(default)s)")
    p.add_argument(
        "--image",
        help=f"training image reference (default: the training image of {BUILD_RECORD}, else {DEFAULT_IMAGE})",
    )
    p.add_argument("--nodes", type=int, default=defaults.nodes, help="pods/nodes (default %(default)s)")
    p.add_argument(
        "--gpus-per-node", type=int, default=defaults.gpus_per_node, help="GPUs per pod (default %(default)s)"
    )
    p.add_argument("--preset", default=defaults.preset, help="training preset (default %(default)s)")
    p.add_argument(
        "--checkpoint-uri",
        default=defaults.checkpoint_uri,
        help="checkpoint bucket prefix: the stack output checkpoint_bucket_uri plus a prefix (default %(default)s, "
        "the aws dev stack's; with --cloud gcp or azure give your stack's)",
    )
    p.add_argument("--data", dest="data_uri", help="dataset URI (default: the image's bundled corpus)")
    p.add_argument(
        "--cloud", default=defaults.cloud, choices=["aws", "gcp", "azure"], help="default %(default)s"
    )
    p.add_argument("--service-account", default=defaults.service_account, help="default %(default)s")
    p.add_argument(
        "--node-selector",
        action="append",
        metavar="KEY=VALUE",
        help="GPU pool label (repeatable; default platform.eu-ml/pool=gpu)",
    )
    p.add_argument(
        "--toleration",
        action="append",
        metavar="KEY=VALUE:EFFECT",
        help="pool taint to tolerate (repeatable; default nvidia.com/gpu=present:NoSchedule)",
    )
    p.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="extra declared environment variable"
    )
    p.add_argument(
        "--backoff-limit",
        type=int,
        default=defaults.backoff_limit,
        help="real failures tolerated (default %(default)s)",
    )
    p.add_argument(
        "--mlflow-secret",
        default=MLFLOW_SECRET,
        metavar="NAME",
        help="optional Secret whose keys (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN...) the pods get as "
        "environment; '' for none (default %(default)s)",
    )
    p.add_argument("--out", type=Path, help="write the YAML here instead of stdout")
    p.add_argument(
        "--apply", action="store_true", help="submit through the Kubernetes API (needs a kubeconfig)"
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    from training.launch_tune import add_arguments as add_tune_arguments  # --tune (training/launch_tune.py)

    add_tune_arguments(p)
    p.set_defaults(func=_cli_launch)


def config_from_args(args: argparse.Namespace) -> LaunchConfig:
    kwargs: dict[str, Any] = {
        "name": args.name,
        "namespace": args.namespace,
        "image": args.image or image_from_build_record(BUILD_RECORD) or DEFAULT_IMAGE,
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "preset": args.preset,
        "overrides": tuple(args.overrides),
        "checkpoint_uri": args.checkpoint_uri,
        "data_uri": args.data_uri,
        "cloud": args.cloud,
        "service_account": args.service_account,
        "env": _key_values(args.env, "env"),
        "backoff_limit": args.backoff_limit,
        "mlflow_secret": args.mlflow_secret or None,
    }
    if args.node_selector:
        kwargs["node_selector"] = _key_values(args.node_selector, "node_selector")
    if args.toleration:
        kwargs["tolerations"] = tuple(parse_toleration(t) for t in args.toleration)
    return LaunchConfig(**kwargs)


def _cli_launch(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args)
        if args.tune:
            from training.launch_tune import render_tune

            manifests = render_tune(cfg, args)
        else:
            manifests = render(cfg)
    except ConfigError as exc:
        print(f"error: launch {exc}", file=sys.stderr)
        return 2
    text = to_yaml(manifests)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out} (kubectl apply -f {shlex.quote(str(args.out))})", file=sys.stderr)
    elif not args.apply:
        sys.stdout.write(text)
    if args.apply:
        for line in apply(manifests, kubeconfig=args.kubeconfig, context=args.context):
            print(line)
    return 0
