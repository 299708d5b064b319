"""Process-group setup for torchrun (gloo on CPU, NCCL on GPU) and the few collectives the loop needs.

Timeouts are short on purpose (TRAINING_PG_TIMEOUT_S, default 120 s): on a spot pool a
lost peer is the normal case, and a collective that fails fast lets the run exit 75 and be
rescheduled instead of hanging for NCCL's default 10 minutes. NCCL runs with
TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (see ``init``), so its errors reach Python instead of aborting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from training import environment as env


@dataclass(slots=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    device: Any
    initialized: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.initialized:
            import torch.distributed as dist

            dist.barrier()

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self.initialized:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        if not self.initialized:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on one (all ranks must stop at the same step)."""
        if not self.initialized:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def close(self) -> None:
        if self.initialized:
            import torch.distributed as dist

            dist.destroy_process_group()
            self.initialized = False


def init(device: str = "auto") -> Dist:
    import torch

    rank, world, local = env.RANK.get() or 0, env.WORLD_SIZE.get() or 1, env.LOCAL_RANK.get() or 0
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        from training.errors import ConfigError

        raise ConfigError("device", "cuda requested but no CUDA device is visible; use device=auto or cpu")
    if use_cuda:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
    else:
        dev = torch.device("cpu")
    if world == 1:
        return Dist(rank=0, world_size=1, local_rank=0, device=dev)
    import torch.distributed as dist

    timeout = timedelta(seconds=float(env.TRAINING_PG_TIMEOUT_S.get() or 120.0))
    # 2 = CleanUpOnly: on a failed or timed-out collective the watchdog aborts the communicators and the
    # error surfaces in Python (DistBackendError), where run() maps it to exit 75. Modes 1 and 3 (PyTorch's
    # default) tear the process down from the watchdog thread instead: SIGABRT, exit 134, and the Job's
    # podFailurePolicy would fail the whole Job on a lost spot node.
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=timeout)
    return Dist(rank=rank, world_size=world, local_rank=local, device=dev, initialized=True)


# What gloo and NCCL put in the plain RuntimeError a collective raises when a peer vanished (gloo reports a
# reset connection rather than a DistBackendError; an aborted NCCL communicator names itself).
_LOST_PEER_MARKERS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Connection refused",
    "Broken pipe",
    "gloo/transport",
    "Timed out waiting",
    "Socket Timeout",
    "NCCL communicator was aborted",
    "NCCL error",
    "ProcessGroupNCCL",
    "Watchdog caught collective operation timeout",
)


def is_lost_peer(exc: BaseException) -> bool:
    """True when ``exc`` means a peer, the network or the rendezvous store went away (resumable: exit 75)."""
    if isinstance(exc, lost_peer_errors()):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _LOST_PEER_MARKERS)


def lost_peer_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean 'a peer or the store went away' (the run is resumable: exit 75)."""
    import torch.distributed as dist

    return tuple(
        t
        for t in (getattr(dist, n, None) for n in ("DistBackendError", "DistNetworkError", "DistStoreError"))
        if t
    )
