"""Offline plan: run the program for committed stacks under Pulumi's mock engine, preview semantics.

    python -m infra.plan --out reports/plan                 # every Pulumi.<stack>.yaml at the root
    python -m infra.plan --out reports/plan --stack dev     # one (or several: --stack dev --stack prod)

Writes `<out>/<stack>.json`:
    {"stack", "cloud", "project", "environment", "region",
     "resources": [{"urn", "type", "name", "custom", "inputs", "parent", "dependencies", "provider",
                    "protect", "retainOnDelete", "ignoreChanges", "deleteBeforeReplace", "aliases"}],
     "outputs": {...}}
`inputs` are exactly what the engine receives from the program (the protobuf Struct a policy pack's
Analyzer is given, as JSON): camelCase wire names, numbers as floats, values a real preview would not
know as Pulumi's unknown sentinel UNKNOWN (below), secrets as Pulumi's secret envelope with the value
replaced by "[secret]", resource references as Pulumi's resource-reference envelope.

What the mocks answer stands in for the cloud account: invokes return placeholder identities
(`MOCK_ACCOUNT`...) and, as in a real preview, a created resource's id and computed outputs are unknown.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from infra.config import PROJECT, ConfigError, PlatformConfig, parse, project_keys
from infra.plan_mocks import (  # noqa: F401  (re-exported: the tests read them from here)
    MOCK_ACCOUNT,
    MOCK_AZURE_OBJECT,
    MOCK_AZURE_SUBSCRIPTION,
    MOCK_AZURE_TENANT,
    MOCK_GCP_PROJECT_NUMBER,
    UNKNOWN,
    mocks_class,
)

SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
REDACTED = "[secret]"
ROOT = Path(__file__).resolve().parent.parent


def committed_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def stack_config(stack: str, root: Path = ROOT) -> dict[str, str]:
    """A stack file's `config:` as the Pulumi CLI hands it to a program: `project:key` -> string/JSON."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise ConfigError(
            "stack", stack, f"no {path.name}; committed stacks: {', '.join(committed_stacks(root))}"
        )
    document = yaml.safe_load(path.read_text()) or {}
    out: dict[str, str] = {}
    for key, value in (document.get("config") or {}).items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            # Encrypted with the stack's secrets provider: never readable offline.
            out[key] = UNKNOWN
        elif isinstance(value, dict | list):
            out[key] = json.dumps(unknown_secrets(value))
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def unknown_secrets(value: Any) -> Any:
    """Nested `secure:` values (`pulumi config set --secret --path a.b`) are unreadable offline too."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return UNKNOWN
        return {k: unknown_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unknown_secrets(v) for v in value]
    return value


def load_stack(stack: str, root: Path = ROOT) -> PlatformConfig:
    return parse(project_keys(stack_config(stack, root)), stack=stack)


def _wire(value: Any) -> Any:
    """Redact secrets inside a JSON-ified protobuf Struct; everything else is kept as sent."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return {SECRET_SIG_KEY: SECRET_SIG, "value": REDACTED}
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def _recording_monitor(mocks: Any) -> Any:
    from google.protobuf import json_format
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """The mock monitor, also keeping what the real engine would get: parent, dependencies, provider."""

        def __init__(self, mocks: Any) -> None:
            super().__init__(mocks)
            self.records: list[dict[str, Any]] = []
            self.sources: dict[tuple[str, str], dict[str, Any]] = {}  # (type, name) -> declaring line

        def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                self.records.append(
                    {
                        "urn": response.urn,
                        "type": request.type,
                        "name": request.name,
                        "custom": bool(request.custom),
                        "inputs": _wire(json_format.MessageToDict(request.object)),
                        "parent": request.parent or None,
                        "dependencies": sorted(set(request.dependencies)),
                        "provider": request.provider or None,
                        "protect": bool(request.protect),
                        **_resource_options(request),
                        # The program line that declares it (policy SARIF points reviewers there).
                        "source": self.sources.get((request.type, request.name)),
                    }
                )
            return response

    return RecordingMonitor(mocks)


def _source_recorder(sources: dict[tuple[str, str], dict[str, Any]]) -> Any:
    """A stack transformation (it runs inside each resource's constructor) that records the innermost
    frame under infra/ other than this file: the line of the program that declares the resource."""
    infra_dir, this = Path(__file__).resolve().parent, Path(__file__).resolve()

    def record(args: Any) -> None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            path = Path(frame.f_code.co_filename).resolve()
            if path != this and path.is_relative_to(infra_dir):
                sources[(args.type_, args.name)] = {
                    "file": path.relative_to(ROOT).as_posix(),
                    "line": frame.f_lineno,
                }
                break
            frame = frame.f_back
        return None

    return record


