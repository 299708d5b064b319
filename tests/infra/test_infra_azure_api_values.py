"""What Azure Resource Manager refuses, found before `pulumi up`: every value the Azure stack's plan sends is
judged by Azure's own REST definitions as the azure-mgmt-* SDKs (generated from the REST specs) carry them:
enums, read-only and required members, types, the msrest SDKs' patterns, lengths and ranges, and the path
parameters (resource names) against the specs' bounds. The mapping is automatic (azure-native inputs ARE the
ARM body, `properties` flattened); azure_api_table.py names each type's body model, path parameters and
azure-native's renames, and is itself checked. Values unknown at preview are skipped and counted. Here: what
does not depend on the stack (the table against the SDKs, one refused value per kind of check on azure-dev,
names built from org and stack); the coverage and value checks of every Azure stack (dev, staging, prod) are
in test_infra_gcp_azure_api_values.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_paths import mutated
from azure_api_check import check_plan, limit_problems, plan_members
from azure_api_table import RENAMED, TABLE, Spec, model_of
from azure_sdk_schema import members, url_parameters
from infra_fixtures import Plan

from infra import config
from infra import plan as planner
from infra.config import limits

STACK = "azure-dev"


def test_every_model_path_parameter_and_rename_the_table_names_exists_in_the_sdks() -> None:
    import azure.mgmt.storage.models as storage

    missing = []
    for token, api in TABLE.items():
        cls = model_of(api)
        assert members(cls), f"{token}: {api.model} has no REST members"
        for key, where in api.path.items():
            if isinstance(where, str) and key not in url_parameters(where):
                missing.append(f"{token}: {where} has no path parameter {key}")
        missing += [f"{token}: {cls.__name__} has no member {rest}" for rest in api.body
                    if rest not in plan_members(cls)]  # fmt: skip
    models = {f"{c.__module__.split('.')[2]}.{c.__name__}": c for c in map(model_of, TABLE.values())}
    models |= {f"storage.{n}": getattr(storage, n) for n in dir(storage)}
    for model, renames in RENAMED.items():
        if model not in models:
            missing.append(f"RENAMED: no model {model}")
            continue
        missing += [
            f"{model}: no REST member {r}" for r in renames.values() if r not in members(models[model])
        ]
    assert not missing, "\n".join(missing)


def test_a_typo_in_the_table_is_reported() -> None:
    import azure.mgmt.storage.models as storage

    with pytest.raises(KeyError, match="keyvaultproprties"):
        members(storage.Encryption)["keyvaultproprties"]
    with pytest.raises(KeyError, match="acountName"):
        url_parameters("azure.mgmt.monitor.operations._action_groups_operations")["acountName"]


def test_the_path_parameter_bounds_the_table_copies_are_the_ones_the_sdk_documents() -> None:
    """TypeSpec SDKs keep the spec's words, not its constraints: a copied bound must still be what they say."""
    import importlib
    import inspect

    documented = 0
    for token, api in TABLE.items():
        for key, spec in api.path.items():
            if isinstance(spec, Spec) and spec.doc:
                operations = api.model.split(":")[0].removesuffix("models") + "operations._operations"
                words = " ".join(inspect.getsource(importlib.import_module(operations)).split())
                documented += 1
                assert spec.doc in words, f"{token} {key}: the SDK no longer says {spec.doc!r}"
    assert documented >= 2


def _mutated(p: Plan, name: str, path: str, value: Any) -> Plan:
    return Plan(mutated(p.doc, name, "azure-native", path, value))


P = "mlp-azure-dev-"
# (resource, input path, refused value, words the message must hold): one per kind of check
REFUSED = [
    (f"{P}storage-data", "minimumTlsVersion", "TLS1_4", "not one of minimumTlsVersion's known values"),
    (f"{P}aks", "fqdn", "aks.example.com", "read-only"),
    (f"{P}storage-data", "accountName", "acmeeuropemlpazuredevdata", "25 characters; max_length 24"),
    (f"{P}storage-data", "accountName", "acme-data", "does not match pattern"),
    (f"{P}aks-gpu", "agentPoolName", "gpu-spot", "does not match pattern"),
    (f"{P}aks-gpu", "count", "two", "is an integer"),
    (f"{P}aks", "dnsPrefix", "d" * 55, "55 characters; max_length 54"),
    (f"{P}alerts", "groupShortName", "mlp-azure-dev", "13 characters; max_length 12"),
    (f"{P}serving-not-ready", "criteria.allOf.0.timeAggregation", "Avg", "timeAggregation's known values"),
    (f"{P}serving-not-ready", "severity", KeyError, "severity is required"),
    (f"{P}key-vault", "vaultName", "acme_kv", "does not match pattern"),
    (f"{P}registry-acr", "registryName", "acr", "min_length 5"),
    (f"{P}rg", "resourceGroupName", "r" * 91, "max_length 90"),
]


