"""The approval record the prod gate reads, made from GitHub's environment review of a workflow run.

`GET /repos/{owner}/{repo}/actions/runs/{run_id}/approvals` lists the reviews given to a run's
protected environments: [{"state": "approved", "environments": [{"name": "prod"}], "user":
{"login": ...}, "comment": ...}]. It carries no time; the protected job starts only after the
review, so the time the job reads it is an upper bound of when approval was given.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def from_github_reviews(
    reviews: list[dict[str, Any]], environment: str, *, reference: str, now: dt.datetime
) -> dict[str, Any] | None:
    """The last approving review of `environment`, as {approver, approved_at, environment, reference}; else None."""
    approved = [
        r
        for r in reviews
        if r.get("state") == "approved"
        and any(e.get("name") == environment for e in r.get("environments") or [])
    ]
    if not approved:
        return None
    review = approved[-1]
    comment = (review.get("comment") or "").strip()
    return {
        "approver": (review.get("user") or {}).get("login"),
        "approved_at": now.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "environment": environment,
        "reference": f"{reference} {comment}".strip(),
    }