def _resource_options(request: Any) -> dict[str, Any]:
    """The resource options the engine acts on at update and destroy time, as the program sent them."""
    from google.protobuf import json_format

    return {
        "retainOnDelete": request.HasField("retainOnDelete") and bool(request.retainOnDelete),
        "ignoreChanges": list(request.ignoreChanges),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        # Aliases as specs ({"name", "type", "parentUrn", "stack", "project", ...}) or URNs, as sent.
        "aliases": [json_format.MessageToDict(a) for a in request.aliases] + list(request.aliasURNs),
    }


async def _serialize_outputs(outputs: dict[str, Any]) -> dict[str, Any]:
    from google.protobuf import json_format
    from pulumi.runtime import rpc

    struct = await rpc.serialize_properties(outputs, {})
    return _wire(json_format.MessageToDict(struct))


def run(cfg: PlatformConfig, config_map: dict[str, str], *, preview: bool = True) -> dict[str, Any]:
    """Run the program once under mocks in a fresh context; return the plan document."""

    engine_log = logging.getLogger(f"infra.plan.engine.{cfg.stack}")
    engine_log.propagate = False
    collected = _Collect()
    engine_log.handlers[:] = [collected]

    def _in_context() -> dict[str, Any]:
        import pulumi
        from pulumi.runtime import config as runtime_config
        from pulumi.runtime.stack import run_pulumi_func
        from pulumi.runtime.sync_await import _sync_await

        from infra import program

        monitor = _recording_monitor(mocks_class()(preview))
        pulumi.runtime.set_mocks(
            monitor.mocks,
            project=PROJECT,
            stack=cfg.stack,
            preview=preview,
            monitor=monitor,
            logger=engine_log,
        )
        runtime_config.set_all_config(config_map)
        result: dict[str, Any] = {}

        async def _program() -> None:
            pulumi.runtime.register_stack_transformation(_source_recorder(monitor.sources))
            outputs = program.build(cfg)
            result["outputs"] = await _serialize_outputs(outputs)

        _sync_await(run_pulumi_func(lambda: _sync_await(_program())))
        return {
            "stack": cfg.stack,
            "cloud": cfg.cloud,
            "project": PROJECT,
            "environment": cfg.environment,
            "region": cfg.region,
            # By URN: the engine registers resources in whatever order their async inputs resolve, and a plan
            # whose bytes change with no change of the stack makes its sha256 (the policy report's plan_sha256,
            # which the promotion gate compares) and its diff in review meaningless.
            "resources": sorted(monitor.records, key=lambda r: r["urn"]),
            "outputs": result["outputs"],
        }

    plan = contextvars.Context().run(_in_context)
    # The SDKs log (not raise) when a deprecated resource type or property is used: here that is a bug.
    deprecated = [m for m in collected.messages if "deprecated" in m.lower()]
    if deprecated:
        raise RuntimeError(f"{cfg.stack}: deprecated Pulumi resource types or properties used: {deprecated}")
    return plan


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def render(stacks: Iterable[str], out: Path, root: Path = ROOT) -> dict[str, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    plans: dict[str, dict[str, Any]] = {}
    for stack in stacks:
        config_map = stack_config(stack, root)
        cfg = parse(project_keys(config_map), stack=stack)
        plan = run(cfg, config_map)
        (out / f"{stack}.json").write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
        plans[stack] = plan
    return plans


def remove_stale(out: Path, stacks: Iterable[str]) -> list[str]:
    """Delete the plans in `out` of stacks no longer committed (their Pulumi.<stack>.yaml was removed): the policy
    pack evaluates every plan it finds, so a deleted stack's old plan kept being judged and reported. Only files
    this module wrote are removed (a plan document naming its own file's stack); anything else is left."""
    keep, removed = set(stacks), []
    for path in sorted(out.glob("*.json")):
        if path.stem in keep:
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("stack") == path.stem and isinstance(doc.get("resources"), list):
            path.unlink()
            removed.append(path.stem)
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("reports/plan"), help="folder for <stack>.json")
    parser.add_argument(
        "--stack", action="append", help="stack name (repeatable); default: every committed stack"
    )
    args = parser.parse_args(argv)
    stacks = args.stack or committed_stacks()
    started = time.perf_counter()
    try:
        plans = render(stacks, args.out)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.stack:
        for stack in remove_stale(args.out, stacks):
            print(f"{stack}: removed {args.out / stack}.json (no Pulumi.{stack}.yaml any more)")
    for stack, plan in plans.items():
        print(
            f"{stack}: {len(plan['resources'])} resources ({plan['cloud']}, {plan['region']}) -> {args.out / stack}.json"
        )
    print(f"rendered {len(plans)} stacks in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
