"""The mock engine's answers for `infra.plan`: what a cloud account would return to invokes, and which outputs a
provider computes on create (unknown at preview, plausible values in update mode for the unit tests: for GCP and
Azure the providers' own id formats, plan_ids.py)."""

from __future__ import annotations

import base64
from typing import Any

from infra import plan_ids
from infra.azure_names import AS_IS, AZURE_NAME_INPUTS, GUID, SUFFIXED

# Pulumi's wire value for "unknown during preview" (pulumi.runtime.rpc.UNKNOWN).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# Placeholder answers of the invokes the program makes (what the target account would return).
MOCK_ACCOUNT = "123456789012"
MOCK_GCP_PROJECT_NUMBER = "123456789012"
MOCK_AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
MOCK_AZURE_TENANT = "11111111-1111-1111-1111-111111111111"
MOCK_AZURE_OBJECT = "22222222-2222-2222-2222-222222222222"


def azure_name(typ: str, name: str, inputs: dict[str, Any]) -> str:
    """The `name` output azure-native returns for a created resource (random parts derived from the logical
    name, so renders stay reproducible); the logical name for a type not in AZURE_NAME_INPUTS."""
    key, unset = AZURE_NAME_INPUTS.get(typ, ("", AS_IS))
    if isinstance(inputs.get(key), str):
        return str(inputs[key])
    if unset == GUID:
        return plan_ids.server_values(typ, name)["server_uuid"]
    if unset == SUFFIXED:
        return name + plan_ids.server_values(typ, name)["server_hex"][:8]
    return name


def mocks_class() -> Any:
    import pulumi

    class PlanMocks(pulumi.runtime.Mocks):
        """Engine stand-in. Preview: ids and computed outputs unknown. Update (unit tests): plausible values."""

        def __init__(self, preview: bool) -> None:
            self.preview = preview
            # Provider id -> its inputs: a GCP resource without its own `project` or `region` takes the
            # provider's, in its id as in its API calls.
            self.providers: dict[str, dict[str, Any]] = {}

        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
            # A planned create echoes its inputs; azure-native's `identity` input (a list of ids) and
            # output (a map) differ in shape, so it is left unknown as the provider's preview would.
            state = {
                k: v
                for k, v in args.inputs.items()
                if not (args.typ.startswith("azure-native:") and k == "identity")
            }
            computed = _computed(args.typ, args.name)
            if self.preview:
                # Outputs the provider computes on create are unknown at preview, even inside a
                # structure whose other fields echo known inputs (e.g. AKS `oidcIssuerProfile.issuerURL`).
                state.update(dict.fromkeys([*computed, *plan_ids.preview_unknown(args.typ)], UNKNOWN))
                return "", state
            # AWS keeps a placeholder id (the tests compare AWS ids by identity; ARNs are the references).
            resource_id = f"{args.name}-id"
            state.setdefault("arn", f"arn:mock:{args.typ}:{args.name}")
            if args.typ.startswith("azure-native:"):
                state["name"] = azure_name(args.typ, args.name, args.inputs)
            if args.typ.startswith(("gcp:", "azure-native:")):
                # The provider's own id format (plan_ids.py), so values derived from ids can be judged.
                try:
                    resource_id, provided = plan_ids.outputs(
                        args.typ, args.name, state, self._context(args.provider)
                    )
                except plan_ids.MissingIdTemplate:
                    provided = {}  # a test names the type to add (test_infra_update_ids.py)
                _merge(state, provided)
            elif args.typ.startswith("pulumi:providers:"):
                self.providers[resource_id] = dict(args.inputs)
            state.setdefault("name", args.name)
            state.setdefault("id", resource_id)
            state.update(computed)
            identity = args.inputs.get("identity")
            computed_identity = "identity" in computed
            if args.typ.startswith("azure-native:") and isinstance(identity, dict) and not computed_identity:
                # The SDK copies known inputs to outputs after an update: give `identity` its output shape.
                ids = identity.get("userAssignedIdentities") or []
                state["identity"] = {**identity, "userAssignedIdentities": {i: {} for i in ids}}
            return resource_id, state

        def _context(self, provider: str | None) -> dict[str, Any]:
            inputs = self.providers.get((provider or "").rsplit("::", 1)[-1], {})
            return {
                "project": inputs.get("project"),
                "region": inputs.get("region"),
                "number": MOCK_GCP_PROJECT_NUMBER,
                "subscription": MOCK_AZURE_SUBSCRIPTION,
            }

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
            answers: dict[str, dict[str, Any]] = {
                "aws:index/getCallerIdentity:getCallerIdentity": {
                    "accountId": MOCK_ACCOUNT,
                    "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/deployer",
                    "userId": "AIDAMOCK",
                    "id": MOCK_ACCOUNT,
                },
                "gcp:organizations/getProject:getProject": {
                    "number": MOCK_GCP_PROJECT_NUMBER,
                    "projectId": args.args.get("projectId", "project"),
                    "id": f"projects/{args.args.get('projectId', 'project')}",
                },
                "gcp:storage/getProjectServiceAccount:getProjectServiceAccount": {
                    "emailAddress": f"service-{MOCK_GCP_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com",
                    "id": "gcs-agent",
                },
                "gcp:logging/getProjectCmekSettings:getProjectCmekSettings": {
                    "serviceAccountId": f"service-{MOCK_GCP_PROJECT_NUMBER}@gcp-sa-logging.iam.gserviceaccount.com",
                    "id": "logging-cmek",
                },
                "aws:iam/getRole:getRole": {
                    "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/"
                    f"{args.args.get('name', 'role')}",
                    "name": args.args.get("name", "role"),
                    "id": args.args.get("name", "role"),
                },
                "azure-native:containerservice:listManagedClusterUserCredentials": {
                    "kubeconfigs": [
                        {
                            "name": "clusterUser",
                            "value": base64.b64encode(
                                aks_user_kubeconfig(args.args.get("resourceName", "aks")).encode()
                            ).decode(),
                        }
                    ]
                },
                "azure-native:authorization:getClientConfig": {
                    "subscriptionId": MOCK_AZURE_SUBSCRIPTION,
                    "tenantId": MOCK_AZURE_TENANT,
                    "objectId": MOCK_AZURE_OBJECT,
                    "clientId": MOCK_AZURE_OBJECT,
                },
            }
            return answers.get(args.token, {}), []

    return PlanMocks


