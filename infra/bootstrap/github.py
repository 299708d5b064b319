"""The GitHub Actions side of the trust: who may assume which cloud identity, as pure data.

Three identities per cloud, each trusted for exactly one kind of workflow run (the `sub` claim
GitHub puts in the job's OIDC token):

| identity | may | GitHub subject |
|---|---|---|
| `preview` | read the clouds and the state (`pulumi preview`) | `repo:<owner>/<repo>:pull_request` |
| `push` | push images to the platform's repositories | `repo:<owner>/<repo>:ref:refs/heads/main` |
| `deploy-<env>` | `pulumi up` one environment's stack | `repo:<owner>/<repo>:environment:<env>` |

An environment subject only exists in a job that declares `environment: <env>`, i.e. behind that
environment's protection rules (required reviewers for prod). No subject has a wildcard.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

ISSUER = "https://token.actions.githubusercontent.com"
ISSUER_HOST = "token.actions.githubusercontent.com"
AWS_AUDIENCE = "sts.amazonaws.com"
AZURE_AUDIENCE = "api://AzureADTokenExchange"
_REPOSITORY = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+")
_ENVIRONMENT = re.compile(r"[a-z][a-z0-9-]{0,30}")


class BootstrapError(ValueError):
    """Bad bootstrap configuration; the message says what to set."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Identity:
    name: str
    """preview, push or deploy-<env> (cloud resource names derive from it)."""
    subject: str
    """The exact `sub` claim trusted."""
    role: str
    """What it may do: read, push or deploy."""


def identities(repository: str, environments: tuple[str, ...]) -> tuple[Identity, ...]:
    if not _REPOSITORY.fullmatch(repository):
        raise BootstrapError(
            f"github repository {repository!r}: set `<owner>/<repo>` (e.g. acme/eu-ml-platform)"
        )
    if not environments or not all(_ENVIRONMENT.fullmatch(e) for e in environments):
        raise BootstrapError(
            f"environments {environments!r}: lowercase GitHub environment names (dev, staging, prod)"
        )
    prefix = f"repo:{repository}"
    return (
        Identity(name="preview", subject=f"{prefix}:pull_request", role="read"),
        Identity(name="push", subject=f"{prefix}:ref:refs/heads/main", role="push"),
        *(
            Identity(name=f"deploy-{env}", subject=f"{prefix}:environment:{env}", role="deploy")
            for env in environments
        ),
    )


def aws_trust_policy(provider_arn: str, subject: str) -> str:
    """Assume-role policy: this provider, this audience, this exact subject (StringEquals)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {
                        "StringEquals": {
                            f"{ISSUER_HOST}:aud": AWS_AUDIENCE,
                            f"{ISSUER_HOST}:sub": subject,
                        }
                    },
                }
            ],
        },
        sort_keys=True,
    )


def gcp_attribute_condition(repository: str) -> str:
    """The provider accepts tokens of this repository only (CEL over the token's claims)."""
    return f"assertion.repository == '{repository}'"
