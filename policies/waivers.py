"""Reviewed waivers (policies/waivers.yaml): who accepted which finding, why, and until when."""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

WAIVERS_FILE = Path(__file__).with_name("waivers.yaml")
REQUIRED = ("rule", "resources", "justification", "approver", "expires")


class WaiverError(ValueError):
    """A waiver entry is incomplete or malformed; the message names the entry and the fix."""


@dataclass(frozen=True)
class Waiver:
    rule: str
    resources: str
    justification: str
    approver: str
    expires: dt.date

    def active(self, today: dt.date) -> bool:
        return today <= self.expires

    def matches(self, rule: str, urn: str) -> bool:
        if rule != self.rule:
            return False
        name = urn.rsplit("::", 1)[-1] if urn else ""
        return fnmatch.fnmatchcase(urn, self.resources) or fnmatch.fnmatchcase(name, self.resources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "resources": self.resources,
            "justification": self.justification,
            "approver": self.approver,
            "expires": self.expires.isoformat(),
        }


def parse(entries: Iterable[dict[str, Any]], source: str = "waivers") -> list[Waiver]:
    out = []
    for n, e in enumerate(entries):
        missing = [k for k in REQUIRED if not e.get(k)]
        if missing:
            raise WaiverError(
                f"{source}: waiver #{n + 1} lacks {missing}; every waiver needs {list(REQUIRED)}"
            )
        expires = e["expires"]
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires)
            except ValueError as err:
                raise WaiverError(f"{source}: waiver #{n + 1} expires={expires!r}: use YYYY-MM-DD") from err
        out.append(
            Waiver(str(e["rule"]), str(e["resources"]), str(e["justification"]), str(e["approver"]), expires)
        )
    return out


def load(path: Path = WAIVERS_FILE) -> list[Waiver]:
    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return parse(data.get("waivers") or [], str(path))


def split(
    violations: list[dict[str, Any]], waivers: list[Waiver], today: dt.date
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(still violations, waived ones with their waiver). Expired waivers do not apply."""
    kept, waived = [], []
    for v in violations:
        w = next((w for w in waivers if w.active(today) and w.matches(v["policy"], v.get("urn") or "")), None)
        if w is None:
            kept.append(v)
        else:
            waived.append({**v, "waiver": w.as_dict()})
    return kept, waived
