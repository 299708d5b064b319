"""A kubeconfig whose user authenticates through an exec plugin: short-lived tokens, nothing stored."""

from __future__ import annotations

import json
from collections.abc import Sequence


def exec_kubeconfig(name: str, server: str, ca_data: str, command: str, args: Sequence[str] = ()) -> str:
    user: dict[str, object] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": command,
        "args": list(args),
        # Plugins such as gke-gcloud-auth-plugin read the cluster from the exec info.
        "provideClusterInfo": True,
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": {"exec": user}}],
        }
    )


# The AKS AAD server application: the audience of every token for an Entra ID-integrated cluster
# (learn.microsoft.com/azure/aks/kubelogin-authentication).
AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
# Login modes that need the tenant to be named (the others read it from the Azure CLI or the MSI).
_TENANT_MODES = ("spn", "workloadidentity")


def aks_kubeconfig(user_kubeconfig: str, login: str) -> str:
    """AKS's user kubeconfig (listClusterUserCredential, `format=exec`) made non-interactive.

    AKS hands out `kubelogin get-token --login devicecode`: a person must open a browser, so
    `pulumi up` in CI waits forever. Keep the cluster, server and CA, and let kubelogin take the token
    from `login` (kubelogin's own `convert-kubeconfig -l <mode>` does the same rewrite).
    """
    import yaml

    document = yaml.safe_load(user_kubeconfig) or {}
    try:
        (cluster,) = document["clusters"]
        server, ca = cluster["cluster"]["server"], cluster["cluster"]["certificate-authority-data"]
        (user,) = document["users"]
        given = list(user["user"]["exec"].get("args") or [])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"AKS returned a kubeconfig without one cluster and one exec user: {err!r}"
        ) from None

    def arg(flag: str, default: str | None = None) -> str | None:
        return given[given.index(flag) + 1] if flag in given[:-1] else default

    args = ["get-token", "--login", login, "--server-id", arg("--server-id", AKS_SERVER_ID) or AKS_SERVER_ID]
    tenant = arg("--tenant-id")
    if login in _TENANT_MODES and tenant:
        args += ["--tenant-id", tenant]
    return exec_kubeconfig(cluster["name"], server, ca, "kubelogin", args)
