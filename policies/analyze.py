"""Run the CrossGuard pack over offline plans through the real Analyzer gRPC protocol.

    python -m policies.analyze reports/plan/dev.json [more plans] --out reports/policy

For each plan this starts the pack exactly as `pulumi preview --policy-pack policies` does (the pack's
own virtualenv runs `python -u -m pulumi.policy <engine> policies`, which runs policies/__main__.py and
prints the port of its Analyzer server), then speaks to it as the engine would: Handshake,
GetAnalyzerInfo, Configure (enforcement levels + per-policy config), ConfigureStack, Analyze for each
resource, AnalyzeStack for the whole stack; then stops the process. Waivers (policies/waivers.yaml)
are applied to the diagnostics afterwards: waived findings are listed under "waived", never dropped.

Exit status: 0 no mandatory violation, 1 at least one, 2 bad input (missing/malformed plan or
config), 3 the pack could not be started (run `make setup`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from policies import waivers as waivers_mod
from policies.rules import ALL_RULES, Resource
from policies.rules.core import UNKNOWN_SENTINELS, UNKNOWN_STRING

PACK_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACK_DIR.parent
PACK_PYTHON_ENV = "POLICY_PACK_PYTHON"
START_TIMEOUT_S = 60.0
CLOUDS = ("aws", "gcp", "azure")
_LEVELS = ("advisory", "mandatory", "disabled", "remediate")  # proto EnforcementLevel order
_SEVERITIES = ("", "low", "medium", "high", "critical")


# Signatures of Pulumi's special property values (sdk/go/common/resource/properties.go).
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"


class PlanError(ValueError):
    """A plan file is missing or does not follow the contract; the message names the file and field."""


class PackError(RuntimeError):
    """The pack process did not start or answer; the message carries its stderr."""


# --- plans -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    path: Path
    stack: str
    cloud: str
    project: str
    environment: str
    region: str
    resources: list[dict[str, Any]]


def load_plan(path: Path) -> Plan:
    if not path.is_file():
        raise PlanError(
            f"{path}: no such plan file (generate plans with `python -m infra.plan --out reports/plan`)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PlanError(f"{path}: not valid JSON ({err})") from err
    return plan_from_dict(data, path)


def plan_from_dict(data: Any, path: Path = Path("<memory>")) -> Plan:
    """Validate a plan (the contract in infra/README.md) and wrap it; PlanError names the bad field."""
    if not isinstance(data, dict):
        raise PlanError(f"{path}: a plan is a JSON object with stack, cloud, environment, region, resources")
    for key in ("stack", "cloud", "resources"):
        if key not in data:
            raise PlanError(f"{path}: missing field {key!r}")
    if not isinstance(data["resources"], list):
        raise PlanError(f"{path}: 'resources' must be a list")
    for n, r in enumerate(data["resources"]):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("urn", "type", "name")):
            raise PlanError(f"{path}: resources[{n}] needs string 'urn', 'type' and 'name'")
        if not isinstance(r.get("inputs", {}), dict):
            raise PlanError(f"{path}: resources[{n}].inputs must be an object")
    return Plan(
        path=path,
        stack=str(data["stack"]),
        cloud=str(data["cloud"]),
        project=str(data.get("project", "eu-ml-platform")),
        environment=str(data.get("environment", "")),
        region=str(data.get("region", "")),
        resources=data["resources"],
    )


def to_wire(value: Any) -> Any:
    """Plan values as the engine sends them: unknowns become the engine's unknown sentinel.

    infra/plan.py writes an unknown as the engine's own sentinel string (kept; an object
    {"unknown": true} or the string "<unknown>" is normalised to it too), secrets as the engine's secret
    envelope (unwrapped, as the pack does) and resource references as their envelope (replaced by the
    id or URN, as the engine does for analyzers).
    """
    if isinstance(value, dict):
        if value.get("unknown") is True or value.get("__unknown__") is True:
            return UNKNOWN_STRING
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return to_wire(
                value.get("value")
            )  # the pack unwraps secrets too; policies never see the envelope
        if sig == _RESOURCE_REF_SIG:
            # The engine hands analyzers a resource reference as the resource's id (or URN for components).
            # A custom resource's id may be empty (unknown at preview): unknown. A component has no id: URN.
            if "id" in value:
                return to_wire(value["id"]) if value["id"] else UNKNOWN_STRING
            return value.get("urn") or UNKNOWN_STRING
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_wire(v) for v in value]
    if isinstance(value, str) and (value in UNKNOWN_SENTINELS or value == "<unknown>"):
        return UNKNOWN_STRING
    return value


# --- the pack process ------------------------------------------------------------------------


def pack_python() -> Path:
    override = os.environ.get(PACK_PYTHON_ENV)
    path = Path(override) if override else PACK_DIR / ".venv" / "bin" / "python"
    if not path.exists():
        raise PackError(
            f"the policy pack's virtualenv is missing ({path}): run `make setup` (or set {PACK_PYTHON_ENV} to a "
            "python with pulumi-policy installed)"
        )
    return path


@dataclass
class PackProcess:
    port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path
    engine_address: str = "127.0.0.1:0"

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@contextmanager
def start_pack(plan: Plan, python: Path | None = None) -> Iterator[PackProcess]:
    """Start the pack the way the CLI does and yield its port; always kill it afterwards."""
    python = python or pack_python()
    env = {
        **os.environ,
        "PULUMI_PROJECT": plan.project,
        "PULUMI_STACK": plan.stack,
        "PULUMI_DRY_RUN": "true",
        # The CLI hands the pack the stack's config; the environment is the part the rules read.
        "PULUMI_CONFIG": json.dumps(
            {f"{plan.project}:environment": plan.environment} if plan.environment else {}
        ),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("PYTHONPATH", None)  # the pack venv must find its own protobuf 5, not ours
    engine = "127.0.0.1:0"  # there is no engine offline; the SDK only uses it for logging
    with tempfile.NamedTemporaryFile(prefix="policy-pack-", suffix=".stderr", delete=False) as err_file:
        stderr_path = Path(err_file.name)
    err = stderr_path.open("wb")
    proc = subprocess.Popen(
        [str(python), "-u", "-m", "pulumi.policy", engine, str(PACK_DIR)],
        cwd=PACK_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=err,
    )
    try:
        port = _read_port(proc, stderr_path)
        yield PackProcess(port, proc, stderr_path, engine)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        err.close()
        stderr_path.unlink(missing_ok=True)


def _read_port(proc: subprocess.Popen[bytes], stderr_path: Path) -> int:
    line: list[bytes] = []
    reader = threading.Thread(
        target=lambda: line.append(proc.stdout.readline() if proc.stdout else b""), daemon=True
    )
    reader.start()
    reader.join(START_TIMEOUT_S)
    text = line[0].decode().strip() if line else ""
    if not text.isdigit():
        proc.kill()
        tail = stderr_path.read_text(errors="replace")[-3000:]
        raise PackError(
            f"the policy pack did not print its port within {START_TIMEOUT_S:.0f}s (got {text!r}):\n{tail}"
        )
    return int(text)


# --- the protocol ------------------------------------------------------------------------------


@dataclass
class StackResult:
    stack: str
    pack: dict[str, Any]
    policies: list[dict[str, Any]]
    violations: list[dict[str, Any]] = field(default_factory=list)
    handshake: str = ""
    resources_analyzed: int = 0
    not_applicable: list[dict[str, str]] = field(default_factory=list)


def _struct(data: Mapping[str, Any]) -> Any:
    from google.protobuf import struct_pb2

    s = struct_pb2.Struct()
    s.update(to_wire(dict(data)))
    return s


def _provider_index(plan: Plan) -> dict[str, dict[str, Any]]:
    return {r["urn"]: r for r in plan.resources if r["type"].startswith("pulumi:providers:")}


def resolve_provider(
    plan: Plan, resource: Mapping[str, Any], providers: Mapping[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The provider resource a resource uses: its explicit reference (`<urn>::<id>`), else the default
    provider the CLI would create from stack config (region from the plan)."""
    ref = resource.get("provider")
    if isinstance(ref, str) and ref:
        for urn, p in providers.items():
            if ref == urn or ref.startswith(urn + "::"):
                return p
    pkg = resource["type"].split(":", 1)[0]
    if resource["type"].startswith("pulumi:providers:") or pkg not in ("aws", "gcp", "azure-native"):
        return None
    cloud = {"azure-native": "azure"}.get(pkg, pkg)
    if cloud != plan.cloud or not plan.region:
        return None
    key = "location" if cloud == "azure" else "region"
    return {
        "urn": f"urn:pulumi:{plan.stack}::{plan.project}::pulumi:providers:{pkg}::default",
        "type": f"pulumi:providers:{pkg}",
        "name": "default",
        "inputs": {key: plan.region},
    }


