"""Spot GPU pools: spot capacity, scale to zero outside prod, a hard cap, a GPU taint; checkpoints exist."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from .core import Context, Finding, Resource, Rule, as_list, as_number, get, is_unknown, truthy, types

# A runaway autoscaler on 8x H100 nodes costs more per day than the whole platform per month.
MAX_GPU_NODES = 8
GPU_TAINT_KEY = "nvidia.com/gpu"
EKS_POOL = "aws:eks/nodeGroup:NodeGroup"
GKE_POOL = "gcp:container/nodePool:NodePool"
AKS_POOL = "azure-native:containerservice:AgentPool"
POOLS = types(EKS_POOL, GKE_POOL, AKS_POOL)
# Pools declared inline in the cluster resource: (list input, the stand-alone pool type it mirrors).
INLINE_POOLS = {
    "gcp:container/cluster:Cluster": ("nodePools", GKE_POOL),
    "azure-native:containerservice:ManagedCluster": ("agentPoolProfiles", AKS_POOL),
}
POOL_HOLDERS = types(EKS_POOL, GKE_POOL, AKS_POOL, *INLINE_POOLS)
_AWS_GPU = re.compile(r"^(p\d|g\d|gr\d|inf\d|trn\d)[a-z]*\.", re.I)
_GCP_GPU = re.compile(r"^(a2|a3|a4|g2)-", re.I)
_AZURE_GPU = re.compile(r"^standard_n", re.I)
BUCKETS = types("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket", "azure-native:storage:BlobContainer")


def is_gpu_pool(r: Resource) -> bool:
    i = r.inputs
    if r.type == EKS_POOL:
        return any(_AWS_GPU.match(str(t)) for t in as_list(get(i, "instanceTypes"))) or any(
            k in str(get(i, "amiType") or "").upper() for k in ("NVIDIA", "GPU")
        )
    if r.type == GKE_POOL:
        return bool(as_list(get(i, "nodeConfig.guestAccelerators"))) or bool(
            _GCP_GPU.match(str(get(i, "nodeConfig.machineType") or ""))
        )
    if r.type == AKS_POOL:
        return bool(_AZURE_GPU.match(str(get(i, "vmSize") or "")))
    return False


def _environment(r: Resource, ctx: Context) -> str | None:
    if ctx.environment:
        return ctx.environment
    for path in (
        "tags.environment",
        "labels.environment",
        "nodeConfig.resourceLabels.environment",
        "nodeLabels.environment",
    ):
        v = get(r.inputs, path)
        if isinstance(v, str) and not is_unknown(v):
            return v
    return None


def _taints(r: Resource) -> list[tuple[str, str]]:
    i = r.inputs
    if r.type == EKS_POOL:
        return [(str(get(t, "key")), str(get(t, "effect"))) for t in as_list(get(i, "taints"))]
    if r.type == GKE_POOL:
        return [(str(get(t, "key")), str(get(t, "effect"))) for t in as_list(get(i, "nodeConfig.taints"))]
    out = []
    for t in as_list(get(i, "nodeTaints")):  # "nvidia.com/gpu=true:NoSchedule"
        key, _, effect = str(t).partition(":")
        out.append((key.split("=", 1)[0], {"NoSchedule": "NO_SCHEDULE"}.get(effect, effect)))
    return out


def _sizes(r: Resource) -> tuple[Any, Any]:
    i = r.inputs
    if r.type == EKS_POOL:
        return get(i, "scalingConfig.minSize"), get(i, "scalingConfig.maxSize")
    if r.type == GKE_POOL:
        lo = get(i, "autoscaling.minNodeCount", get(i, "autoscaling.totalMinNodeCount"))
        hi = get(i, "autoscaling.maxNodeCount", get(i, "autoscaling.totalMaxNodeCount"))
        return lo, hi
    return get(i, "minCount"), get(i, "maxCount")


def pools_of(r: Resource) -> Iterator[tuple[str, Resource]]:
    """(message prefix, pool) for a pool resource or each inline pool of a cluster; an inline pool has
    the same fields as the stand-alone type (GKE NodePool, AKS AgentPool), so the same checks apply."""
    if r.type in INLINE_POOLS:
        key, pool_type = INLINE_POOLS[r.type]
        for n, spec in enumerate(as_list(get(r.inputs, key))):
            if isinstance(spec, dict):
                tags = {"tags": r.inputs.get("tags"), "resourceLabels": r.inputs.get("resourceLabels")}
                yield f"{key}[{n}]: ", Resource(pool_type, r.name, r.urn, {**tags, **spec})
    elif POOLS(r.type):
        yield "", r


def check_pool(r: Resource, ctx: Context) -> Iterator[str]:
    for prefix, pool in pools_of(r):
        for message in _check_pool(pool, ctx):
            yield prefix + message


def _check_pool(r: Resource, ctx: Context) -> Iterator[str]:
    if not is_gpu_pool(r):
        return
    i = r.inputs
    spot = {
        EKS_POOL: get(i, "capacityType") == "SPOT",
        GKE_POOL: truthy(get(i, "nodeConfig.spot")) or truthy(get(i, "nodeConfig.preemptible")),
        AKS_POOL: str(get(i, "scaleSetPriority")).lower() == "spot",
    }[r.type]
    if not spot:
        yield "GPU pool is on-demand: use spot capacity (EKS capacityType='SPOT', GKE nodeConfig.spot=True, AKS scaleSetPriority='Spot'); training checkpoints and resumes after preemption."
    lo, hi = (as_number(v) for v in _sizes(r))
    env = _environment(r, ctx)
    if env != "prod" and lo is not None and lo > 0:
        yield f"GPU pool keeps {lo:g} node(s) running in {env or 'a non-prod stack'}: set the minimum to 0 so idle GPUs cost nothing."
    cap = float(ctx.setting("maxGpuNodes", MAX_GPU_NODES))
    if hi is None and not any(is_unknown(v) for v in _sizes(r)):
        yield f"GPU pool has no maximum size: set one <= {cap:g}."
    elif hi is not None and hi > cap:
        yield f"GPU pool maximum {hi:g} exceeds the cap {cap:g} (pack config maxGpuNodes)."
    if not any(k == GPU_TAINT_KEY and e == "NO_SCHEDULE" for k, e in _taints(r)):
        yield f"GPU pool has no {GPU_TAINT_KEY}:NoSchedule taint, so non-GPU pods can land on GPU nodes: add it (pods that need GPUs tolerate it)."


def _mentions_checkpoint(r: Resource) -> bool:
    texts = [r.name, get(r.inputs, "bucket"), get(r.inputs, "name"), get(r.inputs, "containerName")]
    for path in ("tags", "labels"):
        tags = get(r.inputs, path)
        if isinstance(tags, dict):
            texts += list(tags.values())
    return any(isinstance(t, str) and "checkpoint" in t.lower() for t in texts)


def check_checkpoint_bucket(resources: Sequence[Resource], ctx: Context) -> Iterator[Finding]:
    pools = [r for r in resources if any(is_gpu_pool(p) for _, p in pools_of(r))]
    if not pools:
        return
    if not any(BUCKETS(r.type) and _mentions_checkpoint(r) for r in resources):
        yield Finding(
            f"the stack has spot GPU pool(s) {[p.name for p in pools]} but no checkpoint bucket: preempted "
            "training would restart from scratch. Declare a bucket whose name or 'purpose' tag says 'checkpoints'.",
            None,
        )


RULES = (
    Rule(
        name="gpu-node-pool-spot",
        description="GPU node pools use spot capacity, scale to zero outside prod, have a hard cap and a GPU taint.",
        kind="resource",
        severity="medium",
        enforcement="advisory",
        remediation="Spot capacity, min 0 (non-prod), max <= maxGpuNodes, taint nvidia.com/gpu=true:NoSchedule.",
        url="https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html#managed-node-group-capacity-types-spot",
        validate=check_pool,
        applies_to=POOL_HOLDERS,
        config_schema={"maxGpuNodes": {"type": "number"}, "environment": {"type": "string"}},
    ),
    Rule(
        name="checkpoint-bucket-exists",
        description="A stack with spot GPU pools also declares a checkpoint bucket.",
        kind="stack",
        severity="medium",
        enforcement="advisory",
        remediation="Declare the checkpoint bucket (with versioning and a lifecycle rule) in the same stack as the GPU pools.",
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/create-bucket-overview.html",
        validate=check_checkpoint_bucket,
        applies_to=POOL_HOLDERS,
    ),
)
