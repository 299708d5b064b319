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


CLOCK_SKEW = dt.timedelta(minutes=5)
"""How far past the gate's clock an approval time may be: GitHub's clock and a runner's are seconds apart, a forged
or hand-typed date is not."""


def approved_at_problem(value: Any, now: dt.datetime) -> str | None:
    """Why `approved_at` is not a real time at or before `now`, else None. The record names when four eyes saw the
    promotion: "yesterday", a time with no zone (whose?) or one in the future audits nothing."""
    if not value:
        return "no approved_at time"
    try:
        when = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None:
        return f"approved_at {value!r} is not an ISO 8601 time (e.g. 2026-12-02T15:00:00Z, what `approval` writes)"
    if when.tzinfo is None:
        return f"approved_at {value!r} has no time zone: write it in UTC with a Z, as `approval` does"
    if when > now + CLOCK_SKEW:
        shown = now.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return (
            f"approved_at {value} is in the future (now {shown}): an approval is given before the promotion"
        )
    return None