def pack_version() -> str:
    import yaml

    data = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text(encoding="utf-8")) or {}
    return str(data.get("version", "0.0.1"))


def _level_name(value: int) -> str:
    return _LEVELS[value] if 0 <= value < len(_LEVELS) else str(value)


def pack_config(info: Any, plan: Plan, overrides: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Per-policy (enforcement level, properties) as the CLI computes it: the policy's default level,
    the pack's initial config, then the user's config file (`all` or per policy), then the stack's
    environment for the policies that take one."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    all_level = overrides.get("all")
    for p in info.policies:
        level = _level_name(p.enforcementLevel)
        props: dict[str, Any] = {}
        if p.name in info.initialConfig:
            props.update(dict(info.initialConfig[p.name].properties))
        if isinstance(all_level, str):
            level = all_level
        o = overrides.get(p.name)
        if isinstance(o, str):
            level = o
        elif isinstance(o, dict):
            level = o.get("enforcementLevel", level)
            props.update({k: v for k, v in o.items() if k != "enforcementLevel"})
        schema = dict(p.configSchema.properties) if p.HasField("configSchema") else {}
        if "environment" in schema and plan.environment and "environment" not in props:
            props["environment"] = plan.environment
        if level not in _LEVELS:
            raise PlanError(
                f"pack config: policy {p.name}: enforcementLevel {level!r} is not one of {list(_LEVELS)}"
            )
        out[p.name] = (level, props)
    return out


def analyze_plan(
    plan: Plan, overrides: Mapping[str, Any] | None = None, python: Path | None = None
) -> StackResult:
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2 as pb
    from pulumi.runtime.proto import analyzer_pb2_grpc as pb_grpc

    overrides = overrides or {}
    with start_pack(plan, python) as pack:
        channel = grpc.insecure_channel(
            f"127.0.0.1:{pack.port}", options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)]
        )
        try:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = pb_grpc.AnalyzerStub(channel)
            try:
                stub.Handshake(
                    pb.AnalyzerHandshakeRequest(
                        engine_address=pack.engine_address,
                        root_directory=str(REPO_ROOT),
                        program_directory=str(PACK_DIR),
                    )
                )
                handshake = "ok"
            except grpc.RpcError as err:
                # pulumi-policy 1.21 (Python) does not implement Handshake; the CLI tolerates that too.
                if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                handshake = "unimplemented"
            info = stub.GetAnalyzerInfo(empty_pb2.Empty())
            config = pack_config(info, plan, overrides)
            stub.Configure(
                pb.ConfigureAnalyzerRequest(
                    policyConfig={
                        name: pb.PolicyConfig(
                            enforcementLevel=cast(Any, _LEVELS.index(level)), properties=_struct(props)
                        )
                        for name, (level, props) in config.items()
                    }
                )
            )
            tags = {"environment": plan.environment} if plan.environment else {}
            stub.ConfigureStack(
                pb.AnalyzerStackConfigureRequest(
                    stack=plan.stack, project=plan.project, dry_run=True, tags=tags
                )
            )
            policies = [_policy_info(p, config) for p in info.policies]
            result = StackResult(
                stack=plan.stack,
                # Python packs always answer 0.0.1; the CLI takes the version from PulumiPolicy.yaml.
                pack={"name": info.name, "version": pack_version(), "handshake": handshake},
                policies=policies,
                handshake=handshake,
            )
            providers = _provider_index(plan)
            stack_resources = []
            for r in plan.resources:
                prov = resolve_provider(plan, r, providers)
                provider_msg = (
                    pb.AnalyzerProviderResource(
                        type=prov["type"],
                        properties=_struct(prov.get("inputs") or {}),
                        urn=prov["urn"],
                        name=prov["name"],
                    )
                    if prov
                    else None
                )
                options = pb.AnalyzerResourceOptions(parent=r.get("parent") or "")
                props = _struct(r.get("inputs") or {})
                kwargs: dict[str, Any] = {
                    "type": r["type"],
                    "properties": props,
                    "urn": r["urn"],
                    "name": r["name"],
                    "options": options,
                }
                if provider_msg is not None:
                    kwargs["provider"] = provider_msg
                response = stub.Analyze(pb.AnalyzeRequest(**kwargs))
                result.resources_analyzed += 1
                result.violations += [_violation(d, r["urn"]) for d in response.diagnostics]
                result.not_applicable += [
                    {"policy": n.policy_name, "urn": r["urn"], "reason": n.reason}
                    for n in response.not_applicable
                ]
                stack_resources.append(
                    pb.AnalyzerResource(
                        **kwargs,
                        parent=r.get("parent") or "",
                        dependencies=[d for d in r.get("dependencies") or [] if isinstance(d, str)],
                    )
                )
            response = stub.AnalyzeStack(pb.AnalyzeStackRequest(resources=stack_resources))
            result.violations += [_violation(d, None) for d in response.diagnostics]
            return result
        except grpc.RpcError as err:
            raise PackError(f"Analyzer RPC failed: {err}\n{pack.stderr_tail()}") from err
        finally:
            channel.close()


