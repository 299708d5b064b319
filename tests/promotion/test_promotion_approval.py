"""The approval record made from GitHub's environment reviews feeds the prod gate."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from promotion import gates
from promotion.__main__ import main
from promotion.approval import from_github_reviews
from promotion.config import load_config

# The shape `gh api repos/O/R/actions/runs/ID/approvals` returns.
REVIEWS = [
    {"state": "rejected", "comment": "not yet", "environments": [{"id": 1, "name": "prod"}], "user": {"login": "carol"}},
    {"state": "approved", "comment": "ok for staging", "environments": [{"id": 2, "name": "staging"}], "user": {"login": "dave"}},
    {"state": "approved", "comment": "LGTM", "environments": [{"id": 1, "name": "prod"}], "user": {"login": "bob"}},
]  # fmt: skip
NOW = dt.datetime(2026, 12, 2, 15, 0, tzinfo=dt.UTC)


def test_last_approving_review_of_the_environment() -> None:
    record = from_github_reviews(REVIEWS, "prod", reference="https://github.com/o/r/actions/runs/7", now=NOW)
    assert record == {
        "approver": "bob",
        "approved_at": "2026-12-02T15:00:00Z",
        "environment": "prod",
        "reference": "https://github.com/o/r/actions/runs/7 LGTM",
    }
    prod = load_config().environment("prod")
    assert gates.approval(record, prod, requested_by="alice").status == "pass"
    assert gates.approval(record, prod, requested_by="bob").status == "fail"  # self-approval
    assert from_github_reviews(REVIEWS[:1], "prod", reference="", now=NOW) is None  # only a rejection


def test_cli(tmp_path: Path) -> None:
    reviews = tmp_path / "reviews.json"
    reviews.write_text(json.dumps(REVIEWS))
    out = tmp_path / "approval.json"
    assert main(["approval", "--env", "staging", "--github-reviews", str(reviews), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["approver"] == "dave"
    assert (
        main(
            ["approval", "--env", "dev", "--github-reviews", str(reviews), "--out", str(tmp_path / "x.json")]
        )
        == 1
    )  # no approving review of dev: the approval gate would fail
    assert not (tmp_path / "x.json").exists()
