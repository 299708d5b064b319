"""Update-mode plans give each created GCP and Azure resource the id the provider returns, and the computed outputs
other resources read (infra/plan_ids.py), so values the program derives from them are judged in the format a
real `pulumi up` sends: here the tables against the providers' own definitions (pulumi-gcp's import formats,
the REST paths of the azure-mgmt SDKs), the classic `.id` / `.name` mix-ups caught by the GCP value check, and
every ARM id and Key Vault URL an Azure update sends. The value checks of every stack in update mode are in
test_infra_gcp_azure_api_values.py."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
from typing import Any

import pytest
from api_paths import mutated
from azure_api_table import TABLE as AZURE_TABLE
from gcp_api_check import check_plan as gcp_check
from infra_fixtures import Plan

from infra import plan as planner
from infra import plan_ids
from infra.azure_names import AZURE_NAME_INPUTS
from infra.plan_ids import AZURE_IDS, GCP_IDS

TABLES = {"gcp-dev": ("gcp:", "GCP_IDS", GCP_IDS), "azure-dev": ("azure-native:", "AZURE_IDS", AZURE_IDS)}


def _skeleton(template: str) -> str:
    """A resource path with its variable parts (`{x}`, `{{x}}`) as `*`, for comparing formats."""
    return re.sub(r"\{\{?[^}]+\}\}?", "*", template).lstrip("/").lower()


@pytest.mark.parametrize("stack", TABLES)
def test_every_resource_type_of_the_plan_has_the_providers_id_format(
    plans: dict[str, Plan], stack: str
) -> None:
    prefix, table_name, table = TABLES[stack]
    types = {r["type"] for r in plans[stack].iter_custom() if r["type"].startswith(prefix)}
    missing = sorted(types - set(table))
    assert not missing, f"add the provider's id format of {missing} to infra/plan_ids.{table_name}"


def test_a_type_without_an_id_format_says_what_to_add() -> None:
    with pytest.raises(
        plan_ids.MissingIdTemplate, match=r"gcp:cdn/x:X: no id template; add .*infra/plan_ids.GCP_IDS"
    ):
        plan_ids.outputs("gcp:cdn/x:X", "x", {}, {})
    with pytest.raises(KeyError, match=r"needs a string 'keyRing'"):
        plan_ids.outputs("gcp:kms/cryptoKey:CryptoKey", "k", {"name": "k"}, {})


# GCP types whose id pulumi-gcp's docstring gives no import format for: the words that state it instead
# (class attribute, phrase of its docstring), or None where only the provider's code states it.
GCP_NOT_IMPORTED: dict[str, tuple[str, str] | None] = {
    "gcp:serviceaccount/account:Account": ("name", "The fully-qualified name of the service account"),
    "gcp:monitoring/notificationChannel:NotificationChannel": (
        "name",
        "projects/[PROJECT_ID]/notificationChannels/[CHANNEL_ID]",
    ),
    "gcp:storage/bucket:Bucket": None,  # resource_storage_bucket.go: d.SetId(bucket name)
    "gcp:projects/serviceIdentity:ServiceIdentity": None,  # "This resource does not support import."
    # IAM members: resource_iam_member.go sets `<resource>/<role>/<member>` (the import id is space-delimited).
    **dict.fromkeys((t for t in GCP_IDS if t.lower().endswith("iammember") or "iAMAuditConfig" in t), None),
}


def _gcp_class(typ: str) -> type:
    module, cls = typ.split(":")[1].split("/")[0], typ.split(":")[2]
    found: type = getattr(importlib.import_module(f"pulumi_gcp.{module}"), cls)
    return found


def test_the_gcp_id_formats_are_the_first_import_formats_pulumi_gcp_documents() -> None:
    checked = 0
    for typ, template in GCP_IDS.items():
        cls = _gcp_class(typ)
        section = inspect.getsource(cls).split("## Import", 1)[-1].split("Using `pulumi import`")[0]
        formats = re.findall(r"\* `([^`]+/[^`]+|\{\{[^`]+\}\})`", section)
        if typ in GCP_NOT_IMPORTED:
            said = GCP_NOT_IMPORTED[typ]
            if said is not None:
                attribute, phrase = said
                assert phrase in " ".join((getattr(cls, attribute).__doc__ or "").split()), (typ, phrase)
            continue
        assert formats and _skeleton(formats[0]) == _skeleton(template), (typ, template, formats[:1])
        checked += 1
    assert checked >= 15, checked


# Azure types whose REST path the azure-mgmt SDKs in the lock do not carry: azure-native's documented id.
AZURE_NOT_IN_SDKS = {
    "azure-native:monitor:DiagnosticSetting": "/{resourceUri}/providers/Microsoft.Insights/diagnosticSettings/{name}",
    "azure-native:monitor:SubscriptionDiagnosticSetting": (
        "/subscriptions/{subscriptionId}/providers/Microsoft.Insights/diagnosticSettings/{name}"
    ),
}


def _rest_paths(package: str) -> set[str]:
    root = pathlib.Path(importlib.import_module(package).__file__ or "").parent
    found: set[str] = set()
    for source in root.rglob("*operations*.py"):
        text = source.read_text(encoding="utf-8")
        found |= {
            _skeleton(p) for p in re.findall(r'"(/(?:subscriptions|\{scope\}|\{resourceUri\})[^"]*)"', text)
        }
    return found


def test_the_arm_ids_are_the_rest_paths_of_the_azure_sdks() -> None:
    """An ARM id is the resource's REST path: each template is one the type's SDK requests."""
    for typ, template in AZURE_IDS.items():
        if typ in AZURE_NOT_IN_SDKS:
            assert _skeleton(AZURE_NOT_IN_SDKS[typ]) == _skeleton(template), typ
            continue
        package = AZURE_TABLE[typ].model.split(":")[0].split(".models")[0]
        assert _skeleton(template) in _rest_paths(package), (typ, template, package)


# The classic pulumi-gcp bugs: a resource's `name` (or `email`) where its `id` (or full `name`) is taken.
P = "mlp-gcp-dev-"
MIXED_UP = [
    (f"{P}key-key", "keyRing", lambda p: p.named(f"{P}key-ring")["inputs"]["name"], "ring.name for ring.id"),
    (f"{P}key-storage-agent", "cryptoKeyId", lambda p: p.named(f"{P}key-key")["inputs"]["name"], "key.name"),
    (f"{P}identities-trainer-workload-identity", "serviceAccountId",
     lambda p: p["outputs"]["identity_principals"]["trainer"], "account.email for account.name"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "path", "mixed_up", "why"), MIXED_UP, ids=[m[3] for m in MIXED_UP])
def test_a_name_sent_where_the_gcp_api_takes_an_id_fails_the_update_check(
    updates: dict[str, Plan], name: str, path: str, mixed_up: Any, why: str
) -> None:
    p = updates["gcp-dev"]
    assert not gcp_check("gcp-dev", p).violations
    value = mixed_up(p)
    assert "/" not in value and value != p.named(name)["inputs"][path]
    out = gcp_check("gcp-dev", Plan(mutated(p.doc, name, "gcp", path, value)))
    assert len(out.violations) == 1 and "does not match the pattern" in out.violations[0], out.violations


# Azure inputs that take an ARM id (type -> input paths, `[]` each element), and those that take a Key Vault URL.
ARM_ID_INPUTS = {
    "azure-native:authorization:RoleAssignment": ("roleDefinitionId", "scope"),
    "azure-native:authorization:RoleDefinition": ("assignableScopes[]", "scope"),
    "azure-native:compute:DiskEncryptionSet": ("activeKey.sourceVault.id",),
    "azure-native:consumption:Budget": ("scope",),
    "azure-native:containerservice:AgentPool": ("vnetSubnetID",),
    "azure-native:containerservice:ManagedCluster": (
        "agentPoolProfiles[].vnetSubnetID", "diskEncryptionSetID", "identity.userAssignedIdentities[]"),
    "azure-native:monitor:DiagnosticSetting": ("resourceUri", "storageAccountId", "workspaceId"),
    "azure-native:monitor:MetricAlert": ("actions[].actionGroupId", "scopes[]"),
    "azure-native:monitor:SubscriptionDiagnosticSetting": ("workspaceId",),
    "azure-native:network:NatGateway": ("publicIpAddresses[].id",),
    "azure-native:network:Subnet": ("natGateway.id",),
    "azure-native:storage:StorageAccount": (
        "encryption.encryptionIdentity.encryptionUserAssignedIdentity", "identity.userAssignedIdentities[]"),
}  # fmt: skip
KEY_VAULT_URL_INPUTS = {
    "azure-native:compute:DiskEncryptionSet": ("activeKey.keyUrl",),
    "azure-native:containerservice:ManagedCluster": ("securityProfile.azureKeyVaultKms.keyId",),
    "azure-native:containerregistry:Registry": ("encryption.keyVaultProperties.keyIdentifier",),
    "azure-native:storage:StorageAccount": ("encryption.keyVaultProperties.keyVaultUri",),
}
# /subscriptions/<sub>[/resourceGroups/<rg>]/providers/<Namespace>/<type>/<name>[/<type>/<name>...]
ARM_ID = re.compile(r"/subscriptions/[^/]+(/resourceGroups/[^/]+)?(/providers/[A-Za-z.]+(/\w+/[^/]+)+)?")
# https://<vault>.vault.azure.net/[keys/<key>[/<32-hex version>]] (Key Vault object identifiers)
VAULT_URL = re.compile(r"https://(?P<vault>[^./]+)\.vault\.azure\.net/(keys/(?P<key>[^/]+)(/[0-9a-f]{32})?)?")


def _walk(node: Any, where: str = "") -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, f"{where}.{k}" if where else k)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v, f"{where}[]")
    else:
        yield where, node


def test_every_arm_id_and_key_vault_url_an_azure_update_sends_names_a_resource_of_the_stack(
    updates: dict[str, Plan],
) -> None:
    """A name where ARM takes an id (`vault.name` for `vault.id`) is not an ARM id; an id of another type's
    resource ends in a name the stack never gave. Every value at an id input is checked, and every ARM id of
    the plan is at an input listed here (so a new one is classified, not skipped)."""
    p = updates["azure-dev"]
    azure = [r for r in p.iter_custom() if r["type"].startswith("azure-native:")]
    given = {
        r["inputs"][AZURE_NAME_INPUTS[r["type"]][0]]
        for r in azure
        if AZURE_NAME_INPUTS[r["type"]][0] in r["inputs"]
    }
    wrong, seen = [], 0
    for r in azure:
        ids, urls = ARM_ID_INPUTS.get(r["type"], ()), KEY_VAULT_URL_INPUTS.get(r["type"], ())
        for where, value in _walk(r["inputs"]):
            arm = isinstance(value, str) and value.startswith("/subscriptions/")
            if where in ids:
                seen += 1
                found = ARM_ID.fullmatch(value) if isinstance(value, str) else None
                builtin_role = "/providers/Microsoft.Authorization/roleDefinitions/" in str(value)
                last = str(value).rstrip("/").rsplit("/", 1)[-1]
                own = str(value).startswith(f"/subscriptions/{planner.MOCK_AZURE_SUBSCRIPTION}/")
                if not (found and own and (builtin_role or last in given)):
                    wrong.append(f"{r['name']}: {where} = {value!r} is no ARM id of a resource of the stack")
            elif arm:
                wrong.append(f"{r['name']}: {where} = {value!r}: an ARM id at an input ARM_ID_INPUTS lacks")
            if where in urls:
                seen += 1
                url = VAULT_URL.fullmatch(value) if isinstance(value, str) else None
                if not url or url["vault"] not in given or (url["key"] and url["key"] not in given):
                    wrong.append(f"{r['name']}: {where} = {value!r} is no Key Vault URL of the stack's vault")
    assert not wrong and seen >= 30, "\n".join(wrong) or seen
