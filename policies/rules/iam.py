"""IAM least privilege: no wildcard actions or resources, no admin or basic roles."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .core import Context, Resource, Rule, as_list, get, is_unknown, parse_json_document, types, undetermined
from .key_hygiene import wildcard_principals
from .public_access import gcp_iam_type, gcp_members

# Actions that only support Resource '*' (no resource-level permissions): '*' is the only option.
RESOURCE_STAR_ONLY = frozenset(
    {
        "ecr:getauthorizationtoken",
        "sts:getcalleridentity",
        "ec2:describeinstances",
        "ec2:describeinstancetypes",
        "ec2:describeregions",
        "ec2:describeavailabilityzones",
        "ec2:describespotpricehistory",
        "ec2:describespotinstancerequests",
        "autoscaling:describeautoscalinggroups",
        "cloudwatch:putmetricdata",
        "logs:describeloggroups",
        "s3:listallmybuckets",
        "ec2:getinstancetypesfrominstancerequirements",
    }
)


def star_only(action: str) -> bool:
    """Actions that can only be granted on Resource '*'. Describe* calls (ec2, autoscaling, ...) have no
    resource-level permissions and return metadata only, so '*' is the only way to grant them."""
    a = action.lower()
    return a in RESOURCE_STAR_ONLY or a.split(":", 1)[-1].startswith("describe")


ADMIN_POLICY_ARNS = re.compile(
    r"arn:aws[-a-z]*:iam::aws:policy/(AdministratorAccess|PowerUserAccess|IAMFullAccess)$"
)
GCP_BASIC_ROLES = frozenset({"roles/owner", "roles/editor", "roles/viewer"})
# Built-in Azure role definition ids (the same in every tenant).
AZURE_PRIVILEGED = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
}
# Owner/Contributor for a workload identity is too broad at subscription and at resource-group scope.
_SUBSCRIPTION_SCOPE = re.compile(
    r"^/subscriptions/[^/]+/?$|^/subscriptions/[^/]+/resourceGroups/[^/]+/?$"
    r"|^/providers/Microsoft\.Management/managementGroups/",
    re.I,
)

AWS_POLICY_DOCS = {
    "aws:iam/policy:Policy": "policy",
    "aws:iam/rolePolicy:RolePolicy": "policy",
    "aws:iam/userPolicy:UserPolicy": "policy",
    "aws:iam/groupPolicy:GroupPolicy": "policy",
}
K8S_ROLES = types(
    "kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
)
K8S_BINDINGS = types(
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
)


def aws_policy_documents(r: Resource) -> list[tuple[str, Any]]:
    """(where, raw document) of every identity policy the resource carries."""
    docs = []
    if r.type in AWS_POLICY_DOCS:
        docs.append((AWS_POLICY_DOCS[r.type], get(r.inputs, AWS_POLICY_DOCS[r.type])))
    if r.type == "aws:iam/role:Role":
        for n, inline in enumerate(as_list(get(r.inputs, "inlinePolicies"))):
            docs.append((f"inlinePolicies[{n}]", get(inline, "policy")))
    return [(w, d) for w, d in docs if d is not None]


def statement_wildcards(doc: dict[str, Any]) -> Iterator[str]:
    for n, st in enumerate(as_list(doc.get("Statement"))):
        if not isinstance(st, dict) or st.get("Effect") != "Allow":
            continue
        sid = st.get("Sid") or f"Statement[{n}]"
        if "NotAction" in st:
            yield f"{sid} allows NotAction (everything except a list): list the actions instead"
        if "NotResource" in st:
            yield f"{sid} allows NotResource (everything except a list): list the resources instead"
        actions = [str(a) for a in as_list(st.get("Action"))]
        # Partial wildcards (s3:Put*, iam:*Role*) grant actions added to the service later, too.
        wild = [a for a in actions if "*" in a or "?" in a]
        if wild:
            yield f"{sid} allows wildcard action(s) {wild}: list the exact actions"
        resources = [str(x) for x in as_list(st.get("Resource"))]
        if "*" in resources and not all(star_only(a) for a in actions):
            yield f"{sid} allows {actions} on Resource '*': scope it to the ARNs it needs"


def check_wildcards(r: Resource, ctx: Context) -> Iterator[str]:
    for where, raw in aws_policy_documents(r):
        if is_unknown(raw):
            yield undetermined(f"{where} is unknown at preview (built from values of other resources)")
            continue
        doc = parse_json_document(raw)
        if doc is None:
            continue
        for problem in statement_wildcards(doc):
            yield f"{where}: {problem}."
    if K8S_ROLES(r.type):
        for n, rule in enumerate(as_list(get(r.inputs, "rules"))):
            for key in ("verbs", "resources", "apiGroups"):
                if "*" in as_list(get(rule, key)) and key != "apiGroups":
                    yield f"rules[{n}].{key} contains '*': list the exact {key}."
    if r.type == "azure-native:authorization:RoleDefinition":
        for n, perm in enumerate(as_list(get(r.inputs, "permissions"))):
            if "*" in as_list(get(perm, "actions")):
                yield f"permissions[{n}].actions contains '*': list the exact actions."


def check_admin(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type.startswith("aws:iam/") and r.type.endswith("PolicyAttachment"):
        arn = get(r.inputs, "policyArn")
        if isinstance(arn, str) and ADMIN_POLICY_ARNS.match(arn):
            yield f"attaches {arn.rsplit('/', 1)[-1]}: attach a policy scoped to the workload instead."
    if r.type == "aws:iam/role:Role":
        for arn in as_list(get(r.inputs, "managedPolicyArns")):
            if isinstance(arn, str) and ADMIN_POLICY_ARNS.match(arn):
                yield f"managedPolicyArns includes {arn.rsplit('/', 1)[-1]}: use a scoped policy."
    if gcp_iam_type(r.type):
        role = get(r.inputs, "role")
        if isinstance(role, str) and role in GCP_BASIC_ROLES and not gcp_members(r):
            # A basic role is too broad whoever gets it, even a member unknown at preview.
            yield f"basic role {role} granted: use a predefined or custom role with only the needed permissions."
        for role, member in gcp_members(r):
            if role in GCP_BASIC_ROLES:
                yield f"basic role {role} granted to {member}: use a predefined or custom role with only the needed permissions."
    if r.type == "azure-native:authorization:RoleAssignment":
        yield from _azure_assignment(r)
    if K8S_BINDINGS(r.type) and get(r.inputs, "roleRef.name") == "cluster-admin":
        yield "binds cluster-admin: bind a Role with the verbs and resources the subject needs."


def _azure_assignment(r: Resource) -> Iterator[str]:
    """Owner/Contributor/User Access Administrator at subscription, management-group or resource-group
    scope. A known non-privileged role is fine at any scope, and any role is fine on a single resource;
    only what could still be a broad privileged grant is undetermined."""
    raw_role = get(r.inputs, "roleDefinitionId")
    scope = get(r.inputs, "scope")
    role_id = None if is_unknown(raw_role) else str(raw_role or "").rsplit("/", 1)[-1].lower()
    broad = None if is_unknown(scope) else isinstance(scope, str) and bool(_SUBSCRIPTION_SCOPE.match(scope))
    if role_id is not None and role_id not in AZURE_PRIVILEGED:
        return
    if broad is False:
        return
    if role_id is None or broad is None:
        yield undetermined(
            "roleDefinitionId or scope is unknown at preview: a privileged role at a broad scope cannot be excluded"
        )
        return
    yield f"{AZURE_PRIVILEGED[role_id]} at subscription/resource-group scope {scope}: assign a narrower role on the resource it needs."


def parliament_available() -> bool:
    try:
        import parliament  # noqa: F401
    except ImportError:
        return False
    return True


def check_parliament(r: Resource, ctx: Context) -> Iterator[str]:
    """Parliament's own AWS IAM linter (only where installed: the pack's virtualenv)."""
    try:
        from parliament import analyze_policy_string, enhance_finding
    except ImportError:
        return
    import json

    for where, raw in aws_policy_documents(r):
        if is_unknown(raw):
            continue  # iam-no-wildcards reports it as undetermined
        text = raw if isinstance(raw, str) else json.dumps(raw)
        for f in analyze_policy_string(text).findings:
            enhance_finding(f)  # fills severity/title from Parliament's own config, as its CLI does
            if str(f.severity).upper() in ("HIGH", "MEDIUM", "CRITICAL"):
                yield f"{where}: Parliament {f.issue} ({f.severity}): {f.title}. {f.detail}".strip()


# Trust policies and resource policies: (type, input holding the document). Bucket policies and key
# policies and ECR repository policies have their own rules (s3-no-public-acl-or-policy,
# kms-key-policy-no-wildcard-principal, registry-no-anonymous-access).
RESOURCE_POLICIES = {
    "aws:iam/role:Role": "assumeRolePolicy",
    "aws:sqs/queuePolicy:QueuePolicy": "policy",
    "aws:sqs/queue:Queue": "policy",
    "aws:sns/topicPolicy:TopicPolicy": "policy",
    "aws:sns/topic:Topic": "policy",
    "aws:ecr/registryPolicy:RegistryPolicy": "policy",
}


def check_public_principal(r: Resource, ctx: Context) -> Iterator[str]:
    key = RESOURCE_POLICIES[r.type]
    raw = get(r.inputs, key)
    if raw is None:
        return
    if is_unknown(raw):
        yield undetermined(f"{key} is unknown at preview")
        return
    doc = parse_json_document(raw)
    if doc is None:
        return
    for sid in wildcard_principals(doc):
        what = "anyone may assume this role" if key == "assumeRolePolicy" else "anyone is granted access"
        yield f"{key} statement {sid} has Principal '*' (or AWS: '*') without a Condition: {what}. Name the principals."


IAM_TYPES = types(*AWS_POLICY_DOCS, "aws:iam/role:Role", "azure-native:authorization:RoleDefinition")
ADMIN_TYPES = types(
    "aws:iam/*PolicyAttachment:*", "aws:iam/role:Role", "azure-native:authorization:RoleAssignment"
)

RULES = (
    Rule(
        name="iam-no-wildcards",
        description="Identity policies and roles grant no '*' action, no '*' resource, no NotAction.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="List exact actions (s3:GetObject, s3:PutObject) on exact ARNs (bucket and bucket/*); Kubernetes roles list verbs and resources.",
        url="https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege",
        validate=check_wildcards,
        applies_to=lambda t: IAM_TYPES(t) or K8S_ROLES(t),
    ),
    Rule(
        name="iam-no-admin",
        description="No administrator policies, GCP basic roles, Azure Owner/Contributor at subscription scope or cluster-admin bindings.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Replace AdministratorAccess/roles/owner/roles/editor/Owner/Contributor/cluster-admin with a role scoped to the workload.",
        url="https://cloud.google.com/iam/docs/roles-overview#basic",
        validate=check_admin,
        applies_to=lambda t: ADMIN_TYPES(t) or gcp_iam_type(t) or K8S_BINDINGS(t),
    ),
    Rule(
        name="iam-no-public-principal",
        description="Trust policies and SQS, SNS and ECR registry policies grant nothing to Principal '*'.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Replace Principal '*' with the account, role or service that needs access, or add a Condition that pins it (aws:PrincipalArn, aws:SourceAccount).",
        url="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html",
        validate=check_public_principal,
        applies_to=types(*RESOURCE_POLICIES),
    ),
    Rule(
        name="aws-iam-policy-lint",
        description="AWS policy documents pass Parliament's lint (malformed actions, resource mismatches, privilege escalation).",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Fix the finding Parliament names (see its issue id in the message).",
        url="https://github.com/duo-labs/parliament",
        validate=check_parliament,
        applies_to=types(*AWS_POLICY_DOCS, "aws:iam/role:Role"),
    ),
)
