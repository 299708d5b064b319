"""Shared helpers for the infra tests (pytest's rootdir import mode needs unique module names)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STACKS = ("dev", "staging", "prod", "gcp-dev", "azure-dev")


class Plan:
    """A rendered plan with lookups by type and name."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.doc = document
        self.resources: list[dict[str, Any]] = document["resources"]
        self.by_urn = {r["urn"]: r for r in self.resources}

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def of_type(self, token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == token]

    def one(self, token: str, name_suffix: str = "") -> dict[str, Any]:
        found = [r for r in self.of_type(token) if r["name"].endswith(name_suffix)]
        assert len(found) == 1, (
            f"expected one {token} named *{name_suffix}, found {[r['name'] for r in found]}"
        )
        return found[0]

    def named(self, name: str, token: str | None = None) -> dict[str, Any]:
        found = [r for r in self.iter_custom() if r["name"] == name and token in (None, r["type"])]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    def iter_custom(self) -> Iterator[dict[str, Any]]:
        return (r for r in self.resources if r["custom"])


# Not Kubernetes API objects: Helm releases are installed by the provider from their charts.
NOT_OBJECTS = ("kubernetes:helm.sh/",)


def json_numbers(value: Any) -> Any:
    """The engine's numbers are floats (8000.0); the provider sends integral ones to the API as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: json_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_numbers(v) for v in value]
    return value


def manifest(resource: dict[str, Any]) -> dict[str, Any]:
    """A plan resource as the object the Kubernetes provider sends (apiVersion/kind from the type token)."""
    _, group_version, kind = resource["type"].split(":")
    api_version = group_version.removeprefix("core/")
    return {**json_numbers(resource["inputs"]), "apiVersion": api_version, "kind": kind}


def k8s_objects(plan: Plan, exclude: tuple[str, ...] = NOT_OBJECTS) -> list[dict[str, Any]]:
    """Every Kubernetes object the plan declares, as sent to the API server."""
    return [
        manifest(r)
        for r in plan.iter_custom()
        if r["type"].startswith("kubernetes:") and not r["type"].startswith(("pulumi:", *exclude))
    ]


def aws_iam_definition() -> list[dict[str, Any]]:
    """AWS's service authorization reference as parliament ships it (policies/.venv): every action, its access
    level and resource types, per service prefix."""
    repo = Path(__file__).resolve().parents[2]
    found = sorted(
        (repo / "policies" / ".venv").glob("lib/python*/site-packages/parliament/iam_definition.json")
    )
    if not found:
        pytest.skip(
            "parliament's IAM definitions are not installed (policies/.venv: make setup installs them)"
        )
    data: list[dict[str, Any]] = json.loads(found[0].read_text())
    return data


def launch_config(plan: Plan, **overrides: Any) -> Any:
    """The training Job's launch config as `python -m training launch` builds it from a stack's outputs."""
    from training import launch

    out = plan["outputs"]
    gpu = out["pool_selectors"]["gpu"]
    return launch.LaunchConfig(
        namespace=out["trainer_namespace"],
        service_account=out["trainer_service_account"],
        node_selector=gpu["nodeSelector"],
        tolerations=tuple(gpu["tolerations"]),
        checkpoint_uri=f"{out['checkpoint_bucket_uri']}/sentiment-train",
        cloud=out["cloud"],
        image=out["training_image"],
        **overrides,
    )