def _policy_info(p: Any, config: Mapping[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "name": p.name,
        "description": p.description,
        "type": "stack" if p.policy_type == 2 else "resource",
        "enforcement": config.get(p.name, (_level_name(p.enforcementLevel), {}))[0],
        "severity": _SEVERITIES[p.severity] if 0 <= p.severity < len(_SEVERITIES) else "",
        "framework": {
            "name": p.framework.name,
            "version": p.framework.version,
            "reference": p.framework.reference,
            "specification": p.framework.specification,
        },
        "tags": list(p.tags),
        "remediation": p.remediation_steps,
        "url": p.url,
    }


def _violation(d: Any, urn: str | None) -> dict[str, Any]:
    # The SDK prefixes the rule's description to the message; keep only the resource-specific part.
    message = d.message
    if d.description and message.startswith(d.description + "\n"):
        message = message[len(d.description) + 1 :]
    return {
        "policy": d.policyName,
        "urn": d.urn or urn,
        "message": message,
        "enforcement": _level_name(d.enforcementLevel),
        "severity": _SEVERITIES[d.severity] if 0 <= d.severity < len(_SEVERITIES) else "",
    }


# --- results -----------------------------------------------------------------------------------


def evaluated(plan: Plan) -> dict[str, list[str]]:
    """Per policy, the URNs whose type it checks (resource rules) or that it reads (stack rules)."""
    return {rule.name: [r["urn"] for r in plan.resources if rule.applies_to(r["type"])] for rule in ALL_RULES}


def write_result(
    plan: Plan, result: StackResult, out_dir: Path, waivers: Sequence[waivers_mod.Waiver], today: dt.date
) -> dict[str, Any]:
    kept, waived = waivers_mod.split(result.violations, list(waivers), today)
    doc = {
        "stack": plan.stack,
        "cloud": plan.cloud,
        "environment": plan.environment,
        "plan": str(plan.path),
        "pack": result.pack,
        "violations": kept,
        "waived": waived,
        "policies": result.policies,
        "resources": [{"urn": r["urn"], "type": r["type"], "name": r["name"]} for r in plan.resources],
        "evaluated": evaluated(plan),
        "resources_analyzed": result.resources_analyzed,
        "evaluated_on": today.isoformat(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{plan.stack}.json").write_text(
        json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8"
    )
    return doc


def mandatory(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [v for v in doc["violations"] if v["enforcement"] == "mandatory"]


def run(
    plan_paths: Sequence[Path],
    out_dir: Path,
    *,
    config_path: Path | None = None,
    waivers_path: Path = waivers_mod.WAIVERS_FILE,
    today: dt.date | None = None,
    python: Path | None = None,
) -> list[dict[str, Any]]:
    plans = [load_plan(p) for p in plan_paths]  # validate every input before starting anything
    overrides: dict[str, Any] = {}
    if config_path is not None:
        try:
            overrides = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise PlanError(f"{config_path}: cannot read the pack config ({err})") from err
    try:
        waivers = waivers_mod.load(waivers_path)
    except waivers_mod.WaiverError as err:
        raise PlanError(str(err)) from err
    today = today or dt.date.today()
    docs = []
    for plan in plans:
        result = analyze_plan(plan, overrides, python)
        docs.append(write_result(plan, result, out_dir, waivers, today))
    return docs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.analyze", description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="+", type=Path, help="reports/plan/<stack>.json files")
    parser.add_argument("--out", type=Path, required=True, help="folder for <stack>.json results")
    parser.add_argument(
        "--config", type=Path, help="pack config JSON, as `pulumi preview --policy-pack-config`"
    )
    parser.add_argument("--waivers", type=Path, default=waivers_mod.WAIVERS_FILE)
    parser.add_argument("--today", type=dt.date.fromisoformat, help="evaluate waiver expiry as of this date")
    args = parser.parse_args(argv)
    try:
        docs = run(args.plans, args.out, config_path=args.config, waivers_path=args.waivers, today=args.today)
    except PlanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    failed = False
    for doc in docs:
        must = mandatory(doc)
        failed = failed or bool(must)
        print(
            f"{doc['stack']}: {len(doc['violations'])} violation(s), {len(must)} mandatory, "
            f"{len(doc['waived'])} waived -> {args.out / (doc['stack'] + '.json')}"
        )
        for v in must[:20]:
            print(f"  MANDATORY {v['policy']} {v['urn'] or '(stack)'}: {v['message'].splitlines()[0]}")
        if len(must) > 20:
            print(f"  ... and {len(must) - 20} more (see the JSON)")
    return 1 if failed else 0


def to_resources(plan: Plan) -> list[Resource]:
    """The plan's resources as the pack sees them (provider resolved, unknowns as sentinels), for
    in-process evaluation in tests and for cross-checking the protocol path."""
    providers = _provider_index(plan)
    out = []
    for r in plan.resources:
        prov = resolve_provider(plan, r, providers)
        out.append(
            Resource(
                type=r["type"],
                name=r["name"],
                urn=r["urn"],
                inputs=to_wire(r.get("inputs") or {}),
                provider_inputs=to_wire(prov.get("inputs") or {}) if prov else {},
                provider_type=prov["type"] if prov else "",
                parent=r.get("parent") or "",
                dependencies=tuple(d for d in r.get("dependencies") or [] if isinstance(d, str)),
            )
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
