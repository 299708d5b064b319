"""Container registries: immutable tags, scan on push, no anonymous pull, no admin user."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .core import Context, Resource, Rule, get, is_unknown, parse_json_document, types, undetermined
from .key_hygiene import wildcard_principals

ECR = "aws:ecr/repository:Repository"
AR = "gcp:artifactregistry/repository:Repository"
ACR = "azure-native:containerregistry:Registry"


def check_immutable_scanned(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == ECR:
        if str(get(i, "imageTagMutability")).startswith("IMMUTABLE") is False:
            yield "imageTagMutability is not IMMUTABLE: a pushed tag could be overwritten; set it to 'IMMUTABLE'."
        if get(i, "imageScanningConfiguration.scanOnPush") is not True:
            yield "scan on push is off: set imageScanningConfiguration.scanOnPush=True."
    elif r.type == AR:
        if get(i, "format") not in (None, "DOCKER"):
            return
        if get(i, "dockerConfig.immutableTags") is not True:
            yield "dockerConfig.immutableTags is not True: set it so tags cannot be moved."
        if get(i, "vulnerabilityScanningConfig.enablementConfig") == "DISABLED":
            yield "vulnerability scanning is DISABLED on this repository: remove the override."


def check_anonymous(r: Resource, ctx: Context) -> Iterator[str]:
    i = r.inputs
    if r.type == "aws:ecr/repositoryPolicy:RepositoryPolicy":
        if is_unknown(get(i, "policy")):
            yield undetermined("the repository policy is unknown at preview")
            return
        doc = parse_json_document(get(i, "policy"))
        for sid in wildcard_principals(doc or {}):
            yield f"repository policy statement {sid} allows Principal '*': anyone could pull. Name the pulling roles."
    elif r.type == ACR:
        if is_unknown(get(i, "anonymousPullEnabled")) or is_unknown(get(i, "adminUserEnabled")):
            yield undetermined("anonymousPullEnabled or adminUserEnabled is unknown at preview")
        if get(i, "anonymousPullEnabled") is True:
            yield "anonymousPullEnabled is True: set it to False."
        if get(i, "adminUserEnabled") is True:
            yield "adminUserEnabled is True (a shared password): set it to False and grant AcrPull to identities."


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
_FLOATING = re.compile(r"[\^~*xX<>=|, ]|^$")


def check_helm(r: Resource, ctx: Context) -> Iterator[str]:
    version = get(r.inputs, "version")
    chart = get(r.inputs, "chart")
    if is_unknown(version):
        yield undetermined("the chart version is unknown at preview")
    elif not isinstance(version, str) or _FLOATING.search(version):
        yield f"chart {chart!r} version {version!r} floats: pin an exact chart version (e.g. '9.43.2')."
    repo = get(r.inputs, "repositoryOpts.repo")
    if is_unknown(repo):
        yield undetermined("repositoryOpts.repo is unknown at preview")
    elif isinstance(repo, str) and not repo.startswith(("https://", "oci://")):
        yield f"chart repository {repo!r} is not fetched over TLS: use https:// or oci://."


RULES = (
    Rule(
        name="registry-immutable-scanned",
        description="Image repositories have immutable tags and scan images on push.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="ECR: image_tag_mutability='IMMUTABLE', image_scanning_configuration.scan_on_push=True. Artifact Registry: docker_config.immutable_tags=True.",
        url="https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-tag-mutability.html",
        validate=check_immutable_scanned,
        applies_to=types(ECR, AR),
    ),
    Rule(
        name="registry-no-anonymous-access",
        description="Registries allow no anonymous pull and no shared admin user.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Grant pull to the cluster's identities only; ACR: anonymous_pull_enabled=False, admin_user_enabled=False.",
        url="https://learn.microsoft.com/en-us/azure/container-registry/anonymous-pull-access",
        validate=check_anonymous,
        applies_to=types("aws:ecr/repositoryPolicy:RepositoryPolicy", ACR),
    ),
    Rule(
        name="helm-chart-pinned",
        description="Helm releases pin an exact chart version from a TLS repository (no floating ranges).",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Set version='<exact chart version>' and repository_opts.repo='https://...' on kubernetes.helm.v3.Release.",
        url="https://www.pulumi.com/registry/packages/kubernetes/api-docs/helm/v3/release/",
        validate=check_helm,
        applies_to=types(HELM_RELEASE),
    ),
)