@pytest.mark.parametrize(
    ("name", "path", "value", "words"), REFUSED, ids=[f"{r[1]}={r[2]!r}"[:40] for r in REFUSED]
)
def test_a_value_azure_refuses_fails_naming_stack_resource_property_and_constraint(
    plans: dict[str, Plan], name: str, path: str, value: Any, words: str
) -> None:
    out = check_plan(STACK, _mutated(plans[STACK], name, path, value))
    assert len(out.violations) == 1, out.violations
    (message,) = out.violations
    assert message.startswith(f"{STACK}: {name} (") and path.split(".")[-1] in message, message
    assert words in message, message


@pytest.mark.parametrize(
    ("value", "limits", "words"),
    [([1, 2, 3], {"max_items": 2}, "3 items; max_items 2"), ([], {"min_items": 1}, "0 items; min_items 1"),
     (91, {"maximum": 90}, "above maximum 90"), (6, {"minimum": 7}, "below minimum 7")],
)  # fmt: skip
def test_list_sizes_and_ranges_are_judged_as_msrest_states_them(value: Any, limits: dict, words: str) -> None:
    """No member of the plan's models carries these (the SDKs keep few): the rule is still applied."""
    assert limit_problems(value, limits) == [words]


def test_an_input_the_api_lacks_is_reported(plans: dict[str, Plan]) -> None:
    out = check_plan(STACK, _mutated(plans[STACK], f"{P}storage-data", "allowBlobPublicAcess", False))
    assert any("input allowBlobPublicAcess maps to no member" in p for p in out.uncovered), out.uncovered
    doc = copy.deepcopy(plans[STACK].doc)
    doc["resources"].append({**doc["resources"][-1], "type": "azure-native:cdn:Profile", "custom": True,
                             "name": "cdn", "inputs": {}})  # fmt: skip
    assert any("azure-native:cdn:Profile is not in" in p for p in check_plan(STACK, Plan(doc)).uncovered)


# Names built from org + stack: refused when the stack is read, citing the REST spec's bound ----------------


def test_an_org_and_stack_too_long_for_an_azure_storage_account_name_are_refused_at_config_time() -> None:
    values = config.project_keys(planner.stack_config(STACK))
    _, bound = limits.AZURE_COMPACT_NAMES["data"]
    assert (
        TABLE["azure-native:storage:StorageAccount"].path["accountName"]
        == TABLE["azure-native:storage:BlobContainer"].path["accountName"]
    )
    # "<org>mlpazuredev" + "data": a 9-character org makes 24 (the most), a 10-character one 25.
    for org, refused in (("acmeeurop", False), ("acmeeurope", True)):
        values["org"] = org
        if not refused:
            cfg = config.parse(values, stack=STACK)
            assert not check_plan(STACK, Plan(planner.run(cfg, planner.stack_config(STACK)))).violations
            continue
        with pytest.raises(config.ConfigError, match=r"org: .*storage account name.*25.*StorageAccountName"):
            config.parse(values, stack=STACK)
    assert bound.maximum == 24


def test_a_stack_name_with_a_dot_makes_azure_names_the_api_refuses() -> None:
    """Pulumi stack names may hold `_` and `.`; AKS's dnsPrefix, the workspace and identity names may not:
    what ARM would get, rendered past the config check (next test) with the same config under that name."""
    cfg = config.parse(config.project_keys(planner.stack_config(STACK)), stack=STACK)
    plan = planner.run(cfg.model_copy(update={"stack": "azure.dev"}), planner.stack_config(STACK))
    refused = " ".join(check_plan("azure.dev", Plan(plan)).violations)
    for name in (
        "dnsPrefix",
        "workspaceName",
        "resourceName = 'aks-mlp-azure.dev'",
        "'id-mlp-azure.dev-aks'",
    ):
        assert name in refused, refused


@pytest.mark.parametrize("stack", ["azure_dev", "azure.dev", "azure-"])
def test_a_stack_name_that_makes_azure_names_the_api_refuses_is_refused_at_config_time(stack: str) -> None:
    values = config.project_keys(planner.stack_config(STACK))
    with pytest.raises(
        config.ConfigError, match=r"stack: .*letters, digits and inner hyphens.*dnsPrefix and workspace"
    ):
        config.parse(values, stack=stack)
