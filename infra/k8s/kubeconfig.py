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
