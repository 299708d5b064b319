"""No public data: S3 public access blocks, GCS prevention, Azure blob access, no public principals."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .core import (
    Context,
    Finding,
    Resource,
    Rule,
    as_list,
    get,
    is_unknown,
    of_type,
    parse_json_document,
    references,
    types,
    undetermined,
)
from .encryption import S3_BUCKET
from .key_hygiene import wildcard_principals

PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_ACLS = frozenset({"public-read", "public-read-write", "authenticated-read"})
PUBLIC_MEMBERS = frozenset({"allusers", "allauthenticatedusers"})
S3_PAB = types("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")


def check_s3_pab(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    blocks = list(of_type(resources, S3_PAB))
    for bucket in of_type(resources, types(S3_BUCKET)):
        mine = [b for b in blocks if references(b, bucket, "bucket")]
        if not mine:
            yield Finding(
                f"S3 bucket '{bucket.name}' has no BucketPublicAccessBlock: add one with all four flags True.",
                bucket.urn,
            )
            continue
        for block in mine:
            unknown = [f for f in PAB_FLAGS if is_unknown(get(block.inputs, f))]
            if unknown:
                yield Finding(
                    undetermined(
                        f"S3 bucket '{bucket.name}': {unknown} of '{block.name}' are unknown at preview"
                    ),
                    bucket.urn,
                )
            off = [f for f in PAB_FLAGS if get(block.inputs, f) is not True and f not in unknown]
            if off:
                yield Finding(
                    f"S3 bucket '{bucket.name}': BucketPublicAccessBlock '{block.name}' leaves {off} unset or "
                    "False; set all four (blockPublicAcls, blockPublicPolicy, ignorePublicAcls, "
                    "restrictPublicBuckets) to True.",
                    bucket.urn,
                )


# Where each S3 type holds its ACL grants and, in each grant, the grantee's URI (pulumi-aws inputs): the
# bucket's inline `grants` (BucketGrant: `uri` at the top) and BucketAcl's `accessControlPolicy.grants`.
# BucketPolicy has neither, nor a canned `acl`.
_S3_GRANTS = {
    S3_BUCKET: ("grants", "uri"),
    "aws:s3/bucketAcl:BucketAcl": ("accessControlPolicy.grants", "grantee.uri"),
}


def check_s3_acl_policy(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type in _S3_GRANTS:
        yield from _check_s3_acl(r, *_S3_GRANTS[r.type])
    if r.type.startswith("aws:s3/bucketPolicy"):
        if is_unknown(get(r.inputs, "policy")):
            yield undetermined("the bucket policy is unknown at preview")
            return
        doc = parse_json_document(get(r.inputs, "policy"))
        for sid in wildcard_principals(doc or {}):
            yield f"bucket policy statement {sid} allows Principal '*' without a Condition: the bucket is public. Grant to named roles."


def _check_s3_acl(r: Resource, grants_path: str, uri_path: str) -> Iterator[str]:
    acl = get(r.inputs, "acl")
    if is_unknown(acl):
        # An unknown canned ACL can be public-read as much as private.
        yield undetermined("the canned acl is unknown at preview")
    elif isinstance(acl, str) and acl in PUBLIC_ACLS:
        yield f"canned ACL {acl!r} makes objects public: remove it (keep ownership BucketOwnerEnforced)."
    grants = get(r.inputs, grants_path)
    # The list, a grant or its grantee URI unknown: that grant may be to AllUsers.
    if is_unknown(grants) or any(is_unknown(get(g, uri_path)) for g in as_list(grants)):
        yield undetermined(f"{grants_path} (or a grantee) is unknown at preview")
    for grant in as_list(grants):
        uri = get(grant, uri_path)
        if isinstance(uri, str) and uri.endswith(("/global/AllUsers", "/global/AuthenticatedUsers")):
            yield f"ACL grant to {uri} makes the bucket public: remove the grant."


def check_gcs(r: Resource, ctx: Context) -> Iterator[str]:
    pap = get(r.inputs, "publicAccessPrevention")
    if is_unknown(pap):
        yield undetermined("publicAccessPrevention is unknown at preview")
    elif pap != "enforced":
        yield f"publicAccessPrevention is {pap!r}: set it to 'enforced'."
    ubla = get(r.inputs, "uniformBucketLevelAccess")
    if is_unknown(ubla):
        yield undetermined("uniformBucketLevelAccess is unknown at preview")
    elif ubla is not True:
        yield "uniformBucketLevelAccess is off, so object ACLs can grant public access: set it to True."


_GCP_IAM = re.compile(r"^gcp:[^:]+/[^:]*i[aA][mM](Member|Binding|Policy):", re.IGNORECASE)


def gcp_iam_type(resource_type: str) -> bool:
    return bool(_GCP_IAM.match(resource_type))


def gcp_members(r: Resource) -> list[tuple[str, str]]:
    """(role, member) pairs of a GCP IAM member/binding/policy resource."""
    pairs = []
    role = get(r.inputs, "role")
    for m in as_list(get(r.inputs, "member")) + as_list(get(r.inputs, "members")):
        pairs.append((str(role), str(m)))
    doc = parse_json_document(get(r.inputs, "policyData"))
    for b in as_list((doc or {}).get("bindings")):
        for m in as_list(b.get("members")):
            pairs.append((str(b.get("role")), str(m)))
    return [(ro, m) for ro, m in pairs if not is_unknown(m)]


def check_gcp_members(r: Resource, ctx: Context) -> Iterator[str]:
    unknown = [k for k in ("member", "members", "policyData") if is_unknown(get(r.inputs, k))]
    # gcp_members drops unknown elements (iam-no-admin wants the known ones): one unknown element
    # of `members` can be allUsers as much as a whole unknown field can.
    unknown += [f"members[{n}]" for n, m in enumerate(as_list(get(r.inputs, "members"))) if is_unknown(m)]
    if unknown:
        # Resource policies do not see dependency edges, so an unknown member might be allUsers.
        yield undetermined(f"{unknown[0]} is unknown at preview: the member cannot be checked")
    for role, member in gcp_members(r):
        if member.lower() in PUBLIC_MEMBERS:
            yield f"{role} is granted to {member!r}: anyone on the internet gets it. Grant to a service account or group."


def check_azure_storage(r: Resource, ctx: Context) -> Iterator[str]:
    if r.type == "azure-native:storage:StorageAccount":
        v = get(r.inputs, "allowBlobPublicAccess")
        if is_unknown(v):
            yield undetermined("allowBlobPublicAccess is unknown at preview")
        elif v is not False:
            yield "allowBlobPublicAccess is not False: set allow_blob_public_access=False (older API versions default to True)."
    elif r.type == "azure-native:storage:BlobContainer":
        v = get(r.inputs, "publicAccess")
        if is_unknown(v):
            yield undetermined("publicAccess is unknown at preview")
        elif isinstance(v, str) and v.lower() != "none":
            yield f"container publicAccess={v!r}: set it to 'None'."


NETWORK_TYPES = {
    "azure-native:storage:StorageAccount": "publicNetworkAccess",
    "azure-native:containerregistry:Registry": "publicNetworkAccess",
    "azure-native:keyvault:Vault": "properties.publicNetworkAccess",
}


def check_azure_network(r: Resource, ctx: Context) -> Iterator[str]:
    path = NETWORK_TYPES[r.type]
    v = get(r.inputs, path)
    if is_unknown(v):
        yield undetermined(f"{path} is unknown at preview")
    elif str(v).lower() != "disabled":
        yield f"{path} is {v!r}: set it to 'Disabled' and reach the service through a private endpoint."


RULES = (
    Rule(
        name="s3-bucket-public-access-block",
        description="Every S3 bucket has a public access block with all four settings on.",
        kind="stack",
        severity="critical",
        enforcement="mandatory",
        remediation="Add aws.s3.BucketPublicAccessBlock(bucket=b.id, block_public_acls=True, block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True).",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/access-control-block-public-access.html",
        validate=check_s3_pab,
        applies_to=types(S3_BUCKET, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"),
    ),
    Rule(
        name="s3-no-public-acl-or-policy",
        description="No S3 ACL or bucket policy grants access to everyone.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Remove public canned ACLs and AllUsers grants; give bucket policy statements named principals.",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/about-object-ownership.html",
        validate=check_s3_acl_policy,
        applies_to=types(S3_BUCKET, "aws:s3/bucketAcl*", "aws:s3/bucketPolicy:BucketPolicy"),
    ),
    Rule(
        name="gcs-public-access-prevention",
        description="GCS buckets enforce public access prevention and uniform bucket-level access.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Set public_access_prevention='enforced' and uniform_bucket_level_access=True on gcp.storage.Bucket.",
        url="https://cloud.google.com/storage/docs/public-access-prevention",
        validate=check_gcs,
        applies_to=types("gcp:storage/bucket:Bucket"),
    ),
    Rule(
        name="gcp-no-public-iam-members",
        description="No GCP IAM grant to allUsers or allAuthenticatedUsers.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Grant roles to service accounts or groups; never to allUsers/allAuthenticatedUsers.",
        url="https://cloud.google.com/iam/docs/principal-identifiers",
        validate=check_gcp_members,
        applies_to=gcp_iam_type,
    ),
    Rule(
        name="azure-storage-no-public-blob",
        description="Azure storage accounts forbid anonymous blob access; containers are private.",
        kind="resource",
        severity="critical",
        enforcement="mandatory",
        remediation="Set allow_blob_public_access=False on the account and public_access='None' on containers.",
        url="https://learn.microsoft.com/en-us/azure/storage/blobs/anonymous-read-access-prevent",
        validate=check_azure_storage,
        applies_to=types("azure-native:storage:StorageAccount", "azure-native:storage:BlobContainer"),
    ),
    Rule(
        name="azure-public-network-access-disabled",
        description="Azure storage, registries and key vaults are not reachable from the public internet.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Set public_network_access='Disabled' and add a private endpoint in the cluster's virtual network.",
        url="https://learn.microsoft.com/en-us/azure/private-link/private-endpoint-overview",
        validate=check_azure_network,
        applies_to=types(*NETWORK_TYPES),
    ),
)
