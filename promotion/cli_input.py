"""The command line's own checks, and the `approval` subcommand: what `python -m promotion` refuses (exit 2) before a
store, a registry or a deploy is touched."""

from __future__ import annotations

import argparse
import sys

from promotion.config import load_config
from promotion.errors import PromotionError
from promotion.store import to_json


def check_args(args: argparse.Namespace) -> None:
    """What the command line alone shows to be wrong, refused before the store, the registry or a deploy is touched.

    A mistyped environment used to be read as an empty one where no gate config was loaded: `history --env prdo`
    said `prdo serves: nothing` (exit 0), `unlock` found no lock, `rescore` nothing to do. An output path that is a
    folder used to fail only after the promotion had been recorded, registered and its alias moved (exit 2)."""
    if args.command in ("history", "rollback", "unlock", "rescore", "approval", "reference"):
        # `approval` too: a mistyped --env wrote an approval no gate reads (exit 0), or said "no approving review"
        # (exit 1) where the environment was the mistake.
        load_config(args.config).environment(args.env)
    if args.command == "promote" and args.local_run:
        # A local run is a registry entry, never deployed: these were ignored in silence (exit 0, nothing ran), and
        # --stack-config failed only once the alias had moved.
        given = [
            flag
            for flag, value in (
                ("--deploy-command", args.deploy_command),
                ("--smoke-command", args.smoke_command),
                ("--post-deploy-loadtest", args.post_deploy_loadtest),
                ("--stack-config", args.stack_config),
            )
            if value
        ]
        if given:
            raise PromotionError(
                f"--local-run never deploys (no pinned image), so {', '.join(given)} would not be used: drop "
                f"{'it' if len(given) == 1 else 'them'}, or promote the images `make images` built without --local-run"
            )
    for name in ("out", "deploy_out"):
        path = getattr(args, name, None)
        if path is not None and path.is_dir():
            raise PromotionError(
                f"--{name.replace('_', '-')} {path} is a folder: give the path of the JSON file to write there"
            )


def approval_command(args: argparse.Namespace) -> int:
    """`approval`: the approval record from GitHub's reviews of the run; 1 when none approves this environment."""
    import datetime as dt
    import json

    from promotion.approval import from_github_reviews

    fix = (
        "give the output of `gh api repos/OWNER/REPO/actions/runs/RUN_ID/approvals` (a JSON list of reviews)"
    )
    try:  # missing, unreadable, not UTF-8 or not JSON: it was a traceback with exit 1, "no approving review"'s code
        reviews = json.loads(args.github_reviews.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PromotionError(f"--github-reviews {args.github_reviews}: {exc}: {fix}") from exc
    if not isinstance(reviews, list) or not all(isinstance(r, dict) for r in reviews):
        raise PromotionError(f"--github-reviews {args.github_reviews} is not a list of reviews: {fix}")
    record = from_github_reviews(
        reviews,
        args.env,
        reference=args.reference,
        now=dt.datetime.now(dt.UTC),
    )
    if record is None:
        print(f"no approving review for {args.env}: the approval gate will fail", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(to_json(record))
    print(f"approved by {record['approver']} for {args.env}")
    return 0
