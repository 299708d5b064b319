"""torchrun that keeps the trainer's exit codes, so the Kubernetes Job can tell "preempted" from "broken".

    python -m training.elastic --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d \\
        --rdzv_endpoint=HOST:29400 --rdzv_id=JOB -m training train --preset gpu --output /workspace/output

It takes exactly torchrun's arguments and runs torchrun's own launcher (torch.distributed.run). Plain
torchrun exits 1 whenever a worker fails, and with a traceback when the agent itself is sent SIGTERM, so a
worker's "checkpoint saved, resume me" (75) never reaches the pod's exit code; the Job's podFailurePolicy
(training/launch.py) needs it there to retry preemptions without counting them against backoffLimit.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable

from training.errors import EXIT_OK, EXIT_PREEMPTED, EXIT_USAGE

# A worker killed by these signals was being stopped (by the agent after a peer failed, or by the kubelet):
# the trainer turns them into a checkpoint and exit 75, so treat the signal itself the same way.
_STOP_SIGNALS = {-int(signal.SIGTERM), -int(signal.SIGINT)}
EXIT_FAILED = 1


def pod_exit_code(worker_codes: Iterable[int]) -> int:
    """One exit code for the pod from its failed workers' codes (negative = killed by that signal).

    Any bad-config exit (2) wins: retrying cannot help. Otherwise, if every failure is a preemption (75)
    or a stop signal, the pod is preempted (75). Anything else (a crash, an OOM kill) is a real failure,
    reported with the first such code.
    """
    codes = list(worker_codes)
    if not codes:
        return EXIT_OK
    if EXIT_USAGE in codes:
        return EXIT_USAGE
    others = [c for c in codes if c != EXIT_PREEMPTED and c not in _STOP_SIGNALS]
    if not others:
        return EXIT_PREEMPTED
    first = others[0]
    # A signal death shows as 128 + signal in a shell; keep that convention (and never return 0 or 75).
    code = 128 - first if first < 0 else first
    return code if code not in (EXIT_OK, EXIT_PREEMPTED) else EXIT_FAILED


def causes(exc: BaseException) -> str:
    """The exception and what it was raised from: torch's rendezvous errors say only "See inner exception for
    details", and the inner one (the store host's name that does not resolve, the refused or timed-out connection)
    is what tells a DNS record not yet published from a peer that is gone."""
    seen: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 8:  # a cycle in __cause__/__context__ is possible
        # torch's C++ errors append their native stack to the message: its first line is the message.
        first = (str(current).strip().splitlines() or [""])[0]
        text = f"{type(current).__name__}: {first}"
        if text not in seen:
            seen.append(text)
        current = current.__cause__ or current.__context__
    return " <- ".join(seen)


def main(argv: list[str] | None = None) -> int:
    # torchrun installs its SIGTERM handler only once the workers start, after the rendezvous (which can wait
    # up to join_timeout for the other nodes): until then a SIGTERM must still mean "rerun me" (75), not 143.
    from training.preemption import install_early_exit

    install_early_exit()
    from torch.distributed import DistError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(sys.argv[1:] if argv is None else argv))
    except ChildFailedError as exc:
        codes = [failure.exitcode for failure in exc.failures.values()]
        code = pod_exit_code(codes)
        print(f"training.elastic: workers failed with exit codes {codes}; pod exits {code}", file=sys.stderr)
        return code
    except (RendezvousError, DistError) as exc:
        # The agent itself lost the rendezvous (a peer pod went, the store host died, the store timed out):
        # the workers were stopped; whatever they saved is resumable, so the pod is preempted, not broken.
        print(
            f"training.elastic: rendezvous or store lost ({causes(exc)}); exiting {EXIT_PREEMPTED}",
            file=sys.stderr,
        )
        return EXIT_PREEMPTED
    except SignalException as exc:
        # The agent forwarded the signal and gave workers --shutdown_timeout seconds to checkpoint.
        print(
            f"training.elastic: stopped by signal {exc.sigval}; exiting {EXIT_PREEMPTED} (resume me)",
            file=sys.stderr,
        )
        return EXIT_PREEMPTED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
