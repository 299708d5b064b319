"""The engine's side of the Analyzer protocol, spoken to a running pack (policies.process).

Handshake, GetAnalyzerInfo, Configure (enforcement levels + per-policy config), ConfigureStack,
Analyze for each resource (with its provider resource), AnalyzeStack for the whole stack.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from policies.pack_files import pack_digest
from policies.plans import Plan, PlanError, provider_index, resolve_provider, to_wire
from policies.process import PACK_DIR, PackError, PackProcess, start_pack
from policies.rules.core import is_undetermined

REPO_ROOT = PACK_DIR.parent
READY_TIMEOUT_S = 30.0
"""How long the pack may take to answer on the port it printed (it prints the port once its server listens)."""
RPC_TIMEOUT_S = 300.0
"""One Analyzer call (one resource, or the whole stack): a rule that hangs is a failed pack (exit 3), not a
gate that holds CI until the job's own timeout. Generous: a call takes milliseconds to seconds."""
_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 400 * 1024 * 1024),
    # gRPC routes even 127.0.0.1 through http_proxy/https_proxy/grpc_proxy: on a CI runner behind a proxy the
    # pack never answered (the Pulumi CLI, in Go, never proxies loopback). The pack is always local.
    ("grpc.enable_http_proxy", 0),
]
_LEVELS = ("advisory", "mandatory", "disabled", "remediate")  # proto EnforcementLevel order
_SEVERITIES = ("", "low", "medium", "high", "critical")


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


def pack_version(pack_dir: Path = PACK_DIR) -> str:
    import yaml

    data = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text(encoding="utf-8")) or {}
    return str(data.get("version", "0.0.1"))


def _level_name(value: int) -> str:
    return _LEVELS[value] if 0 <= value < len(_LEVELS) else str(value)


def pack_config(info: Any, plan: Plan, overrides: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Per-policy (enforcement level, properties) as the CLI computes it: the policy's default level,
    the pack's initial config, then the user's config file (`all` or per policy), then the stack's
    environment for the policies that take one."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    all_level = overrides.get("all")
    if all_level is not None and all_level not in _LEVELS:
        raise PlanError(f"pack config: all={all_level!r} is not an enforcement level; one of {list(_LEVELS)}")
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
        if p.HasField("configSchema"):
            _check_properties(p.name, props, p.configSchema)
        out[p.name] = (level, props)
    return out


def _check_properties(policy: str, props: Mapping[str, Any], config_schema: Any) -> None:
    """The Pulumi CLI validates each policy's config against its configSchema (JSON Schema) before Configure;
    so does this runner: a wrong type is exit 2 with the property named, not a pack crash (exit 3)."""
    import jsonschema
    from google.protobuf.json_format import MessageToDict

    schema = {
        "type": "object",
        "properties": MessageToDict(config_schema.properties),
        "required": list(config_schema.required),
    }
    for error in sorted(jsonschema.Draft7Validator(schema).iter_errors(dict(props)), key=str):
        where = ".".join(str(x) for x in error.absolute_path) or "(properties)"
        raise PlanError(f"pack config: policy {policy}: {where}: {error.message} (the policy's configSchema)")


def analyze_plan(
    plan: Plan,
    overrides: Mapping[str, Any] | None = None,
    python: Path | None = None,
    *,
    pack_dir: Path = PACK_DIR,
    as_cli: bool = False,
    dry_run: bool = True,
) -> StackResult:
    """One Analyzer session over a plan (see policies.process.start_pack for pack_dir and as_cli)."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2 as pb
    from pulumi.runtime.proto import analyzer_pb2_grpc as pb_grpc

    overrides = overrides or {}
    with start_pack(plan, python, pack_dir=pack_dir, as_cli=as_cli, dry_run=dry_run) as pack:
        channel = grpc.insecure_channel(f"127.0.0.1:{pack.port}", options=_CHANNEL_OPTIONS)
        call = "Handshake"
        try:
            _wait_ready(channel, pack)
            stub = pb_grpc.AnalyzerStub(channel)
            try:
                stub.Handshake(
                    pb.AnalyzerHandshakeRequest(
                        engine_address=pack.engine_address,
                        root_directory=str(REPO_ROOT),
                        program_directory=str(PACK_DIR),
                    ),
                    timeout=RPC_TIMEOUT_S,
                )
                handshake = "ok"
            except grpc.RpcError as err:
                # pulumi-policy 1.21 (Python) does not implement Handshake; the CLI tolerates that too.
                if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                handshake = "unimplemented"
            call = "GetAnalyzerInfo"
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=RPC_TIMEOUT_S)
            config = pack_config(info, plan, overrides)
            call = "Configure"
            stub.Configure(
                pb.ConfigureAnalyzerRequest(
                    policyConfig={
                        name: pb.PolicyConfig(
                            enforcementLevel=cast(Any, _LEVELS.index(level)), properties=_struct(props)
                        )
                        for name, (level, props) in config.items()
                    }
                ),
                timeout=RPC_TIMEOUT_S,
            )
            tags = {"environment": plan.environment} if plan.environment else {}
            call = "ConfigureStack"
            stub.ConfigureStack(
                pb.AnalyzerStackConfigureRequest(
                    stack=plan.stack, project=plan.project, dry_run=dry_run, tags=tags
                ),
                timeout=RPC_TIMEOUT_S,
            )
            policies = [_policy_info(p, config) for p in info.policies]
            result = StackResult(
                stack=plan.stack,
                # Python packs always answer 0.0.1; the CLI takes the version from PulumiPolicy.yaml.
                pack={
                    "name": info.name,
                    "version": pack_version(pack_dir),
                    "sha256": pack_digest(pack_dir),
                    "handshake": handshake,
                },
                policies=policies,
                handshake=handshake,
            )
            providers = provider_index(plan)
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
                call = f"Analyze of {r['urn']}"
                response = stub.Analyze(pb.AnalyzeRequest(**kwargs), timeout=RPC_TIMEOUT_S)
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
            call = "AnalyzeStack"
            response = stub.AnalyzeStack(
                pb.AnalyzeStackRequest(resources=stack_resources), timeout=RPC_TIMEOUT_S
            )
            result.violations += [_violation(d, None) for d in response.diagnostics]
            return result
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                what = f"{pack.describe()} did not answer {call} within {RPC_TIMEOUT_S:.0f}s"
            else:
                what = f"Analyzer RPC failed: {call} to {pack.describe()}: {err}"
            raise PackError(f"{what}; its stderr:\n{pack.stderr_tail()}") from err
        finally:
            channel.close()


def _wait_ready(channel: Any, pack: PackProcess) -> None:
    """Wait for the pack's server on the port it printed. grpc's FutureTimeoutError is no RpcError: it ended the
    run as an internal error (exit 4) without the pack's stderr. A pack that exits meanwhile fails at once."""
    import grpc

    ready = grpc.channel_ready_future(channel)
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while True:
            try:
                ready.result(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
                return
            except grpc.FutureTimeoutError:
                status = pack.process.poll()
                if status is not None:
                    why = f"exited (status {status}) after printing port {pack.port}"
                elif time.monotonic() >= deadline:
                    why = f"printed port {pack.port} but did not answer on 127.0.0.1:{pack.port} within {READY_TIMEOUT_S:.0f}s"
                else:
                    continue
                raise PackError(f"{pack.describe()} {why}; its stderr:\n{pack.stderr_tail()}") from None
    finally:
        ready.cancel()


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
        "undetermined": is_undetermined(message),
    }