def aks_user_kubeconfig(cluster: str) -> str:
    """What AKS's listClusterUserCredential returns for an Entra ID cluster (format=exec): device code login."""
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {cluster}
  cluster:
    certificate-authority-data: Q0E=
    server: https://{cluster}-dns.hcp.spaincentral.azmk8s.io:443
contexts:
- name: {cluster}
  context: {{cluster: {cluster}, user: clusterUser_{cluster}}}
current-context: {cluster}
users:
- name: clusterUser_{cluster}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: kubelogin
      args: [get-token, --environment, AzurePublicCloud, --server-id, 6dae42f8-4368-4678-94ff-3960e28e3630,
             --client-id, 80faf920-1908-4b52-b5ef-a8e7bedfc67a, --tenant-id, {MOCK_AZURE_TENANT}, --login, devicecode]
"""


def _computed(typ: str, name: str) -> dict[str, Any]:
    """Outputs a provider computes on create, for the unit tests that resolve them (update mode only)."""
    computed: dict[str, dict[str, Any]] = {
        "aws:eks/cluster:Cluster": {
            "endpoint": f"https://{name}.eks.example",
            "certificateAuthority": {"data": "Q0E="},
            "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.example/id/{name}"}]}],
        },
        "azure-native:network:PublicIPAddress": {"ipAddress": "203.0.113.7"},
        "aws:eks/nodeGroup:NodeGroup": {"resources": [{"autoscalingGroups": [{"name": f"eks-{name}-asg"}]}]},
        "gcp:container/cluster:Cluster": {
            "endpoint": "203.0.113.10",
            "masterAuth": {"clusterCaCertificate": "Q0E="},
        },
        "azure-native:containerservice:ManagedCluster": {
            "identityProfile": {
                "kubeletidentity": {"objectId": f"{name}-kubelet", "clientId": f"{name}-kubelet"}
            },
            "oidcIssuerProfile": {"enabled": True, "issuerURL": f"https://oidc.example/{name}/"},
            "fqdn": f"{name}-dns.hcp.spaincentral.azmk8s.io",
        },
        "azure-native:managedidentity:UserAssignedIdentity": {
            "clientId": f"{name}-client",
            "principalId": f"{name}-principal",
        },
        "azure-native:compute:DiskEncryptionSet": {
            "identity": {"type": "SystemAssigned", "principalId": f"{name}-principal", "tenantId": "tenant"}
        },
    }
    return computed.get(typ, {})


def _merge(state: dict[str, Any], provided: dict[str, Any]) -> None:
    """Computed outputs into the echoed inputs: a nested output (a vault's `properties.vaultUri`) joins the
    structure's known fields."""
    for key, value in provided.items():
        if isinstance(value, dict) and isinstance(state.get(key), dict):
            _merge(state[key], value)
        else:
            state[key] = value
