"""CI identities trusted through GitHub's OIDC issuer (infra/bootstrap): each trusts one exact
subject, never a wildcard, for the right audience.

A role that trusts `token.actions.githubusercontent.com` without a `sub` condition, or with
`repo:org/*` / `repo:org/repo:*`, can be assumed by any workflow run of any branch (or of any
repository of the organisation): a pull request from a fork would get the deploy identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .core import Context, Resource, Rule, as_list, get, is_unknown, parse_json_document, types

GITHUB_ISSUER = "token.actions.githubusercontent.com"
AWS_ROLE = "aws:iam/role:Role"
GCP_PROVIDER = "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"
AZURE_FIC = "azure-native:managedidentity:FederatedIdentityCredential"


def _github_statements(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for statement in as_list(doc.get("Statement")):
        federated = as_list(get(statement, "Principal.Federated"))
        keys = [k for block in (statement.get("Condition") or {}).values() for k in (block or {})]
        github = any(GITHUB_ISSUER in str(f) for f in federated) or any(
            k.startswith(GITHUB_ISSUER) for k in keys
        )
        if statement.get("Effect") == "Allow" and github:
            yield statement


def check_subject_pinned(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type == AWS_ROLE:
        doc = parse_json_document(get(r.inputs, "assumeRolePolicy"))
        for statement in _github_statements(doc or {}):
            conditions = statement.get("Condition") or {}
            equals = conditions.get("StringEquals") or {}
            like = conditions.get("StringLike") or {}
            subjects = as_list(equals.get(f"{GITHUB_ISSUER}:sub")) + as_list(like.get(f"{GITHUB_ISSUER}:sub"))
            if not subjects:
                yield "trusts GitHub's OIDC issuer without a `sub` condition: any repository's workflow could assume it. Add StringEquals token.actions.githubusercontent.com:sub = repo:<owner>/<repo>:<context>."
            for subject in subjects:
                if "*" in str(subject) or "?" in str(subject):
                    yield f"`sub` {subject!r} has a wildcard: trust one exact subject (pull_request, ref:refs/heads/main or environment:<name>)."
            if equals.get(f"{GITHUB_ISSUER}:aud") != "sts.amazonaws.com":
                yield "no StringEquals token.actions.githubusercontent.com:aud = sts.amazonaws.com condition: add it."
    elif r.type == GCP_PROVIDER:
        issuer = get(r.inputs, "oidc.issuerUri")
        condition = get(r.inputs, "attributeCondition")
        github_issuer = isinstance(issuer, str) and GITHUB_ISSUER in issuer
        unscoped = not isinstance(condition, str) or "assertion.repository" not in condition
        if github_issuer and not is_unknown(condition) and unscoped:
            yield "a GitHub provider without attributeCondition on assertion.repository accepts every repository on GitHub: set attributeCondition = \"assertion.repository == '<owner>/<repo>'\"."
    elif r.type == AZURE_FIC:
        issuer = get(r.inputs, "issuer")
        if isinstance(issuer, str) and GITHUB_ISSUER in issuer:
            subject = get(r.inputs, "subject")
            if not isinstance(subject, str) or not subject.startswith("repo:") or "*" in subject:
                yield f"subject {subject!r}: set one exact repo:<owner>/<repo>:<context> subject."
            if "api://AzureADTokenExchange" not in as_list(get(r.inputs, "audiences")):
                yield "audiences must be ['api://AzureADTokenExchange']."


RULES: tuple[Rule, ...] = (
    Rule(
        name="ci-oidc-subject-pinned",
        description="Cloud identities trusted through GitHub's OIDC issuer trust one exact repository subject and the cloud's audience.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Trust `repo:<owner>/<repo>:pull_request` (preview), `:ref:refs/heads/main` (push) or `:environment:<env>` (deploy); see infra/bootstrap/github.py.",
        url="https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect",
        validate=check_subject_pinned,
        applies_to=types(AWS_ROLE, GCP_PROVIDER, AZURE_FIC),
    ),
)
